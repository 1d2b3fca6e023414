import type { PrismaClient } from "../../db/database.ts";
import type { Event, Mode, Prisma } from "../../db/generated/prisma/client.ts";
import type { Sql } from "../../db/sql.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { enqueueFromColumnCte, enqueueFromParameterCte, jobRows, jobsParameter, type JobRequest } from "../../jobs/store.ts";
import { postingsOnChange } from "../ledger/postings.ts";
import { EVENT_FAN_OUT_CTES, FAN_OUT_JOBS_QUEUED } from "./fan-out.ts";
import type { EventPublisher, PublishedEvent } from "./publisher.ts";
import type { Snapshot } from "./snapshot.ts";
import { guardStatus, type MoneySubject, type TerminalStatus } from "./status-rules.ts";

/**
 * The one status machine of every money object (transactions, payouts, and what follows): pending ->
 * completed | failed, terminal states never change (the rules: status-rules.ts). One statement applies the
 * guarded UPDATE, inserts its event with the object's snapshot, queues the event's webhook deliveries and the
 * change's follow-up jobs and the ledger's postings, as data-modifying CTEs: atomic on its own, one round trip on every payment's path.
 * The UPDATE is conditional on the row still being pending, so of any number of concurrent callers exactly one
 * applies the change (PostgreSQL re-checks the WHERE after waiting on the row lock). Subscribers hear of it
 * only after commit.
 */
export type { MoneySubject, TerminalStatus };


/** Counts status changes (src/metrics): `pending` when a row is created, then its terminal status. */
export interface StatusCounter {
  statusChanged(subject: MoneySubject, status: "pending" | TerminalStatus, channelId: number | null): void;
}

export interface StatusMachineDeps {
  prisma: PrismaClient;
  /** The status change runs on the plain-SQL connection (src/db/sql.ts): it is on every payment's path. */
  sql: Sql;
  publisher: EventPublisher;
  jobs: JobRunner;
  /** Told once per committed change (metrics); never of a change that did not apply or rolled back. */
  metrics?: StatusCounter;
}

export interface StatusRow {
  id: number;
  merchantId: number;
  mode: Mode;
  channelId: number | null;
}

/**
 * The statuses of an object whose life is not the money objects' pending -> completed | failed (a dispute): which
 * statuses a change to `to` may start from, the event it records, and the time column it sets (none: null).
 */
export interface StatusRules<To extends string> {
  from(to: To): readonly string[];
  eventType(to: To): string;
  timeColumn(to: To): string | null;
}

const MONEY_RULES: StatusRules<TerminalStatus> = {
  from: (to) => [guardStatus(to)],
  eventType: (to) => to,
  timeColumn: (to) => (to === "completed" ? "completed_at" : null),
};

/** How one table takes part: its table and columns, how its rows read, and its snapshot. */
export interface StatusTable<Row extends StatusRow, Change extends string, Out = unknown, To extends string = TerminalStatus> {
  /** The event type's prefix (transaction.completed, payout.failed ...) and the snapshot's key in the payload. */
  subject: MoneySubject | "dispute";
  table: string;
  /** The events column that links an event to its object. */
  eventColumn: "transaction_id" | "payout_id" | "refund_id" | "dispute_id";
  /** Its statuses, when they are not pending -> completed | failed. */
  rules?: StatusRules<To>;
  /** The columns a change may write with the status, by model field. */
  changeColumns: Record<Change, string>;
  /** The SELECT list of a whole row, model field names as aliases, over bare column names. */
  columns: string;
  fromRow(row: Record<string, unknown>): Row;
  findById(sql: Sql, id: number): Promise<Row | null>;
  snapshot: Snapshot<Row, Out>;
  /**
   * Columns of the row itself the change sets with the status, as `column = expression` over the row being updated
   * (e.g. a completed payment's fee, from its channel's schedule at that moment): null when none.
   */
  alsoSets?(to: To): string | null;
  /**
   * What else the change writes in its statement, as data-modifying CTEs over the changed row `t` (e.g. a
   * completed refund adds its amount to the transaction's amount_refunded): atomic with the status change.
   */
  alsoWrites?(to: To): string | null;
}

/**
 * A write the change depends on, made first in its statement (e.g. the verdict on the attempt whose outcome this is):
 * the object changes only when it wrote a row, and both commit or neither does. `sql(first)` is the data-modifying
 * statement (with RETURNING *), its parameters numbered from `first`; `key` names the text, for the prepared-statement cache.
 */
export interface LeadWrite {
  key: string;
  sql(first: number): string;
  values: unknown[];
}

export interface StatusChange<Change extends string, To extends string = TerminalStatus> {
  id: number;
  to: To;
  /** Columns written together with the status (payment method, receipt, failure code...). */
  changes?: Partial<Record<Change, string | null>>;
  /** Jobs that follow from the change (e.g. forwarding a C2B confirmation), queued only when it applies. */
  jobs?: JobRequest[];
  lead?: LeadWrite;
}

export interface StatusChangeResult<Row> {
  /** False when the row was already terminal (or another caller won the race): nothing was written. */
  applied: boolean;
  row: Row;
  event: PublishedEvent | null;
}

export function toPublishedEvent(event: Event): PublishedEvent {
  return {
    id: event.id.toString(),
    type: event.type,
    merchantId: event.merchantId,
    mode: event.mode,
    transactionId: event.transactionId,
    payoutId: event.payoutId,
    ...(event.refundId !== null ? { refundId: event.refundId } : {}),
    ...(event.disputeId !== null ? { disputeId: event.disputeId } : {}),
    createdAt: event.createdAt.toISOString(),
    payload: event.payload,
  };
}

/** After commit: subscribers hear of the event, and this instance starts on the jobs it queued. */
export function afterCommit(deps: Pick<StatusMachineDeps, "publisher" | "jobs">, event: Event | null, jobsQueued: number): PublishedEvent | null {
  const published = event ? toPublishedEvent(event) : null;
  if (published) deps.publisher.publish(published);
  if (jobsQueued > 0) deps.jobs.nudge();
  return published;
}

/** Each table definition's statements (a subject may have several, e.g. without the invoice job), by combination. */
const statements = new WeakMap<object, Map<string, string>>();

/**
 * The statement for one table, target status, set of changed columns and whether jobs follow. Parameters:
 * $1 id, $2 the time of the change, then the changed columns in changeColumns order, then the follow-up jobs
 * as JSON when there are any. One text per combination, each prepared once per connection.
 */
function changeStatement(table: StatusTable<StatusRow, string, unknown, string>, to: string, changed: readonly string[], withJobs: boolean, lead?: LeadWrite): string {
  return cachedStatement(statements, table, `${to}|${changed.join(",")}|${withJobs}|${lead?.key ?? ""}`, () => {
    const { sets, guard, eventInsert, also } = changeParts(table, to, changed, (i) => `$${i + 3}`, !!lead);
    const jobsParam = `$${changed.length + 3}`;
    const leadCte = lead ? `lead AS (${lead.sql(changed.length + 3 + (withJobs ? 1 : 0))}), ` : "";
    return `WITH ${leadCte}t AS (
    UPDATE ${table.table} SET ${sets} WHERE id = $1 AND status IN (${guard})${lead ? " AND EXISTS (SELECT 1 FROM lead)" : ""} RETURNING *
  ), ev AS (
    ${eventInsert}
    RETURNING id, merchant_id, mode, type, created_at, payload
  ), ${EVENT_FAN_OUT_CTES}${also}${
    // Queued once per row of ev: only when the change applied.
    withJobs ? `, ${enqueueFromParameterCte("follow_up", jobsParam, "ev")}` : ""
  }
  SELECT changed.*, ev.id::text AS "eventId", ev.created_at AS "eventCreatedAt", ev.payload AS "eventPayload",
    ${FAN_OUT_JOBS_QUEUED} AS "deliveriesQueued"
  FROM (SELECT ${table.columns} FROM t) changed, ev`;
  });
}

/** A statement's text made once per table and key (each then prepared once per connection). */
function cachedStatement(cache: WeakMap<object, Map<string, string>>, table: object, key: string, make: () => string): string {
  let texts = cache.get(table);
  if (!texts) cache.set(table, (texts = new Map()));
  let text = texts.get(key);
  if (!text) texts.set(key, (text = make()));
  return text;
}

/**
 * What a change to `to` writes, shared by the single and the batched statement: the SET list (`valueOf(i)`: the value of
 * the i-th changed column), the statuses it may start from, the event's INSERT over the changed rows `t` (with the
 * lead's rows as `lead` when there is one), and the dependent writes and the ledger's postings (ledger/postings.ts) as
 * CTEs, each only for rows the UPDATE changed.
 */
function changeParts(table: StatusTable<StatusRow, string, unknown, string>, to: string, changed: readonly string[], valueOf: (i: number) => string, withLead: boolean) {
  const rules = table.rules ?? (MONEY_RULES as StatusRules<string>);
  const timeColumn = rules.timeColumn(to);
  const alsoSets = table.alsoSets?.(to);
  const sets = [`status = '${to}'`, "updated_at = $2", ...(timeColumn ? [`${timeColumn} = $2`] : []), ...(alsoSets ? [alsoSets] : [])];
  changed.forEach((field, i) => sets.push(`${(table.changeColumns as Record<string, string>)[field]} = ${valueOf(i)}`));
  return {
    sets: sets.join(", "),
    guard: rules.from(to).map((status) => `'${status}'`).join(", "),
    eventInsert: `INSERT INTO events (merchant_id, mode, type, ${table.eventColumn}, payload)
    SELECT t.merchant_id, t.mode, '${table.subject}.${rules.eventType(to)}', t.id, jsonb_build_object('${table.subject}', ${table.snapshot.sql("t", withLead ? "lead" : undefined)}) FROM t`,
    also: [table.alsoWrites?.(to), postingsOnChange(table.subject, to)].filter(Boolean).map((cte) => `, ${cte}`).join(""),
  };
}

type ChangedRow = Record<string, unknown> & { eventId: string; eventCreatedAt: Date | string; eventPayload: Prisma.JsonValue; deliveriesQueued: number };

/** The event row a change's statement inserted, from what it returned. */
function changeEvent(
  table: Pick<StatusTable<StatusRow, string, unknown, string>, "subject" | "eventColumn" | "rules">,
  to: string,
  row: StatusRow,
  returned: Pick<ChangedRow, "eventId" | "eventCreatedAt" | "eventPayload">,
): Event {
  return {
    id: BigInt(returned.eventId),
    merchantId: row.merchantId,
    mode: row.mode,
    type: `${table.subject}.${(table.rules ?? (MONEY_RULES as StatusRules<string>)).eventType(to)}`,
    transactionId: table.eventColumn === "transaction_id" ? row.id : null,
    payoutId: table.eventColumn === "payout_id" ? row.id : null,
    refundId: table.eventColumn === "refund_id" ? row.id : null,
    disputeId: table.eventColumn === "dispute_id" ? row.id : null,
    createdAt: returned.eventCreatedAt instanceof Date ? returned.eventCreatedAt : new Date(returned.eventCreatedAt),
    payload: returned.eventPayload,
  };
}

/** Applies one guarded status change to a row of `table`: exactly once however many callers race. */
export async function applyTransition<Row extends StatusRow, Change extends string, Out, To extends string = TerminalStatus>(
  deps: StatusMachineDeps,
  table: StatusTable<Row, Change, Out, To>,
  request: StatusChange<Change, To>,
): Promise<StatusChangeResult<Row>> {
  const changes = (request.changes ?? {}) as Record<string, string | null | undefined>;
  const changed = Object.keys(table.changeColumns).filter((field) => changes[field] !== undefined);
  const jobs = request.jobs ?? [];
  const params: unknown[] = [request.id, new Date(), ...changed.map((field) => changes[field])];
  if (jobs.length) params.push(jobsParameter(jobs));
  if (request.lead) params.push(...request.lead.values);
  const text = changeStatement(table as unknown as StatusTable<StatusRow, string, unknown, string>, request.to, changed, jobs.length > 0, request.lead);
  const [result] = await deps.sql.query<ChangedRow>(text, params);
  if (!result) {
    // Already terminal: nothing written; answer with the row as it is.
    const row = await table.findById(deps.sql, request.id);
    if (!row) throw new Error(`${table.subject} ${request.id} does not exist`);
    return { applied: false, row, event: null };
  }
  const { eventId, eventCreatedAt, eventPayload, deliveriesQueued, ...columns } = result;
  const row = table.fromRow(columns);
  const event = changeEvent(table, request.to, row, { eventId, eventCreatedAt, eventPayload });
  const published = afterCommit(deps, event, deliveriesQueued + jobs.length);
  // Counted for the money objects (a dispute's statuses are its own).
  if (!table.rules) deps.metrics?.statusChanged(table.subject as MoneySubject, request.to as TerminalStatus, row.channelId);
  return { applied: true, row, event: published };
}

/**
 * A lead write for a batch of changes (applyTransitions): one data-modifying statement over the batch's CTE `input`,
 * each of whose rows carries the values named in `columns`; an object changes only when a row of it names the object
 * in `objectColumn` (e.g. the settled attempt's transaction_id).
 */
export interface BatchLeadWrite {
  key: string;
  /** Its columns in the batch's input, name -> SQL type. */
  columns: Record<string, string>;
  /** The statement (RETURNING the whole row, as the single change's lead does) over the CTE named `input`. */
  sql(input: string): string;
  objectColumn: string;
}

export interface StatusChangeBatch<Change extends string, To extends string = TerminalStatus> {
  to: To;
  /** Every row sets the same columns (text values, null included). */
  rows: { id: number; changes?: Partial<Record<Change, string | null>>; jobs?: JobRequest[]; lead?: Record<string, unknown> }[];
  lead?: BatchLeadWrite;
}

const batchStatements = new WeakMap<object, Map<string, string>>();
const PLAIN_IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

/**
 * applyTransition's statement for many rows of one table changing to the same status: the same guarded UPDATE, lead,
 * event, fan-out, dependent writes and postings, over the batch's rows as one JSON parameter ($1; $2 the time of the
 * change). Each row's follow-up jobs ride in its input row and are queued only when its change applied.
 */
function batchStatement(table: StatusTable<StatusRow, string, unknown, string>, to: string, changed: readonly string[], lead?: BatchLeadWrite): string {
  return cachedStatement(batchStatements, table, `${to}|${changed.join(",")}|${lead?.key ?? ""}`, () => {
    const { sets, guard, eventInsert, also } = changeParts(table, to, changed, (i) => `input.c${i}`, !!lead);
    const leadColumns = Object.entries(lead?.columns ?? {});
    for (const [name, type] of leadColumns) if (!PLAIN_IDENTIFIER.test(name) || !/^[a-z]+$/.test(type)) throw new Error(`not a plain column: ${name} ${type}`);
    const inputColumns = ["id int", ...changed.map((_, i) => `c${i} text`), "jobs jsonb", ...leadColumns.map(([name, type]) => `${name} ${type}`)];
    return `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(${inputColumns.join(", ")})), ${lead ? `lead AS (${lead.sql("input")}), ` : ""}t AS (
    UPDATE ${table.table} SET ${sets} FROM input
    WHERE ${table.table}.id = input.id AND ${table.table}.status IN (${guard})${lead ? ` AND input.id IN (SELECT ${lead.objectColumn} FROM lead)` : ""}
    RETURNING ${table.table}.*
  ), ev AS (
    ${eventInsert}
    RETURNING id, ${table.eventColumn}, merchant_id, mode, type, created_at, payload
  ), ${EVENT_FAN_OUT_CTES}${also}, applied_jobs AS (SELECT input.jobs FROM t JOIN input ON input.id = t.id), ${enqueueFromColumnCte("follow_up", "applied_jobs", "jobs")}
  SELECT changed.*, ev.id::text AS "eventId", ev.created_at AS "eventCreatedAt", ev.payload AS "eventPayload",
    ${FAN_OUT_JOBS_QUEUED} + (SELECT count(*)::int FROM follow_up) AS "jobsQueued"
  FROM (SELECT ${table.columns} FROM t) changed JOIN ev ON ev.${table.eventColumn} = changed.id`;
  });
}

/**
 * applyTransition for many rows going to the same status in one statement (a billing batch's settled charges): each
 * row changes exactly once however many callers race, as with one, and all that apply commit together or none do.
 * Answers in the batch's order; a row already terminal (or whose lead wrote nothing) is read back as it is, not applied.
 */
export async function applyTransitions<Row extends StatusRow, Change extends string, Out, To extends string = TerminalStatus>(
  deps: StatusMachineDeps,
  table: StatusTable<Row, Change, Out, To>,
  batch: StatusChangeBatch<Change, To>,
): Promise<StatusChangeResult<Row>[]> {
  if (!batch.rows.length) return [];
  const first = (batch.rows[0]!.changes ?? {}) as Record<string, string | null | undefined>;
  const changed = Object.keys(table.changeColumns).filter((field) => first[field] !== undefined);
  const ids = new Set<number>();
  const input = batch.rows.map((row) => {
    const changes = (row.changes ?? {}) as Record<string, string | null | undefined>;
    if (Object.keys(table.changeColumns).some((field) => (changes[field] !== undefined) !== changed.includes(field))) {
      throw new Error(`a batch of ${table.subject} changes sets the same columns on every row`);
    }
    if (ids.has(row.id)) throw new Error(`${table.subject} ${row.id} is twice in one batch`);
    ids.add(row.id);
    return {
      id: row.id,
      ...Object.fromEntries(changed.map((field, i) => [`c${i}`, changes[field]])),
      jobs: row.jobs?.length ? jobRows(row.jobs) : null,
      ...row.lead,
    };
  });
  // In id order: the UPDATE meets the rows as it reads the input (a nested loop over it), so two batches over the same
  // rows lock them in the same order and wait for each other rather than deadlock.
  input.sort((a, b) => a.id - b.id);
  const text = batchStatement(table as unknown as StatusTable<StatusRow, string, unknown, string>, batch.to, changed, batch.lead);
  const results = await deps.sql.query<Record<string, unknown> & Pick<ChangedRow, "eventId" | "eventCreatedAt" | "eventPayload"> & { jobsQueued: number }>(text, [JSON.stringify(input), new Date()]);
  const byId = new Map<number, StatusChangeResult<Row>>();
  let jobsQueued = results[0]?.jobsQueued ?? 0;
  for (const result of results) {
    const { eventId, eventCreatedAt, eventPayload, jobsQueued: _counted, ...columns } = result;
    const row = table.fromRow(columns);
    const event = changeEvent(table, batch.to, row, { eventId, eventCreatedAt, eventPayload });
    // The runner is nudged once for the statement's jobs, with the first event.
    const published = afterCommit(deps, event, jobsQueued);
    jobsQueued = 0;
    if (!table.rules) deps.metrics?.statusChanged(table.subject as MoneySubject, batch.to as TerminalStatus, row.channelId);
    byId.set(row.id, { applied: true, row, event: published });
  }
  return Promise.all(
    batch.rows.map(async ({ id }) => {
      const applied = byId.get(id);
      if (applied) return applied;
      const row = await table.findById(deps.sql, id);
      if (!row) throw new Error(`${table.subject} ${id} does not exist`);
      return { applied: false, row, event: null };
    }),
  );
}
