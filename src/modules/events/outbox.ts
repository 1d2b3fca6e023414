import type { Event, Mode, Prisma } from "../../db/generated/prisma/client.ts";
import { EVENT_FAN_OUT_CTES, FAN_OUT_JOBS_QUEUED } from "./fan-out.ts";

export interface NewEvent {
  merchantId: number;
  mode: Mode;
  /** e.g. transaction.completed */
  type: string;
  transactionId?: number | null;
  payoutId?: number | null;
  refundId?: number | null;
  payload: Prisma.InputJsonObject;
}

/**
 * Records an event in the caller's database transaction, with its webhook deliveries queued in the
 * same transaction: the outbox that subscriptions and webhooks read after commit.
 */
export async function recordEvent(tx: Prisma.TransactionClient, event: NewEvent): Promise<{ event: Event; deliveriesQueued: number }> {
  const row = await tx.event.create({
    data: {
      merchantId: event.merchantId,
      mode: event.mode,
      type: event.type,
      transactionId: event.transactionId ?? null,
      payoutId: event.payoutId ?? null,
      refundId: event.refundId ?? null,
      payload: event.payload,
    },
  });
  return { event: row, deliveriesQueued: await fanOut(tx, row) };
}

/**
 * An event addressed to one receiver rather than to subscribers (a webhook endpoint's test event): recorded without
 * the fan-out, so no other endpoint and no e-mail hears of it; the caller queues its one delivery.
 */
export function recordAddressedEvent(tx: Prisma.TransactionClient, event: Omit<NewEvent, "transactionId" | "payoutId" | "refundId">): Promise<Event> {
  return tx.event.create({ data: { merchantId: event.merchantId, mode: event.mode, type: event.type, payload: event.payload } });
}

/** The fan-out (webhook deliveries, e-mails) of an event recorded through Prisma, inside its transaction: the jobs queued. */
async function fanOut(tx: Prisma.TransactionClient, event: Event): Promise<number> {
  const [row] = await tx.$queryRawUnsafe<{ queued: number }[]>(
    `WITH ev AS (SELECT $1::bigint AS id, $2::int AS merchant_id, $3::"Mode" AS mode, $4::text AS type, $5::jsonb AS payload), ${EVENT_FAN_OUT_CTES}
    SELECT ${FAN_OUT_JOBS_QUEUED} AS queued`,
    event.id,
    event.merchantId,
    event.mode,
    event.type,
    JSON.stringify(event.payload),
  );
  return row!.queued;
}
