-- The checkout expiry's sweep (src/modules/transactions/attempts.ts EXPIRED_CHECKOUTS: status = 'pending' AND
-- payment_method IS NULL AND created_at < $1 ORDER BY created_at) needs only the unpaid checkout payments, a sliver of
-- the table: a partial index of them replaces the (status, created_at) index over every transaction, which each
-- payment's insert and settlement had to maintain.
-- IF NOT EXISTS: on a large database an operator may build it first with CREATE INDEX CONCURRENTLY (README, Retention).
-- Written by hand: Prisma's schema cannot say WHERE (the schema diff ignores partial indexes).

-- CreateIndex
CREATE INDEX IF NOT EXISTS "transactions_unpaid_checkout_idx" ON "transactions"("created_at") WHERE "status" = 'pending' AND "payment_method" IS NULL;

-- DropIndex
DROP INDEX "transactions_status_created_at_idx";
