import type { ObjectRef } from "@pothos/core";
import { builder, type GatewaySchemaTypes } from "../../graphql/builder.ts";
import type { GraphQLContext } from "../../graphql/context.ts";
import { sharedExecution } from "../../graphql/fanout.ts";
import { readySignal } from "../../graphql/ready.ts";
import type { Transaction } from "../../db/generated/prisma/client.ts";
import { Transaction as TransactionType } from "../transactions/schema.ts";
import type { TransactionSnapshot } from "../transactions/status.ts";
import { webhookBody } from "../webhooks/payload.ts";
import type { PublishedEvent } from "./publisher.ts";
import { toPublishedEvent } from "./status-machine.ts";
import { untilAborted } from "./until-aborted.ts";

/**
 * The transaction as it was when the event happened, rebuilt from the event's snapshot: every column the Transaction
 * type reads, typed as the model has them (the snapshot crossed Redis as JSON: amounts are numbers, times strings).
 * Typed without a cast, so a column added to the model must be decided on here. Its relations (refunds, channel,
 * customer, attempts, events) and `refunded` are read from the database, as they are now.
 */
function transactionAsOf(event: PublishedEvent): Transaction {
  const t = (event.payload as { transaction: TransactionSnapshot }).transaction;
  const time = (value: string | null | undefined) => (value ? new Date(value) : null);
  return {
    id: t.id,
    merchantId: event.merchantId,
    mode: event.mode,
    reference: t.reference,
    amount: BigInt(t.amount),
    // Events recorded before the snapshot carried it: a transaction's own events all precede its refunds.
    amountRefunded: BigInt(t.amount_refunded ?? 0),
    // A transaction's events are its status changes, all before any dispute (only a completed payment is disputed).
    disputeStatus: null,
    amountChargedBack: 0n,
    // Events recorded before the snapshot carried the fee: null, as for a payment not yet completed.
    fee: t.fee == null ? null : BigInt(t.fee),
    currency: t.currency,
    status: t.status,
    paymentMethod: t.payment_method,
    description: t.description,
    email: t.email,
    phoneNumber: t.phone_number,
    clientReference: t.client_reference,
    checkoutRequestId: t.checkout_request_id,
    providerReference: t.provider_reference,
    failureCode: t.failure_code,
    failureReason: t.failure_reason,
    channelId: t.channel_id,
    customerId: t.customer_id,
    // Events recorded before metadata existed have no key: null, as for a payment sent without it.
    metadata: t.metadata ?? null,
    createdAt: new Date(t.created_at),
    updatedAt: new Date(t.updated_at),
    completedAt: time(t.completed_at),
    // Bookkeeping columns: no Transaction field reads them, and an event does not carry them.
    accessCode: "",
    chargeStartedAt: null,
    providerAccessCode: null,
    providerCheckoutUrl: null,
    callbackUrl: null,
    savePaymentMethod: false,
    paymentMethodId: null,
    // Not in the snapshot: Transaction.invoice reads the row.
    invoiceId: null,
    invoiceAttempt: null,
  };
}

const TransactionEvent = builder.objectRef<PublishedEvent>("TransactionEvent").implement({
  description: "A status change of a transaction, with the transaction as of that change: no follow-up query needed.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "Unique per event; use it to drop duplicates." }),
    type: t.exposeString("type", { description: "transaction.pending (an STK push was sent), transaction.completed or transaction.failed" }),
    occurredAt: t.field({ type: "DateTime", resolve: (e) => e.createdAt }),
    transaction: t.field({ type: TransactionType, resolve: (e) => transactionAsOf(e) }),
    webhookBody: t.field({
      type: "JSON",
      description: "The body a webhook endpoint receives for this event (what `cli webhooks listen` forwards).",
      resolve: (e) => JSON.parse(webhookBody(e)) as unknown,
    }),
  }),
});

builder.objectField(TransactionType, "events", (t) =>
  t.field({
    type: [TransactionEvent],
    description: "Its status changes, oldest first, each with the transaction as of that change (their ids are what webhookDeliveries(eventId) takes).",
    resolve: async (transaction, _args, ctx) => {
      const rows = await ctx.prisma.event.findMany({ where: { transactionId: transaction.id, merchantId: ctx.principal!.merchantId }, orderBy: { id: "asc" }, take: 100 });
      return rows.map(toPublishedEvent);
    },
  }),
);

/** One event of a payment's history: its own status changes, and its refunds' and disputes'. */
interface HistoryEvent {
  id: bigint;
  type: string;
  createdAt: Date;
  payload: unknown;
  refund: { reference: string } | null;
  dispute: { reference: string } | null;
}

const PaymentHistoryEvent = builder.objectRef<HistoryEvent>("PaymentHistoryEvent").implement({
  description: "An event of a payment, of its refunds or of its disputes, with the body its webhook deliveries carry.",
  fields: (t) => ({
    id: t.id({ description: "What webhookDeliveries(eventId) takes.", resolve: (e) => e.id.toString() }),
    type: t.exposeString("type", { description: "transaction.*, refund.* or dispute.*" }),
    occurredAt: t.field({ type: "DateTime", resolve: (e) => e.createdAt }),
    subjectReference: t.string({
      nullable: true,
      description: "The refund's or dispute's reference for their events; null for the payment's own.",
      resolve: (e) => e.refund?.reference ?? e.dispute?.reference ?? null,
    }),
    webhookBody: t.field({ type: "JSON", description: "The request body each webhook endpoint is sent for this event (never a secret or signature).", resolve: (e) => JSON.parse(webhookBody(e)) as unknown }),
  }),
});

builder.objectField(TransactionType, "history", (t) =>
  t.field({
    type: [PaymentHistoryEvent],
    description: "Its events, its refunds' and its disputes', oldest first (at most 200): what the dashboard's payment page lists with their webhook deliveries.",
    resolve: (transaction, _args, ctx) =>
      ctx.prisma.event.findMany({
        where: {
          merchantId: ctx.principal!.merchantId,
          OR: [{ transactionId: transaction.id }, { refund: { transactionId: transaction.id } }, { dispute: { transactionId: transaction.id } }],
        },
        select: { id: true, type: true, createdAt: true, payload: true, refund: { select: { reference: true } }, dispute: { select: { reference: true } } },
        orderBy: { id: "asc" },
        take: 200,
      }),
  }),
);

/**
 * Every event of the caller's merchant and mode that passes `keep`, until ctx.shutdownSignal aborts (shutdown, or
 * a shared execution's last subscriber leaving). `keep` must depend on the event alone for a field marked
 * sharedExecution.
 */
export async function* merchantEvents(ctx: GraphQLContext, keep: (event: PublishedEvent) => boolean, onListening?: () => void): AsyncGenerator<PublishedEvent> {
  const { merchantId, mode } = ctx.principal!;
  const source = ctx.services.publisher.subscribe(merchantId, mode);
  const first = source.next(); // the pub/sub stream listens from its first next()
  if (onListening) {
    try {
      await ctx.services.publisher.listening(merchantId, mode);
    } catch (error) {
      await source.return?.();
      throw error;
    }
    onListening();
  }
  for await (const event of untilAborted(source, ctx.shutdownSignal, first)) {
    if (keep(event)) yield event;
  }
}

/** The opt-in `ready` argument of the event subscriptions (see graphql/ready.ts). */
/**
 * A payout's or refund's status-change event: its id, type and time, the object as of the change (under
 * `key` in the event's payload, already in its /v1 shape) and the body its webhooks carry.
 */
export function statusEventType<Snapshot extends object>(name: string, description: string, key: string, snapshot: ObjectRef<PothosSchemaTypes.ExtendDefaultTypes<GatewaySchemaTypes>, Snapshot>) {
  return builder.objectRef<PublishedEvent>(name).implement({
    description,
    fields: (t) => ({
      id: t.exposeID("id", { description: "Unique per event (the webhook-id of its deliveries)." }),
      type: t.exposeString("type"),
      occurredAt: t.field({ type: "DateTime", resolve: (e) => e.createdAt }),
      [key]: t.field({ type: snapshot, resolve: (e) => (e.payload as Record<string, Snapshot>)[key] as never }),
      webhookBody: t.field({ type: "JSON", resolve: (e) => JSON.parse(webhookBody(e)) as unknown }),
    }),
  });
}

type SubscriptionFields = Parameters<Parameters<typeof builder.subscriptionFields>[0]>[0];

/** Every event of one kind (`belongs`) of the caller's merchant in its mode, with the `ready` signal; shared execution across subscribers. */
export function merchantEventsField(t: SubscriptionFields, type: ObjectRef<PothosSchemaTypes.ExtendDefaultTypes<GatewaySchemaTypes>, PublishedEvent>, description: string, belongs: (event: PublishedEvent) => boolean) {
  return t.field({
    type,
    description,
    args: { ready: t.arg(readyArgument) },
    subscribe: (_root, args, ctx) => merchantEvents(ctx, belongs, args.ready ? readySignal(ctx) : undefined),
    resolve: (event) => event,
    extensions: sharedExecution,
  });
}

export const readyArgument = {
  type: "Boolean",
  required: false,
  defaultValue: false,
  description:
    "true: the first message carries no data and `extensions: { ready: true }`, sent once the subscription listens; " +
    "every event committed after it arrives is delivered (graphql-ws acknowledges the connection, not the subscription).",
} as const;

/**
 * The one settling change of one object (a transaction or a payout): delivered when it happens, or at
 * once when it already has; then the stream ends, since settled states are final. It listens first,
 * then looks, so a change committed in between is not missed (the pub/sub iterator starts listening
 * on its first next(), hence asking for the first event right away).
 */
export async function* settlingChange(
  ctx: GraphQLContext,
  look: () => Promise<{ settled: boolean; lastEvent: () => Promise<PublishedEvent | null>; isSettling: (event: PublishedEvent) => boolean }>,
): AsyncGenerator<PublishedEvent> {
  const source = ctx.services.publisher.subscribe(ctx.principal!.merchantId, ctx.principal!.mode);
  const first = source.next();
  try {
    const subject = await look();
    if (subject.settled) {
      const last = await subject.lastEvent();
      if (last) yield last;
      return;
    }
    for await (const event of untilAborted(source, ctx.shutdownSignal, first)) {
      if (subject.isSettling(event)) {
        yield event;
        return;
      }
    }
  } finally {
    await source.return?.();
  }
}

/** The events that settle a transaction: its final status changes. */
const SETTLING_TYPES = new Set(["transaction.completed", "transaction.failed"]);

builder.subscriptionType({});

builder.subscriptionFields((t) => ({
  transactionEvents: t.field({
    type: TransactionEvent,
    description:
      "Every event of the merchant's transactions in the key's mode: transaction.created (live only: a checkout payment " +
      "was started; no webhook and no stored event), transaction.pending, .completed and .failed.",
    args: { ready: t.arg(readyArgument) },
    subscribe: (_root, args, ctx) => merchantEvents(ctx, (event) => event.transactionId !== null, args.ready ? readySignal(ctx) : undefined),
    resolve: (event) => event,
    extensions: sharedExecution,
  }),

  transactionStatusChanged: t.field({
    type: TransactionEvent,
    description:
      "Status changes of one transaction. Status changes are final, so the stream ends after the first; " +
      "a transaction that is already completed or failed delivers its last change at once.",
    args: { reference: t.arg.string({ required: true }) },
    subscribe: (_root, { reference }, ctx) =>
      settlingChange(ctx, async () => {
        const transaction = await ctx.services.transactions.getByReference(ctx.principal!, reference);
        return {
          settled: transaction.status !== "pending",
          lastEvent: () => ctx.services.transactions.lastSettlingEvent(transaction.id),
          // Only a settling event: an STK push's transaction.pending and the creation notice (published at initialize,
          // and through Redis possibly arriving after this subscription started listening) are not.
          isSettling: (event) => event.transactionId === transaction.id && SETTLING_TYPES.has(event.type),
        };
      }),
    resolve: (event) => event,
  }),
}));
