-- AlterTable
ALTER TABLE "events" ADD COLUMN     "dispute_id" INTEGER;

-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "amount_charged_back" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "dispute_status" TEXT;

-- CreateTable
CREATE TABLE "disputes" (
    "id" SERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "reference" TEXT NOT NULL,
    "transaction_id" INTEGER NOT NULL,
    "transaction_reference" TEXT NOT NULL,
    "channel_id" INTEGER NOT NULL,
    "amount" BIGINT NOT NULL,
    "currency" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "due_by" TIMESTAMPTZ(3),
    "evidence" JSONB,
    "evidence_submitted_at" TIMESTAMPTZ(3),
    "accepted_at" TIMESTAMPTZ(3),
    "provider_reference" TEXT NOT NULL,
    "messages" JSONB NOT NULL DEFAULT '[]',
    "fee" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "closed_at" TIMESTAMPTZ(3),

    CONSTRAINT "disputes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "dispute_files" (
    "id" SERIAL NOT NULL,
    "reference" TEXT NOT NULL,
    "dispute_id" INTEGER NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "name" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "content_type" TEXT NOT NULL,
    "content" BYTEA NOT NULL,
    "provider_file_name" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "dispute_files_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "disputes_reference_key" ON "disputes"("reference");

-- CreateIndex
CREATE INDEX "disputes_merchant_id_mode_created_at_id_idx" ON "disputes"("merchant_id", "mode", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "disputes_merchant_id_mode_status_created_at_id_idx" ON "disputes"("merchant_id", "mode", "status", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "disputes_transaction_id_idx" ON "disputes"("transaction_id");

-- CreateIndex
CREATE INDEX "disputes_status_updated_at_idx" ON "disputes"("status", "updated_at");

-- CreateIndex
CREATE UNIQUE INDEX "disputes_channel_id_provider_reference_key" ON "disputes"("channel_id", "provider_reference");

-- CreateIndex
CREATE UNIQUE INDEX "dispute_files_reference_key" ON "dispute_files"("reference");

-- CreateIndex
CREATE INDEX "dispute_files_dispute_id_idx" ON "dispute_files"("dispute_id");

-- CreateIndex
CREATE INDEX "events_dispute_id_idx" ON "events"("dispute_id");

-- AddForeignKey
ALTER TABLE "events" ADD CONSTRAINT "events_dispute_id_fkey" FOREIGN KEY ("dispute_id") REFERENCES "disputes"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "disputes" ADD CONSTRAINT "disputes_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "disputes" ADD CONSTRAINT "disputes_transaction_id_fkey" FOREIGN KEY ("transaction_id") REFERENCES "transactions"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "disputes" ADD CONSTRAINT "disputes_channel_id_fkey" FOREIGN KEY ("channel_id") REFERENCES "payment_channels"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "dispute_files" ADD CONSTRAINT "dispute_files_dispute_id_fkey" FOREIGN KEY ("dispute_id") REFERENCES "disputes"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "dispute_files" ADD CONSTRAINT "dispute_files_merchant_id_fkey" FOREIGN KEY ("merchant_id") REFERENCES "merchants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- A dispute's status and amounts are the gateway's rules (disputes/store.ts); the database refuses anything else.
ALTER TABLE "disputes" ADD CONSTRAINT "disputes_status_valid" CHECK (status IN ('needs_response', 'under_review', 'won', 'lost'));
ALTER TABLE "disputes" ADD CONSTRAINT "disputes_amounts_valid" CHECK (amount >= 0 AND fee >= 0);
ALTER TABLE "transactions" ADD CONSTRAINT "transactions_charged_back_valid" CHECK (amount_charged_back >= 0 AND amount_charged_back + amount_refunded <= amount);
