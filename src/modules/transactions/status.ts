import type { Event, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { recordRecoveryPoint, type MaybeKeyed } from "../../idempotency/scope.ts";
import { enqueueCte, enqueueJobs, type JobRequest } from "../../jobs/store.ts";
import { recordEvent } from "../events/outbox.ts";
import type { PublishedEvent } from "../events/publisher.ts";
import { afterCommit, applyTransition, type StatusMachineDeps, type StatusTable, type TerminalStatus } from "../events/status-machine.ts";
import { settleAttemptCte, type AttemptVerdict } from "./attempt-store.ts";
import { SETTLED_SNAPSHOT, transactionSnapshot, type TransactionSnapshot } from "./snapshot.ts";
import { createPending, findById, TRANSACTION_COLUMNS, transactionFromRow, type TransactionRow } from "./store.ts";

export type { TerminalStatus };
export type StateMachineDeps = StatusMachineDeps;
export { toPublishedEvent } from "../events/status-machine.ts";
export { transactionSnapshot, type SnapshotAttempt, type TransactionSnapshot } from "./snapshot.ts";

/** The columns a transaction's status change may write with the status, by model field. */
const CHANGE_COLUMNS = {
  paymentMethod: "payment_method",
  providerReference: "provider_reference",
  failureCode: "failure_code",
  failureReason: "failure_reason",
} as const;

export type TransitionChanges = { [K in keyof typeof CHANGE_COLUMNS]?: string | null };

export interface TransitionRequest {
  transactionId: number;
  to: TerminalStatus;
  /** Columns written together with the status (payment method, receipt, failure code...). */
  changes?: TransitionChanges;
  /** Jobs that follow from the change (e.g. forwarding a C2B confirmation), queued only when it applies. */
  jobs?: JobRequest[];
  /** The verdict on the attempt this outcome is about, written in the same statement: the payment changes only when the attempt did. */
  settlesAttempt?: AttemptVerdict;
}

export interface TransitionResult {
  /** False when the transaction was already terminal: nothing was written. */
  applied: boolean;
  transaction: Transaction;
  event: PublishedEvent | null;
}

/** Queued when a subscription invoice's charge settles, in the statement that settles it: billing records the outcome on the invoice. */
export const INVOICE_CHARGE_SETTLED_JOB = "invoice.charge_settled";
const INVOICE_CHARGE_SETTLED_CTES = `invoice_charge AS (SELECT invoice_id FROM t WHERE invoice_id IS NOT NULL), ${enqueueCte("invoice_jobs", INVOICE_CHARGE_SETTLED_JOB, { from: "invoice_charge", payload: { invoiceId: "invoice_id" } })}`;

/** The transactions table's part in the status machine (events/status-machine.ts). */
export const TRANSACTION_STATUS: StatusTable<Transaction, keyof typeof CHANGE_COLUMNS, TransactionSnapshot> = {
  subject: "transaction",
  table: "transactions",
  eventColumn: "transaction_id",
  changeColumns: CHANGE_COLUMNS,
  columns: TRANSACTION_COLUMNS,
  fromRow: (row) => transactionFromRow(row as TransactionRow),
  findById,
  snapshot: SETTLED_SNAPSHOT,
  alsoWrites: () => INVOICE_CHARGE_SETTLED_CTES,
};

/** A transaction's status change: pending -> completed | failed, exactly once (events/status-machine.ts). */
export async function transitionTransaction(deps: StateMachineDeps, request: TransitionRequest): Promise<TransitionResult> {
  const { applied, row, event } = await applyTransition(deps, TRANSACTION_STATUS, {
    id: request.transactionId,
    to: request.to,
    changes: request.changes,
    jobs: request.jobs,
    lead: request.settlesAttempt ? settleAttemptCte(request.settlesAttempt) : undefined,
  });
  return { applied, transaction: row, event };
}

export interface NewTransactionOptions {
  /** Emit transaction.pending (a payer is being asked now, e.g. an STK push), with its webhooks. */
  announce: boolean;
  /** Jobs about the new row (e.g. its reconciliation), queued in the same database transaction. */
  jobs?: (transaction: Transaction) => JobRequest[];
  /** The caller whose request made it: under an Idempotency-Key, the row is that key's recovery point. */
  keyedBy?: MaybeKeyed;
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
  const transaction = await createPending(tx, data);
  if (options.keyedBy) await recordRecoveryPoint(tx, options.keyedBy, "transaction", transaction.id);
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
