-- IF NOT EXISTS: on a large database an operator may build these first with CREATE INDEX CONCURRENTLY (README, Retention).

-- CreateIndex
CREATE INDEX IF NOT EXISTS "events_created_at_idx" ON "events"("created_at");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "jobs_status_updated_at_idx" ON "jobs"("status", "updated_at");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "refresh_tokens_expires_at_idx" ON "refresh_tokens"("expires_at");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "webhook_deliveries_created_at_idx" ON "webhook_deliveries"("created_at");
