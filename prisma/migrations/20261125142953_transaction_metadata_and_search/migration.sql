-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "metadata" JSONB;

-- CreateIndex
CREATE INDEX "transactions_merchant_id_mode_client_reference_idx" ON "transactions"("merchant_id", "mode", "client_reference");

-- CreateIndex
CREATE INDEX "transactions_merchant_id_mode_provider_reference_idx" ON "transactions"("merchant_id", "mode", "provider_reference");

-- CreateIndex
CREATE INDEX "transactions_merchant_id_mode_email_idx" ON "transactions"("merchant_id", "mode", "email");

-- CreateIndex
CREATE INDEX "transactions_merchant_id_mode_phone_number_idx" ON "transactions"("merchant_id", "mode", "phone_number");
