-- CreateEnum
CREATE TYPE "IdempotencyStatus" AS ENUM ('in_flight', 'completed');

-- CreateTable
CREATE TABLE "idempotency_keys" (
    "id" BIGSERIAL NOT NULL,
    "merchant_id" INTEGER NOT NULL,
    "mode" "Mode" NOT NULL,
    "key" VARCHAR(255) NOT NULL,
    "request_fingerprint" TEXT NOT NULL,
    "status" "IdempotencyStatus" NOT NULL DEFAULT 'in_flight',
    "response_status" INTEGER,
    "response_body" TEXT,
    "response_content_type" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "idempotency_keys_expires_at_idx" ON "idempotency_keys"("expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "idempotency_keys_merchant_id_mode_key_key" ON "idempotency_keys"("merchant_id", "mode", "key");
