import type { Event, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { recordRecoveryPoint } from "../../idempotency/scope.ts";
import { enqueueFromParameterCte, enqueueJobs, jobsParameter, type JobRequest } from "../../jobs/store.ts";
import { recordEvent } from "../events/outbox.ts";
import type { PublishedEvent } from "../events/publisher.ts";
import { afterCommit, type StatusChangeDeps, type TerminalStatus } from "../events/status-change.ts";
import { guardStatus } from "../events/status-rules.ts";
import { WEBHOOK_FAN_OUT_CTES } from "../webhooks/fan-out.ts";
import type { Sql } from "../../db/sql.ts";
import { createPending, findById, TRANSACTION_COLUMNS, transactionFromRow, type TransactionRow } from "./store.ts";

export type { TerminalStatus };
/** The status change runs on the plain-SQL connection (src/db/sql.ts): it is on every payment's path. */
export type StateMachineDeps = StatusChangeDeps & { sql: Sql };
export { toPublishedEvent } from "../events/status-change.ts";

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
    metadata: t.metadata,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
    completed_at: t.completedAt?.toISOString() ?? null,
  };
}

export type TransactionSnapshot = ReturnType<typeof transactionSnapshot>;

/** The columns a transition may write with the status, by model field. */
const CHANGE_COLUMNS = {
  paymentMethod: "payment_method",
  providerReference: "provider_reference",
  failureCode: "failure_code",
  failureReason: "failure_reason",
} as const;

export type TransitionChanges = { [K in keyof typeof CHANGE_COLUMNS]?: string | null };

const utc = (column: string) => `to_char(t.${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * transactionSnapshot() in SQL, over the changed row `t`: the event's payload, written by the same statement
 * that changes the status. test/integration/state-machine.test.ts holds the two to the same output.
 */
const SNAPSHOT_SQL = `jsonb_build_object(
  'id', t.id, 'reference', t.reference, 'amount', t.amount, 'currency', t.currency, 'status', t.status,
  'payment_method', t.payment_method, 'description', t.description, 'email', t.email, 'phone_number', t.phone_number,
  'client_reference', t.client_reference, 'checkout_request_id', t.checkout_request_id,
  'provider_reference', t.provider_reference, 'failure_code', t.failure_code, 'failure_reason', t.failure_reason,
  'channel_id', t.channel_id, 'customer_id', t.customer_id, 'metadata', t.metadata,
  'created_at', ${utc("created_at")}, 'updated_at', ${utc("updated_at")}, 'completed_at', ${utc("completed_at")})`;

const statements = new Map<string, string>();

/**
 * The status change as one statement: the conditional UPDATE, its event (with the snapshot), the event's
 * webhook deliveries and jobs, and the follow-up jobs, as data-modifying CTEs. One statement is atomic on
 * its own, so this is the interactive transaction of changeStatus() in one round trip instead of six.
 * Parameters: $1 id, $2 the time of the change, then the changed columns in CHANGE_COLUMNS order, then the
 * follow-up jobs as JSON when there are any. One text per combination, each prepared once per connection.
 */
function transitionStatement(to: TerminalStatus, columns: readonly (keyof typeof CHANGE_COLUMNS)[], withJobs: boolean): string {
  const key = `${to}|${columns.join(",")}|${withJobs}`;
  let text = statements.get(key);
  if (text) return text;
  const sets = [`status = '${to}'`, "updated_at = $2", ...(to === "completed" ? ["completed_at = $2"] : [])];
  columns.forEach((field, i) => sets.push(`${CHANGE_COLUMNS[field]} = $${i + 3}`));
  const jobsParam = `$${columns.length + 3}`;
  text = `WITH t AS (
    UPDATE transactions SET ${sets.join(", ")} WHERE id = $1 AND status = '${guardStatus(to)}' RETURNING *
  ), ev AS (
    INSERT INTO events (merchant_id, mode, type, transaction_id, payload)
    SELECT t.merchant_id, t.mode, 'transaction.${to}', t.id, jsonb_build_object('transaction', ${SNAPSHOT_SQL}) FROM t
    RETURNING id, merchant_id, mode, type, created_at, payload
  ), ${WEBHOOK_FAN_OUT_CTES}${
    // Queued once per row of ev: only when the change applied.
    withJobs ? `, ${enqueueFromParameterCte("follow_up", jobsParam, "ev")}` : ""
  }
  SELECT changed.*, ev.id::text AS "eventId", ev.created_at AS "eventCreatedAt", ev.payload AS "eventPayload",
    (SELECT count(*)::int FROM delivery_jobs) AS "deliveriesQueued"
  FROM (SELECT ${TRANSACTION_COLUMNS} FROM t) changed, ev`;
  statements.set(key, text);
  return text;
}

type TransitionRow = TransactionRow & {
  eventId: string;
  eventCreatedAt: Date | string;
  eventPayload: Prisma.JsonValue;
  deliveriesQueued: number;
};

/**
 * A transaction's status change (the contract of changeStatus() in events/status-change.ts, which payouts
 * use): pending -> completed | failed, exactly once however many callers race, with its event, webhook
 * deliveries and jobs committed together, subscribers told after commit.
 */
export async function transitionTransaction(deps: StateMachineDeps, request: TransitionRequest): Promise<TransitionResult> {
  const changes = request.changes ?? {};
  const columns = (Object.keys(CHANGE_COLUMNS) as (keyof typeof CHANGE_COLUMNS)[]).filter((field) => changes[field] !== undefined);
  const jobs = request.jobs ?? [];
  const params: unknown[] = [request.transactionId, new Date(), ...columns.map((field) => changes[field])];
  if (jobs.length) params.push(jobsParameter(jobs));
  const [changed] = await deps.sql.query<TransitionRow>(transitionStatement(request.to, columns, jobs.length > 0), params);
  if (!changed) {
    // Already terminal (or another caller won the race): nothing written; answer with the row as it is.
    const transaction = await findById(deps.sql, request.transactionId);
    if (!transaction) throw new Error(`transaction ${request.transactionId} does not exist`);
    return { applied: false, transaction, event: null };
  }
  const { eventId, eventCreatedAt, eventPayload, deliveriesQueued, ...row } = changed;
  const transaction = transactionFromRow(row);
  const event: Event = {
    id: BigInt(eventId),
    merchantId: transaction.merchantId,
    mode: transaction.mode,
    type: `transaction.${request.to}`,
    transactionId: transaction.id,
    payoutId: null,
    createdAt: eventCreatedAt instanceof Date ? eventCreatedAt : new Date(eventCreatedAt),
    payload: eventPayload as Prisma.JsonValue,
  };
  const published = afterCommit(deps, event, deliveriesQueued + jobs.length);
  deps.metrics?.statusChanged("transaction", request.to, transaction.channelId);
  return { applied: true, transaction, event: published };
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
  const transaction = await createPending(tx, data);
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
