import type { PrismaClient } from "../../db/database.ts";
import { Prisma } from "../../db/generated/prisma/client.ts";
import { EVENT_TRANSACTION_PENDING } from "../transactions/store.ts";

/**
 * Retention's statements: each deletes ONE batch (at most `limit` rows) of what is no longer needed and returns
 * how many it deleted. One statement is one short transaction, so writers wait for a batch at most, never for a
 * whole run. The rows are picked by a sub-select that locks them FOR UPDATE SKIP LOCKED: a row a writer holds
 * is skipped (the next run takes it), never waited on, and a picked row cannot change between the pick and the
 * delete (FOR UPDATE re-checks the conditions on its latest version). Ages use the database's clock, so
 * instances with skewed clocks agree (as idempotency claims do).
 *
 * Each pick is ordered by the indexed column its age is measured on (oldest first), so it is an index range scan
 * that stops at the limit; the picked ids reach the DELETE as an array (`id = ANY(ARRAY(...))`), looked up by
 * primary key. As `id IN (SELECT ... LIMIT n)` without an order, the planner could take a sequential scan for
 * the pick (half a table qualifies, so any rows will do) or hash the pick against a scan of the whole table
 * (explain-hot-paths caught both on jobs and idempotency_keys at 100,000 rows).
 *
 * Payments, payouts, refunds, the ledger and reconciliations are never deleted: nothing here names them except
 * to keep rows they still need.
 */

const seconds = (ms: number) => ms / 1000;

/**
 * Deliveries that finished (succeeded, or failed for good) and were created more than `olderThanMs` ago. A
 * pending one (due, or waiting for its next retry, with a job queued for it) is never deleted, however old:
 * a redelivery sets a finished delivery back to pending in the same transaction that queues its job, and the
 * FOR UPDATE re-check then keeps it.
 */
export function deleteFinishedDeliveriesBatch(prisma: PrismaClient, olderThanMs: number, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM webhook_deliveries WHERE id = ANY(ARRAY(
      SELECT id FROM webhook_deliveries
      WHERE created_at < now() - make_interval(secs => ${seconds(olderThanMs)}::double precision) AND status <> 'pending'
      ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ))`;
}

/**
 * Events created more than `olderThanMs` ago that nothing still needs:
 * - no delivery of it remains (the foreign key cascades, so deleting the event would delete a delivery, perhaps
 *   a pending one; deliveries are kept for less long, so by then theirs are usually gone);
 * - its transaction, payout or refund is not still pending (an unfinished object keeps its history).
 */
export function deleteEventsBatch(prisma: PrismaClient, olderThanMs: number, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM events WHERE id = ANY(ARRAY(
      SELECT e.id FROM events e
      WHERE e.created_at < now() - make_interval(secs => ${seconds(olderThanMs)}::double precision)
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
        AND NOT ${Prisma.raw(EVENT_TRANSACTION_PENDING)}
        AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.id = e.payout_id AND p.status = 'pending')
        AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.id = e.refund_id AND r.status = 'pending')
      ORDER BY e.created_at LIMIT ${limit} FOR UPDATE OF e SKIP LOCKED
    ))`;
}

/**
 * Idempotency-Key records that expired more than `graceMs` ago. An expired record already counts as new (a
 * claim overwrites it), so nothing needs it; the grace only leaves it visible to an operator a while longer.
 * A claim re-taking an expired record moves its expiry forward, and the FOR UPDATE re-check then keeps it.
 */
export function deleteExpiredIdempotencyKeysBatch(prisma: PrismaClient, graceMs: number, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM idempotency_keys WHERE id = ANY(ARRAY(
      SELECT id FROM idempotency_keys WHERE expires_at < now() - make_interval(secs => ${seconds(graceMs)}::double precision)
      ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ))`;
}

/**
 * Refresh tokens of sessions that have ended: every token of the family has expired. A refresh refuses an expired
 * token before anything else (the same answer as an unknown one), so deleting one changes no refresh; but logout
 * with an older, expired token of a live family still ends that family, so a family goes only as a whole.
 */
export function deleteExpiredRefreshTokensBatch(prisma: PrismaClient, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM refresh_tokens WHERE id = ANY(ARRAY(
      SELECT r.id FROM refresh_tokens r
      WHERE r.expires_at < now()
        AND NOT EXISTS (SELECT 1 FROM refresh_tokens live WHERE live.family_id = r.family_id AND live.expires_at >= now())
      ORDER BY r.expires_at LIMIT ${limit} FOR UPDATE OF r SKIP LOCKED
    ))`;
}
