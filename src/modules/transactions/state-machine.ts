import type { Event, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { recordRecoveryPoint, type MaybeKeyed } from "../../idempotency/scope.ts";
import { enqueueJobs, type JobRequest } from "../../jobs/store.ts";
import { recordEvent } from "../events/outbox.ts";
import type { PublishedEvent } from "../events/publisher.ts";
import { defineSnapshot, OUTCOME_AND_TIMES, type Snapshot } from "../events/snapshot.ts";
import { afterCommit, applyTransition, type StatusMachineDeps, type StatusTable, type TerminalStatus } from "../events/status-machine.ts";
import { createPending, findById, TRANSACTION_COLUMNS, transactionFromRow, type TransactionRow } from "./store.ts";

export type { TerminalStatus };
export type StateMachineDeps = StatusMachineDeps;
export { toPublishedEvent } from "../events/status-machine.ts";

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
}

export interface TransitionResult {
  /** False when the transaction was already terminal: nothing was written. */
  applied: boolean;
  transaction: Transaction;
  event: PublishedEvent | null;
}

/** The transaction as of an event: what subscribers and webhooks receive, no follow-up query needed. */
const TRANSACTION_SNAPSHOT = defineSnapshot<Transaction>()({
  id: "id",
  reference: "reference",
  amount: ["amount", "amount"],
  amount_refunded: ["amountRefunded", "amount"],
  currency: "currency",
  status: "status",
  payment_method: "paymentMethod",
  description: "description",
  email: "email",
  phone_number: "phoneNumber",
  client_reference: "clientReference",
  checkout_request_id: "checkoutRequestId",
  channel_id: "channelId",
  customer_id: "customerId",
  metadata: "metadata",
  ...OUTCOME_AND_TIMES,
});

export const transactionSnapshot = (t: Transaction) => TRANSACTION_SNAPSHOT.of(t);

/** The checkout attempt that settled a transaction, as its completed or failed event carries it (issue 25). */
export interface SnapshotAttempt {
  method: "card" | "mpesa";
  code: string | null;
  reason: string | null;
  /** 1 for the payer's first attempt on this transaction. */
  number: number;
}
export type TransactionSnapshot = ReturnType<typeof transactionSnapshot> & { attempt?: SnapshotAttempt };

/**
 * The settling event's snapshot adds the attempt that settled it, read in the status change's own statement:
 * the succeeded attempt of a completed transaction, the failed one whose code it failed with (none for an
 * expiry, `abandoned`). Transactions with no such attempt (STK push, C2B) have no `attempt` key.
 */
const SETTLED_SNAPSHOT: Snapshot<Transaction, TransactionSnapshot> = {
  of: transactionSnapshot,
  sql: (t) => `(${TRANSACTION_SNAPSHOT.sql(t)} || COALESCE((
    SELECT jsonb_build_object('attempt', jsonb_build_object('method', a.method, 'code', a.code, 'reason', a.reason,
      'number', (SELECT count(*) FROM transaction_attempts b WHERE b.transaction_id = a.transaction_id AND b.id <= a.id)))
    FROM transaction_attempts a
    WHERE a.transaction_id = ${t}.id AND CASE WHEN ${t}.status::text = 'completed' THEN a.status = 'succeeded' ELSE a.status = 'failed' AND a.code IS NOT DISTINCT FROM ${t}.failure_code END
    ORDER BY a.id DESC LIMIT 1), '{}'::jsonb))`,
};

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
};

/** A transaction's status change: pending -> completed | failed, exactly once (events/status-machine.ts). */
export async function transitionTransaction(deps: StateMachineDeps, request: TransitionRequest): Promise<TransitionResult> {
  const { applied, row, event } = await applyTransition(deps, TRANSACTION_STATUS, {
    id: request.transactionId,
    to: request.to,
    changes: request.changes,
    jobs: request.jobs,
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
