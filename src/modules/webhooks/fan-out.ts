import type { Event, Prisma } from "../../db/generated/prisma/client.ts";

export const WEBHOOK_DELIVERY_JOB = "webhook.deliver";

/**
 * Inside the transaction that records an event: one delivery (and its job) per enabled endpoint of the
 * event's merchant and mode that subscribes to its type. Rolled back with the event, so an event that
 * never committed is never sent. One statement, so events with no endpoints cost one index probe.
 * Returns the number of deliveries queued.
 */
export function enqueueWebhookDeliveries(tx: Prisma.TransactionClient, event: Pick<Event, "id" | "merchantId" | "mode" | "type">): Promise<number> {
  return tx.$executeRaw`
    WITH endpoints AS (
      SELECT id FROM webhook_endpoints
      WHERE merchant_id = ${event.merchantId} AND mode = ${event.mode}::"Mode" AND enabled
        AND (cardinality(events) = 0 OR ${event.type} = ANY(events))
    ), deliveries AS (
      INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, mode)
      SELECT id, ${event.id}, ${event.merchantId}, ${event.mode}::"Mode" FROM endpoints
      ON CONFLICT (endpoint_id, event_id) DO NOTHING
      RETURNING id
    )
    INSERT INTO jobs (kind, payload) SELECT ${WEBHOOK_DELIVERY_JOB}, jsonb_build_object('deliveryId', id) FROM deliveries`;
}
