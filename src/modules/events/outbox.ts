import type { Event, Mode, Prisma } from "../../db/generated/prisma/client.ts";
import { enqueueWebhookDeliveries } from "../webhooks/store.ts";

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
  return { event: row, deliveriesQueued: await enqueueWebhookDeliveries(tx, row) };
}
