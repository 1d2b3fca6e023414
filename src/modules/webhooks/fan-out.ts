import type { Event, Prisma } from "../../db/generated/prisma/client.ts";
import { enqueueCte } from "../../jobs/store.ts";

export const WEBHOOK_DELIVERY_JOB = "webhook.deliver";

/**
 * The fan-out as CTEs over a CTE named `ev` (id, merchant_id, mode, type) of the event just recorded: one
 * delivery (and its job) per enabled endpoint of the event's merchant and mode that subscribes to its type.
 * `delivery_jobs` has a row per delivery queued. Part of the statement or transaction that records the
 * event, so an event that never committed is never sent; events with no endpoints cost one index probe.
 */
export const WEBHOOK_FAN_OUT_CTES = `endpoints AS (
  SELECT ep.id AS endpoint_id, ev.id AS event_id, ev.merchant_id, ev.mode FROM ev
  JOIN webhook_endpoints ep ON ep.merchant_id = ev.merchant_id AND ep.mode = ev.mode
  WHERE ep.enabled AND (cardinality(ep.events) = 0 OR ev.type = ANY(ep.events))
), deliveries AS (
  INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, mode)
  SELECT endpoint_id, event_id, merchant_id, mode FROM endpoints
  ON CONFLICT (endpoint_id, event_id) DO NOTHING
  RETURNING id
), ${enqueueCte("delivery_jobs", WEBHOOK_DELIVERY_JOB, { from: "deliveries", payload: { deliveryId: "id" } })}`;

/** The fan-out for an event recorded through Prisma, inside its transaction. Returns the number of deliveries queued. */
export async function enqueueWebhookDeliveries(tx: Prisma.TransactionClient, event: Pick<Event, "id" | "merchantId" | "mode" | "type">): Promise<number> {
  const [row] = await tx.$queryRawUnsafe<{ queued: number }[]>(
    `WITH ev AS (SELECT $1::bigint AS id, $2::int AS merchant_id, $3::"Mode" AS mode, $4::text AS type), ${WEBHOOK_FAN_OUT_CTES}
    SELECT count(*)::int AS queued FROM delivery_jobs`,
    event.id,
    event.merchantId,
    event.mode,
    event.type,
  );
  return row!.queued;
}
