import type { PrismaClient } from "../../db/database.ts";
import type { Prisma, Transaction, Event } from "../../db/generated/prisma/client.ts";
import type { EventPublisher, PublishedEvent } from "../events/publisher.ts";

/**
 * The one place a transaction's status changes: pending -> completed | failed, and terminal states
 * never change. The row update and its Event are written in one database transaction; the update is
 * conditional on the row still being pending, so of any number of concurrent callers exactly one
 * applies the change (PostgreSQL re-checks the WHERE after waiting on the row lock). Publishing
 * happens only after commit.
 */
export type TerminalStatus = "completed" | "failed";

export interface TransitionRequest {
  transactionId: number;
  to: TerminalStatus;
  /** Columns written together with the status (payment method, receipt, failure code...). */
  changes?: Omit<Prisma.TransactionUpdateManyMutationInput, "status" | "completedAt">;
}

export interface TransitionResult {
  /** False when the transaction was already terminal: nothing was written. */
  applied: boolean;
  transaction: Transaction;
  event: PublishedEvent | null;
}

/** The transaction as of an event: what subscribers and webhooks receive, no follow-up query needed. */
export function transactionSnapshot(t: Transaction) {
  return {
    id: t.id,
    reference: t.reference,
    amount: Number(t.amount),
    currency: t.currency,
    status: t.status,
    payment_method: t.paymentMethod,
    description: t.description,
    email: t.email,
    phone_number: t.phoneNumber,
    client_reference: t.clientReference,
    checkout_request_id: t.checkoutRequestId,
    provider_reference: t.providerReference,
    failure_code: t.failureCode,
    failure_reason: t.failureReason,
    channel_id: t.channelId,
    customer_id: t.customerId,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
    completed_at: t.completedAt?.toISOString() ?? null,
  };
}

export type TransactionSnapshot = ReturnType<typeof transactionSnapshot>;

export function toPublishedEvent(event: Event): PublishedEvent {
  return {
    id: event.id.toString(),
    type: event.type,
    merchantId: event.merchantId,
    mode: event.mode,
    transactionId: event.transactionId,
    createdAt: event.createdAt.toISOString(),
    payload: event.payload,
  };
}

export async function transitionTransaction(
  prisma: PrismaClient,
  publisher: EventPublisher,
  request: TransitionRequest,
): Promise<TransitionResult> {
  const { transactionId, to } = request;
  const outcome = await prisma.$transaction(async (tx) => {
    const { count } = await tx.transaction.updateMany({
      where: { id: transactionId, status: "pending" },
      data: { ...request.changes, status: to, ...(to === "completed" ? { completedAt: new Date() } : {}) },
    });
    const transaction = await tx.transaction.findUniqueOrThrow({ where: { id: transactionId } });
    if (count === 0) return { transaction, event: null };
    const event = await tx.event.create({
      data: {
        merchantId: transaction.merchantId,
        mode: transaction.mode,
        type: `transaction.${to}`,
        transactionId,
        payload: { transaction: transactionSnapshot(transaction) },
      },
    });
    return { transaction, event };
  });
  const published = outcome.event ? toPublishedEvent(outcome.event) : null;
  if (published) publisher.publish(published);
  return { applied: published !== null, transaction: outcome.transaction, event: published };
}
