import { builder } from "../../graphql/builder.ts";
import type { Transaction } from "../../db/generated/prisma/client.ts";
import { Transaction as TransactionType } from "../transactions/schema.ts";
import type { TransactionSnapshot } from "../transactions/state-machine.ts";
import type { PublishedEvent } from "./publisher.ts";

/** The transaction as it was when the event happened, rebuilt from the event's snapshot. */
function transactionAsOf(event: PublishedEvent): Transaction {
  const t = (event.payload as { transaction: TransactionSnapshot }).transaction;
  // Only the fields the Transaction type exposes; bookkeeping columns are not part of an event.
  return {
    id: t.id,
    merchantId: event.merchantId,
    mode: event.mode,
    reference: t.reference,
    accessCode: "",
    amount: BigInt(t.amount),
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
    createdAt: new Date(t.created_at),
    updatedAt: new Date(t.updated_at),
    completedAt: t.completed_at ? new Date(t.completed_at) : null,
  } as Transaction;
}

const TransactionEvent = builder.objectRef<PublishedEvent>("TransactionEvent").implement({
  description: "A status change of a transaction, with the transaction as of that change: no follow-up query needed.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "Unique per event; use it to drop duplicates." }),
    type: t.exposeString("type", { description: "transaction.completed or transaction.failed" }),
    occurredAt: t.field({ type: "DateTime", resolve: (e) => e.createdAt }),
    transaction: t.field({ type: TransactionType, resolve: (e) => transactionAsOf(e) }),
  }),
});

/** Ends an event stream when the signal aborts (server shutdown), so open subscriptions close cleanly. */
async function* untilAborted<T>(source: AsyncIterableIterator<T>, signal: AbortSignal): AsyncGenerator<T> {
  const aborted = new Promise<IteratorResult<T>>((resolve) => {
    if (signal.aborted) resolve({ done: true, value: undefined });
    signal.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true });
  });
  try {
    while (true) {
      const next = await Promise.race([source.next(), aborted]);
      if (next.done) return;
      yield next.value;
    }
  } finally {
    await source.return?.();
  }
}

builder.subscriptionType({ authScopes: { merchant: true } });

builder.subscriptionFields((t) => ({
  transactionEvents: t.field({
    type: TransactionEvent,
    description: "Every status change of the merchant's transactions in the key's mode.",
    subscribe: (_root, _args, ctx) => untilAborted(ctx.services.publisher.subscribe(ctx.principal!.merchantId, ctx.principal!.mode), ctx.shutdownSignal),
    resolve: (event) => event,
  }),

  transactionStatusChanged: t.field({
    type: TransactionEvent,
    description:
      "Status changes of one transaction. Status changes are final, so the stream ends after the first; " +
      "a transaction that is already completed or failed delivers its last change at once.",
    args: { reference: t.arg.string({ required: true }) },
    subscribe: async function* (_root, { reference }, ctx) {
      const principal = ctx.principal!;
      // Listen first, then look: a change committed in between is not missed.
      const events = untilAborted(ctx.services.publisher.subscribe(principal.merchantId, principal.mode), ctx.shutdownSignal);
      try {
        const transaction = await ctx.services.transactions.getByReference(principal, reference);
        if (transaction.status !== "pending") {
          const last = await ctx.services.transactions.lastEvent(transaction.id);
          if (last) yield last;
          return;
        }
        for await (const event of events) {
          if (event.transactionId === transaction.id) {
            yield event;
            return;
          }
        }
      } finally {
        await events.return(undefined);
      }
    },
    resolve: (event) => event,
  }),
}));
