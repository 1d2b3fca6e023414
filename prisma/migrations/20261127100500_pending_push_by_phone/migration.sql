-- The payer pages refuse a second M-Pesa prompt to a number while one of the same merchant's is still waiting
-- (src/modules/transactions/store.ts PENDING_PUSH_TO_PHONE): only pending pushes are looked up by number, a sliver
-- of the attempts, so a partial index of them serves it and costs settled attempts nothing.
-- Written by hand: Prisma's schema cannot say WHERE (the schema diff ignores partial indexes).

-- CreateIndex
CREATE INDEX IF NOT EXISTS "transaction_attempts_pending_push_phone_idx" ON "transaction_attempts"("phone_number") WHERE "status" = 'pending' AND "method" = 'mpesa';
