-- CreateTable
CREATE TABLE "provider_calls" (
    "id" BIGSERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "connector" TEXT NOT NULL,
    "operation" TEXT NOT NULL,
    "method" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "status_code" INTEGER,
    "duration_ms" INTEGER NOT NULL,
    "request_body" TEXT,
    "response_body" TEXT,
    "error" TEXT,
    "transaction_id" INTEGER,
    "attempt_id" INTEGER,
    "payout_id" INTEGER,
    "refund_id" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "provider_calls_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "provider_calls_transaction_id_id_idx" ON "provider_calls"("transaction_id", "id");

-- CreateIndex
CREATE INDEX "provider_calls_attempt_id_id_idx" ON "provider_calls"("attempt_id", "id");

-- CreateIndex
CREATE INDEX "provider_calls_payout_id_id_idx" ON "provider_calls"("payout_id", "id");

-- CreateIndex
CREATE INDEX "provider_calls_refund_id_id_idx" ON "provider_calls"("refund_id", "id");

-- CreateIndex
CREATE INDEX "provider_calls_created_at_idx" ON "provider_calls"("created_at");
