-- AlterTable
ALTER TABLE "events" ADD COLUMN     "refund_id" INTEGER;

-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "amount_refunded" BIGINT NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "refunds" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "reference" TEXT NOT NULL,
    "transaction_id" INTEGER NOT NULL,
    "transaction_reference" TEXT NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "amount" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "status" "TransactionStatus" NOT NULL DEFAULT 'pending',
    "method" TEXT NOT NULL,
    "reason" TEXT,
    "merchant_note" TEXT,
    "customer_note" TEXT,
    "provider_request_id" TEXT NOT NULL,
    "provider_reference" TEXT,
    "failure_code" TEXT,
    "failure_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "refunds_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "refunds_reference_key" ON "refunds"("reference");

-- CreateIndex
CREATE UNIQUE INDEX "refunds_provider_request_id_key" ON "refunds"("provider_request_id");

-- CreateIndex
CREATE INDEX "refunds_merchant_id_mode_created_at_id_idx" ON "refunds"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "refunds_merchant_id_mode_status_created_at_idx" ON "refunds"("merchant_id", "mode", "status", "created_at" DESC);

-- CreateIndex
CREATE INDEX "refunds_transaction_id_idx" ON "refunds"("transaction_id");

-- CreateIndex
CREATE INDEX "events_refund_id_idx" ON "events"("refund_id");

-- AddForeignKey
ALTER TABLE "events" ADD CONSTRAINT "events_refund_id_fkey" FOREIGN KEY ("refund_id") REFERENCES "refunds"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "refunds" ADD CONSTRAINT "refunds_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "refunds" ADD CONSTRAINT "refunds_transaction_id_fkey" FOREIGN KEY ("transaction_id") REFERENCES "transactions"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "refunds" ADD CONSTRAINT "refunds_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
