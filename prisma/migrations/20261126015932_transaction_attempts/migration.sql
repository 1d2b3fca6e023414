-- CreateTable
CREATE TABLE "transaction_attempts" (
    "id" SERIAL NOT NULL,
    "transaction_id" INTEGER NOT NULL,
    "method" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "code" TEXT,
    "reason" TEXT,
    "detail" TEXT,
    "channel_id" INTEGER,
    "phone_number" TEXT,
    "checkout_request_id" TEXT,
    "provider_reference" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "settled_at" TIMESTAMPTZ(3),

    CONSTRAINT "transaction_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "transaction_attempts_transaction_id_id_idx" ON "transaction_attempts"("transaction_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "transaction_attempts_channel_id_checkout_request_id_key" ON "transaction_attempts"("channel_id", "checkout_request_id");

-- CreateIndex
CREATE INDEX "transactions_status_created_at_idx" ON "transactions"("status", "created_at");

-- AddForeignKey
ALTER TABLE "transaction_attempts" ADD CONSTRAINT "transaction_attempts_transaction_id_fkey" FOREIGN KEY ("transaction_id") REFERENCES "transactions"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- What an attempt may be (text, as the status machine's SQL writes it).
ALTER TABLE "transaction_attempts" ADD CONSTRAINT "transaction_attempts_method_valid" CHECK ("method" IN ('card', 'mpesa'));
ALTER TABLE "transaction_attempts" ADD CONSTRAINT "transaction_attempts_status_valid" CHECK ("status" IN ('pending', 'succeeded', 'failed'));
