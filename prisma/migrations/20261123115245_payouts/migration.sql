-- AlterTable
ALTER TABLE "events" ADD COLUMN     "payout_id" INTEGER;

-- CreateTable
CREATE TABLE "payouts" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "reference" TEXT NOT NULL,
    "client_reference" TEXT,
    "amount" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "phone_number" TEXT NOT NULL,
    "status" "TransactionStatus" NOT NULL DEFAULT 'pending',
    "command_id" TEXT NOT NULL,
    "description" TEXT,
    "channel_id" INTEGER NOT NULL,
    "provider_request_id" TEXT NOT NULL,
    "provider_conversation_id" TEXT,
    "provider_reference" TEXT,
    "failure_code" TEXT,
    "failure_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "payouts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "payouts_reference_key" ON "payouts"("reference");

-- CreateIndex
CREATE UNIQUE INDEX "payouts_provider_request_id_key" ON "payouts"("provider_request_id");

-- CreateIndex
CREATE INDEX "payouts_merchant_id_mode_created_at_id_idx" ON "payouts"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "payouts_merchant_id_mode_status_created_at_idx" ON "payouts"("merchant_id", "mode", "status", "created_at" DESC);

-- CreateIndex
CREATE INDEX "events_payout_id_idx" ON "events"("payout_id");

-- AddForeignKey
ALTER TABLE "events" ADD CONSTRAINT "events_payout_id_fkey" FOREIGN KEY ("payout_id") REFERENCES "payouts"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payouts" ADD CONSTRAINT "payouts_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "payouts" ADD CONSTRAINT "payouts_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
