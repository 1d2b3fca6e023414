-- Idempotency records become per caller (API key or user) and their response bodies are sealed. Records
-- written before this migration hold bodies in plaintext (full API keys, webhook secrets) and name no caller,
-- so they are deleted rather than kept: at worst a retry of a request sent before the upgrade runs again.
DELETE FROM "idempotency_keys";

-- DropIndex
DROP INDEX "idempotency_keys_merchant_id_mode_key_key";

-- AlterTable
ALTER TABLE "idempotency_keys" ADD COLUMN     "principal" VARCHAR(40) NOT NULL;

-- CreateIndex
CREATE UNIQUE INDEX "idempotency_keys_merchant_id_mode_principal_key_key" ON "idempotency_keys"("merchant_id", "mode", "principal", "key");
