import type { Event, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { recordRecoveryPoint } from "../../idempotency/scope.ts";
import { enqueueJobs, type JobRequest } from "../../jobs/runner.ts";
import { recordEvent } from "../events/outbox.ts";
import type { PublishedEvent } from "../events/publisher.ts";
import { afterCommit, changeStatus, type StatusChangeDeps, type StatusSubject, type TerminalStatus } from "../events/status-change.ts";

/** A transaction's side of the one status-change function (events/status-change.ts). */
export type { TerminalStatus };
export type StateMachineDeps = StatusChangeDeps;
export { toPublishedEvent } from "../events/status-change.ts";

export interface TransitionRequest {
  transactionId: number;
  to: TerminalStatus;
  /** Columns written together with the status (payment method, receipt, failure code...). */
  changes?: Omit<Prisma.TransactionUpdateManyMutationInput, "status" | "completedAt">;
  /** Jobs that follow from the change (e.g. forwarding a C2B confirmation), queued only when it applies. */
  jobs?: JobRequest[];
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

const transactionSubject: StatusSubject<Transaction> = {
  name: "transaction",
  update: async (tx, id, data) => (await tx.transaction.updateMany({ where: { id, status: "pending" }, data })).count,
  read: (tx, id) => tx.transaction.findUniqueOrThrow({ where: { id } }),
  snapshot: transactionSnapshot,
  link: (id) => ({ transactionId: id }),
};

export async function transitionTransaction(deps: StateMachineDeps, request: TransitionRequest): Promise<TransitionResult> {
  const result = await changeStatus(deps, transactionSubject, { id: request.transactionId, to: request.to, changes: request.changes, jobs: request.jobs });
  return { applied: result.applied, transaction: result.row, event: result.event };
}

export interface NewTransactionOptions {
  /** Emit transaction.pending (a payer is being asked now, e.g. an STK push), with its webhooks. */
  announce: boolean;
  /** Jobs about the new row (e.g. its reconciliation), queued in the same database transaction. */
  jobs?: (transaction: Transaction) => JobRequest[];
}

/**
 * Inserts a pending transaction in the caller's database transaction, with its transaction.pending
 * event, jobs and, for a request with an Idempotency-Key, its recovery point. The caller runs
 * afterCreate() once that transaction commits.
 */
export async function insertPendingTransaction(
  tx: Prisma.TransactionClient,
  data: Prisma.TransactionUncheckedCreateInput,
  options: NewTransactionOptions,
): Promise<{ transaction: Transaction; event: Event | null; jobsQueued: number }> {
  const transaction = await tx.transaction.create({ data: { ...data, status: "pending" } });
  await recordRecoveryPoint(tx, "transaction", transaction.id);
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

/** The news of a new transaction for live subscribers (transactionEvents): the dashboard's table shows it at once. */
export const CREATED_NOTICE = "transaction.created";

export function afterCreate(deps: StateMachineDeps, created: { transaction: Transaction; event: Event | null; jobsQueued: number }): void {
  afterCommit(deps, created.event, created.jobsQueued);
  deps.metrics?.statusChanged("transaction", "pending", created.transaction.channelId);
  // A checkout payment has no event of its own until it settles (an STK push has transaction.pending).
  // Creation is not a status change: told to live subscribers only, with no event row and no webhook,
  // so initialize stays one INSERT. A missed notice costs nothing: the settling event follows.
  if (!created.event) {
    const t = created.transaction;
    deps.publisher.publish({
      id: `${CREATED_NOTICE}:${t.id}`,
      type: CREATED_NOTICE,
      merchantId: t.merchantId,
      mode: t.mode,
      transactionId: t.id,
      payoutId: null,
      createdAt: t.createdAt.toISOString(),
      payload: { transaction: transactionSnapshot(t) },
    });
  }
}
