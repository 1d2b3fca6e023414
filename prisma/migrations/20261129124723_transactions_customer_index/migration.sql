-- CreateIndex
CREATE INDEX "transactions_merchant_id_mode_customer_id_idx" ON "transactions"("merchant_id", "mode", "customer_id");
