import { scopeOf, type Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { cancel, enqueueJobs } from "../../jobs/store.ts";
import { recordAddressedEvent } from "../events/outbox.ts";
import type { Endpoints } from "./endpoints.ts";
import { WEBHOOK_TEST_EVENT } from "./event-types.ts";
import * as store from "./store.ts";
import { WEBHOOK_DELIVERY_JOB, type DeliveryQuery } from "./store.ts";

export interface DeliveryFilters {
  endpointId?: number | null;
  eventId?: string | null;
  limit?: number | null;
}

function parseEventId(value: string, field: string): bigint {
  if (!/^\d{1,18}$/.test(value)) throw new ValidationError(field, "must be an event id");
  return BigInt(value);
}

/** The deliveries as a merchant sees and steers them: the list, and sending an event again. */
export function createDeliveries(deps: { prisma: PrismaClient; reader: PrismaClient; jobs: JobRunner; endpoints: Pick<Endpoints, "getEndpoint"> }) {
  const { prisma } = deps;
  return {
    /** The latest 2xx an enabled endpoint of the caller's merchant and mode answered since `since`, or null. */
    latestSuccessfulDelivery: (principal: Principal, since: Date) => store.latestSuccessfulDelivery(deps.reader, principal, since),

    /** Newest first; only the caller's merchant and mode. */
    listDeliveries(principal: Principal, filters: DeliveryFilters, query: DeliveryQuery = {}) {
      const limit = filters.limit ?? 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ValidationError("limit", "must be between 1 and 100");
      const eventId = filters.eventId != null ? parseEventId(filters.eventId, "eventId") : null;
      return store.listDeliveries(deps.reader, principal, { endpointId: filters.endpointId ?? null, eventId, limit }, query);
    },

    /**
     * A signed `webhook.test` event to one endpoint, through the normal delivery path (the job, its signature, its
     * retries, the deliveries list): how a merchant checks a receiver without making a payment. Sent to a disabled
     * endpoint too, whose delivery then fails as "endpoint disabled" (re-enable it first).
     */
    async sendTestEvent(principal: Principal, endpointId: number) {
      const endpoint = await deps.endpoints.getEndpoint(principal, endpointId);
      const delivery = await prisma.$transaction(async (tx) => {
        const event = await recordAddressedEvent(tx, {
          ...scopeOf(principal),
          type: WEBHOOK_TEST_EVENT,
          payload: { message: "A test event from the gateway: your endpoint receives and verifies webhooks.", endpoint_id: endpoint.id, endpoint_url: endpoint.url },
        });
        const [row] = await store.restartDeliveries(tx, principal, [endpoint.id], event.id);
        await enqueueJobs(tx, [{ kind: WEBHOOK_DELIVERY_JOB, payload: { deliveryId: Number(row!.id) } }]);
        return row!;
      });
      deps.jobs.nudge();
      return delivery;
    },

    /**
     * Sends an event again: to one endpoint, or to every enabled endpoint subscribed to its type. A
     * delivery that already exists starts a fresh round of attempts.
     */
    async resendEvent(principal: Principal, eventIdText: string, endpointId?: number | null) {
      const eventId = parseEventId(eventIdText, "eventId");
      const event = await store.findEvent(prisma, principal, eventId);
      if (!event) throw new NotFoundError(`Event ${eventIdText}`);
      const endpoints = endpointId != null ? [await deps.endpoints.getEndpoint(principal, endpointId)] : await store.subscribedEndpoints(prisma, principal, event.type);
      const deliveries = await prisma.$transaction(async (tx) => {
        const rows = await store.restartDeliveries(
          tx,
          principal,
          endpoints.map((e) => e.id),
          eventId,
        );
        // A retry still scheduled for one of these would double the new round of attempts.
        for (const d of rows) await cancel(tx, WEBHOOK_DELIVERY_JOB, { deliveryId: Number(d.id) });
        await enqueueJobs(tx, rows.map((d) => ({ kind: WEBHOOK_DELIVERY_JOB, payload: { deliveryId: Number(d.id) } })));
        return rows;
      });
      if (deliveries.length) deps.jobs.nudge();
      return deliveries;
    },
  };
}
