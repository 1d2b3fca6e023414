-- AlterTable
ALTER TABLE "idempotency_keys" ADD COLUMN     "locked_until" TIMESTAMPTZ(3),
ADD COLUMN     "recovery_point" TEXT;

-- AlterTable
ALTER TABLE "transactions" ADD COLUMN     "charge_started_at" TIMESTAMPTZ(3);
