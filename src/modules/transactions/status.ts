import type { Event, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { recordRecoveryPoint, type MaybeKeyed } from "../../idempotency/scope.ts";
import { enqueueCte, enqueueJobs, type JobRequest } from "../../jobs/store.ts";
import type { Sql } from "../../db/sql.ts";
import { recordEvent } from "../events/outbox.ts";
import { EVENT_FAN_OUT_CTES, FAN_OUT_JOBS_QUEUED } from "../events/fan-out.ts";
import type { PublishedEvent } from "../events/publisher.ts";
import { afterCommit, applyTransition, applyTransitions, type StatusMachineDeps, type StatusTable, type TerminalStatus } from "../events/status-machine.ts";
import { attemptVerdictColumns, insertApiChargeAttemptsCte, settleAttemptCte, settleAttemptsBatchLead, type AttemptVerdict } from "./attempt-store.ts";
import { SETTLED_SNAPSHOT, transactionSnapshot, transactionSnapshotSql, type TransactionSnapshot } from "./snapshot.ts";
import { createPending, findById, insertInvoiceChargesCte, TRANSACTION_COLUMNS, transactionFromRow, type TransactionRow } from "./store.ts";

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
  /**
   * An invoice's charge settled by the billing step that made it, which records the outcome on the invoice itself
   * next (and, should it fail or crash first, runs again and does): no invoice.charge_settled job is queued.
   */
  invoiceRecordedByCaller?: boolean;
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

/**
 * A completing payment's fee, from its channel's schedule as it is now (the SQL function payment_fee(), the one
 * definition): written on the row by the status change, so a later change of the schedule never alters it, and
 * posted by the ledger from the row (ledger/postings.ts). A payment with no channel costs nothing.
 */
const PAYMENT_FEE_ON_COMPLETION = `coalesce((SELECT payment_fee(transactions.amount, c.fee_percent_bps, c.fee_fixed, c.fee_cap)
    FROM payment_channels c WHERE c.id = transactions.channel_id), 0)`;

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
  alsoSets: (to) => (to === "completed" ? `fee = ${PAYMENT_FEE_ON_COMPLETION}` : null),
  alsoWrites: () => INVOICE_CHARGE_SETTLED_CTES,
};

/** The same, for a change whose invoice outcome its caller records (TransitionRequest.invoiceRecordedByCaller). */
const TRANSACTION_STATUS_INVOICE_RECORDED: typeof TRANSACTION_STATUS = { ...TRANSACTION_STATUS, alsoWrites: () => null };

/** A transaction's status change: pending -> completed | failed, exactly once (events/status-machine.ts). */
export async function transitionTransaction(deps: StateMachineDeps, request: TransitionRequest): Promise<TransitionResult> {
  const table = request.invoiceRecordedByCaller ? TRANSACTION_STATUS_INVOICE_RECORDED : TRANSACTION_STATUS;
  const { applied, row, event } = await applyTransition(deps, table, {
    id: request.transactionId,
    to: request.to,
    changes: request.changes,
    jobs: request.jobs,
    lead: request.settlesAttempt ? settleAttemptCte(request.settlesAttempt) : undefined,
  });
  return { applied, transaction: row, event };
}

/**
 * Many payments' changes to the same status in one statement (a billing batch's settled charges): each as
 * transitionTransaction would apply it, exactly once, and all that apply commit together. Every request sets the same
 * columns and, when one settles its attempt, all do, to the same attempt status. Answers in the requests' order.
 */
export async function transitionTransactions(deps: StateMachineDeps, requests: TransitionRequest[]): Promise<TransitionResult[]> {
  const [first] = requests;
  if (!first) return [];
  const verdict = first.settlesAttempt?.status;
  if (requests.some((r) => r.to !== first.to || r.settlesAttempt?.status !== verdict || !!r.invoiceRecordedByCaller !== !!first.invoiceRecordedByCaller)) {
    throw new Error("a batch of transaction changes shares its status, its attempts' verdict and who records the invoice");
  }
  const table = first.invoiceRecordedByCaller ? TRANSACTION_STATUS_INVOICE_RECORDED : TRANSACTION_STATUS;
  const results = await applyTransitions(deps, table, {
    to: first.to,
    lead: verdict ? settleAttemptsBatchLead(verdict) : undefined,
    rows: requests.map((r) => ({ id: r.transactionId, changes: r.changes, jobs: r.jobs, lead: r.settlesAttempt ? attemptVerdictColumns(r.settlesAttempt) : undefined })),
  });
  return results.map(({ applied, row, event }) => ({ applied, transaction: row, event }));
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

/** A saved card's charge for a subscription invoice's attempt, as insertInvoiceCharges writes it. */
export interface NewInvoiceCharge {
  merchantId: number;
  mode: Transaction["mode"];
  reference: string;
  accessCode: string;
  amount: bigint;
  currency: string;
  description: string | null;
  email: string | null;
  channelId: number;
  customerId: number;
  paymentMethodId: number;
  clientReference: string | null;
  metadata: unknown;
  invoiceId: number;
  invoiceAttempt: number;
  /** The attempt's detail (the card's last 4). */
  detail: string | null;
  /** When the provider is to be asked what became of the charge, when its connector needs that (insertInvoiceCharges' follow-up job). */
  followUpAt: Date | null;
}

/**
 * Many invoice charges in one statement: each payment with its attempt, its transaction.pending event (as
 * insertPendingTransaction records it, with its webhook deliveries) and its follow-up job. An invoice attempt that
 * already has its payment (another instance, a crash) is skipped by the unique (invoice, attempt) pair: the answer
 * has the payments inserted here only; afterCreate() each of them.
 */
const invoiceChargeStatements = new Map<string, string>();
function invoiceChargesStatement(followUpKind: string): string {
  let text = invoiceChargeStatements.get(followUpKind);
  if (text) return text;
  text = `WITH input AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(merchant_id int, mode text, reference text, access_code text, amount bigint,
      currency text, description text, email text, channel_id int, customer_id int, payment_method_id int, client_reference text,
      metadata jsonb, invoice_id int, invoice_attempt int, detail text, follow_up_at timestamptz)
  ), ${insertInvoiceChargesCte("t", "input")}, ${insertApiChargeAttemptsCte("att", "t", "input")}, ev AS (
    INSERT INTO events (merchant_id, mode, type, transaction_id, payload)
    SELECT t.merchant_id, t.mode, 'transaction.pending', t.id, jsonb_build_object('transaction', ${transactionSnapshotSql("t")}) FROM t
    RETURNING id, merchant_id, mode, type, transaction_id, created_at, payload
  ), ${EVENT_FAN_OUT_CTES}, follow AS (
    SELECT t.id AS transaction_id, input.follow_up_at FROM t JOIN input USING (reference) WHERE input.follow_up_at IS NOT NULL
  ), ${enqueueCte("follow_up", followUpKind, { from: "follow", payload: { transactionId: "transaction_id" }, runAt: "follow_up_at" })}
  SELECT changed.*, att.id AS "attemptId", ev.id::text AS "eventId", ev.created_at AS "eventCreatedAt", ev.payload AS "eventPayload",
    ${FAN_OUT_JOBS_QUEUED} + (SELECT count(*)::int FROM follow_up) AS "jobsQueued"
  FROM (SELECT ${TRANSACTION_COLUMNS} FROM t) changed JOIN att ON att.transaction_id = changed.id JOIN ev ON ev.transaction_id = changed.id
  ORDER BY changed.id`;
  invoiceChargeStatements.set(followUpKind, text);
  return text;
}

export interface InsertedCharge {
  transaction: Transaction;
  attemptId: number;
  event: Event;
  /** Every job the statement queued (webhook deliveries and follow-ups), counted once, on the first charge. */
  jobsQueued: number;
}

/** `followUpKind`: the job a charge's `followUpAt` queues for its payment (the provider asked what became of it). */
export async function insertInvoiceCharges(sql: Sql, charges: NewInvoiceCharge[], followUpKind: string): Promise<InsertedCharge[]> {
  if (!charges.length) return [];
  const input = charges.map((c) => ({
    merchant_id: c.merchantId, mode: c.mode, reference: c.reference, access_code: c.accessCode, amount: c.amount.toString(),
    currency: c.currency, description: c.description, email: c.email, channel_id: c.channelId, customer_id: c.customerId,
    payment_method_id: c.paymentMethodId, client_reference: c.clientReference, metadata: c.metadata ?? null,
    invoice_id: c.invoiceId, invoice_attempt: c.invoiceAttempt, detail: c.detail,
    follow_up_at: c.followUpAt?.toISOString() ?? null,
  }));
  const rows = await sql.query<TransactionRow & { attemptId: number; eventId: string; eventCreatedAt: Date | string; eventPayload: Prisma.JsonValue; jobsQueued: number }>(
    invoiceChargesStatement(followUpKind),
    [JSON.stringify(input)],
  );
  return rows.map(({ attemptId, eventId, eventCreatedAt, eventPayload, jobsQueued, ...columns }, i) => {
    const transaction = transactionFromRow(columns as TransactionRow);
    const event: Event = {
      id: BigInt(eventId),
      merchantId: transaction.merchantId,
      mode: transaction.mode,
      type: "transaction.pending",
      transactionId: transaction.id,
      payoutId: null,
      refundId: null,
      disputeId: null,
      createdAt: eventCreatedAt instanceof Date ? eventCreatedAt : new Date(eventCreatedAt),
      payload: eventPayload,
    };
    return { transaction, attemptId: Number(attemptId), event, jobsQueued: i === 0 ? jobsQueued : 0 };
  });
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
