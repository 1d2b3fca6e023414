-- The job poller's claim (src/jobs/store.ts claimDue: kind = $k AND status <> 'failed' AND run_at <= now ORDER BY run_at)
-- walked every failed job of its kind in (kind, run_at): failed jobs are kept for operators (JOB_RETENTION_DAYS) and their
-- run_at lies in the past, so each poll read them all. This index holds only what is still due or running, so a poll
-- costs the same with a million failed jobs as with none (test/postgres/due-work-indexes.test.ts). A job key's queued
-- rows (cancel, reschedule) are found through jobs_status_updated_at_idx.
-- IF NOT EXISTS: on a large database an operator may build it first with CREATE INDEX CONCURRENTLY (README, Retention).
-- Written by hand: Prisma's schema cannot say WHERE (the schema diff ignores partial indexes).

-- CreateIndex
CREATE INDEX IF NOT EXISTS "jobs_due_idx" ON "jobs"("kind", "run_at") WHERE "status" <> 'failed';

-- DropIndex
DROP INDEX "jobs_kind_run_at_idx";
