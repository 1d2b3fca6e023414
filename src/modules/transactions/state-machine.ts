import type { PrismaClient } from "../../db/database.ts";
import type { Prisma, Transaction, Event } from "../../db/generated/prisma/client.ts";
import { enqueueJobs, type JobRequest, type JobRunner } from "../../jobs/runner.ts";
import { recordEvent } from "../events/outbox.ts";
import type { EventPublisher, PublishedEvent } from "../events/publisher.ts";

/**
 * The one place a transaction's status changes: pending -> completed | failed, and terminal states
 * never change. The row update and its Event are written in one database transaction; the update is
 * conditional on the row still being pending, so of any number of concurrent callers exactly one
 * applies the change (PostgreSQL re-checks the WHERE after waiting on the row lock). The event's
 * webhook deliveries and any follow-up jobs commit with it; publishing happens only after commit.
 */
export type TerminalStatus = "completed" | "failed";

export interface TransitionRequest {
  transactionId: number;
  to: TerminalStatus;
  /** Columns written together with the status (payment method, receipt, failure code...). */
  changes?: Omit<Prisma.TransactionUpdateManyMutationInput, "status" | "completedAt">;
  /** Jobs that follow from the change (e.g. forwarding a C2B confirmation), queued only when it applies. */
  jobs?: JobRequest[];
}

export interface StateMachineDeps {
  prisma: PrismaClient;
  publisher: EventPublisher;
  jobs: JobRunner;
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

/** After commit: subscribers hear of the event, and this instance starts on the jobs it queued. */
function afterCommit(deps: StateMachineDeps, event: Event | null, jobsQueued: number): PublishedEvent | null {
  const published = event ? toPublishedEvent(event) : null;
  if (published) deps.publisher.publish(published);
  if (jobsQueued > 0) deps.jobs.nudge();
  return published;
}

export async function transitionTransaction(deps: StateMachineDeps, request: TransitionRequest): Promise<TransitionResult> {
  const { transactionId, to } = request;
  const outcome = await deps.prisma.$transaction(async (tx) => {
    const { count } = await tx.transaction.updateMany({
      where: { id: transactionId, status: "pending" },
      data: { ...request.changes, status: to, ...(to === "completed" ? { completedAt: new Date() } : {}) },
    });
    const transaction = await tx.transaction.findUniqueOrThrow({ where: { id: transactionId } });
    if (count === 0) return { transaction, event: null, jobsQueued: 0 };
    const { event, deliveriesQueued } = await recordEvent(tx, {
      merchantId: transaction.merchantId,
      mode: transaction.mode,
      type: `transaction.${to}`,
      transactionId,
      payload: { transaction: transactionSnapshot(transaction) },
    });
    await enqueueJobs(tx, request.jobs ?? []);
    return { transaction, event, jobsQueued: deliveriesQueued + (request.jobs?.length ?? 0) };
  });
  const event = afterCommit(deps, outcome.event, outcome.jobsQueued);
  return { applied: event !== null, transaction: outcome.transaction, event };
}

export interface NewTransactionOptions {
  /** Emit transaction.pending (a payer is being asked now, e.g. an STK push), with its webhooks. */
  announce: boolean;
  /** Jobs about the new row (e.g. its reconciliation), queued in the same database transaction. */
  jobs?: (transaction: Transaction) => JobRequest[];
}

/**
 * Inserts a pending transaction, in the caller's database transaction when `tx` is given, with its
 * transaction.pending event and jobs. The caller runs afterCreate() once that transaction commits.
 */
export async function insertPendingTransaction(
  tx: Prisma.TransactionClient,
  data: Prisma.TransactionUncheckedCreateInput,
  options: NewTransactionOptions,
): Promise<{ transaction: Transaction; event: Event | null; jobsQueued: number }> {
  const transaction = await tx.transaction.create({ data: { ...data, status: "pending" } });
  const jobs = options.jobs?.(transaction) ?? [];
  await enqueueJobs(tx, jobs);
  let jobsQueued = jobs.length;
  let event: Event | null = null;
  if (options.announce) {
    const recorded = await recordEvent(tx, {
      merchantId: transaction.merchantId,
      mode: transaction.mode,
      type: "transaction.pending",
      transactionId: transaction.id,
      payload: { transaction: transactionSnapshot(transaction) },
    });
    event = recorded.event;
    jobsQueued += recorded.deliveriesQueued;
  }
  return { transaction, event, jobsQueued };
}

export function afterCreate(deps: StateMachineDeps, created: { event: Event | null; jobsQueued: number }): void {
  afterCommit(deps, created.event, created.jobsQueued);
}
