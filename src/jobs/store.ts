import type { PrismaClient } from "../db/database.ts";
import type { Prisma } from "../db/generated/prisma/client.ts";
import type { Sql } from "../db/sql.ts";

/**
 * The `jobs` table's store: every statement on it, Prisma or SQL, is here (the runner's claims and
 * settlements, features' enqueue/cancel/reschedule, the operator's reads, and the CTE fragments that
 * queue jobs inside another feature's single statement). No other file names the table; a source scan
 * (test/unit/jobs-table-owner.test.ts) holds that. Features pass kinds, payloads and payload keys,
 * never SQL text.
 */

export interface JobRequest {
  kind: string;
  payload: Record<string, unknown>;
  runAt?: Date;
}

/** A job's identity within its kind: payload fields and their values, e.g. `{ payoutId: 7 }`. */
export type JobKey = Record<string, string | number>;

/** Any client that can write jobs: pass the transaction client so the jobs commit with the change. */
export type JobWriter = Pick<Prisma.TransactionClient, "job">;

function keyFilter(kind: string, key: JobKey): Prisma.JobWhereInput {
  const fields = Object.entries(key);
  if (!fields.length) throw new Error(`a job key of ${kind} needs at least one payload field`);
  // Only queued jobs: a running one belongs to its instance until it settles (or its lease ends).
  return { kind, status: "queued", AND: fields.map(([field, value]) => ({ payload: { path: [field], equals: value } })) };
}

/**
 * Queues one job. With `key`, it replaces the queued job of the same kind and key, so at most one is
 * queued for it (a running one is left to finish).
 */
export async function enqueue(db: JobWriter, kind: string, payload: Record<string, unknown>, options: { runAt?: Date; key?: JobKey } = {}): Promise<void> {
  if (options.key) await cancel(db, kind, options.key);
  await enqueueJobs(db, [{ kind, payload, ...(options.runAt ? { runAt: options.runAt } : {}) }]);
}

/** Queues several jobs in one statement (none: no statement). */
export async function enqueueJobs(db: JobWriter, jobs: JobRequest[]): Promise<void> {
  if (!jobs.length) return;
  await db.job.createMany({ data: jobs.map((j) => ({ kind: j.kind, payload: j.payload as Prisma.InputJsonValue, runAt: j.runAt ?? new Date() })) });
}

/** The same, on a plain-SQL transaction (db/sql.ts): the billing cycle's steps. */
export async function enqueueJobsSql(tx: Sql, jobs: JobRequest[]): Promise<void> {
  if (!jobs.length) return;
  const now = new Date();
  await tx.query(
    `INSERT INTO jobs (kind, payload, run_at, updated_at) SELECT j.kind, j.payload, j.run_at, $4::timestamptz
     FROM unnest($1::text[], $2::jsonb[], $3::timestamptz[]) WITH ORDINALITY AS j(kind, payload, run_at, n) ORDER BY j.n`,
    [jobs.map((j) => j.kind), jobs.map((j) => JSON.stringify(j.payload)), jobs.map((j) => (j.runAt ?? now).toISOString()), now.toISOString()],
  );
}

/**
 * Deletes the queued jobs whose payload `field` names a row of `table` owned by the merchant (`cli demo remove`:
 * the merchant's queued work goes with it). `field` and `table` come from the caller's fixed list, never input.
 */
export async function deleteJobsOfMerchantRows(db: Pick<Prisma.TransactionClient, "$executeRawUnsafe">, field: string, table: string, merchantId: number): Promise<number> {
  if (!PAYLOAD_FIELD.test(field) || !/^[a-z_]+$/.test(table)) throw new Error(`not a column or table name: ${field}, ${table}`);
  return db.$executeRawUnsafe(`DELETE FROM jobs WHERE payload ? '${field}' AND (payload->>'${field}') IN (SELECT id::text FROM "${table}" WHERE merchant_id = $1)`, merchantId);
}

/** Deletes the queued jobs of this kind and key; returns how many. */
export async function cancel(db: JobWriter, kind: string, key: JobKey): Promise<number> {
  return (await db.job.deleteMany({ where: keyFilter(kind, key) })).count;
}

/** Moves the queued jobs of this kind and key to `runAt` (e.g. now, to ask sooner); returns how many. */
export async function reschedule(db: JobWriter, kind: string, key: JobKey, runAt: Date): Promise<number> {
  return (await db.job.updateMany({ where: keyFilter(kind, key), data: { runAt } })).count;
}

// --- Fragments for a feature's one-statement writes (data-modifying CTEs) ------------------------------

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
const KIND = /^[A-Za-z0-9_.-]+$/;
const PAYLOAD_FIELD = /^[A-Za-z_][A-Za-z0-9_]*$/;

function identifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain SQL identifier: ${name}`);
  return name;
}

/**
 * A CTE `name AS (...)` queueing one job of `kind` per row of the CTE `from`, due now, its payload built
 * from that row's columns (`{ deliveryId: "id" }` gives `{"deliveryId": <id>}`). It returns one row per
 * job, so `SELECT count(*) FROM name` is the number queued. Names and kinds are code, never input.
 */
export function enqueueCte(name: string, kind: string, source: { from: string; payload: Record<string, string>; runAt?: string }): string {
  if (!KIND.test(kind)) throw new Error(`not a job kind: ${kind}`);
  const fields = Object.entries(source.payload).map(([field, column]) => {
    if (!PAYLOAD_FIELD.test(field)) throw new Error(`not a payload field name: ${field}`);
    return `'${field}', ${identifier(column)}`;
  });
  // run_at from a column of `from` when given (null: now), else the table's default (now).
  const runAt = source.runAt === undefined ? "" : `, coalesce(${identifier(source.runAt)}, now())`;
  return `${identifier(name)} AS (
  INSERT INTO jobs (kind, payload${runAt ? ", run_at" : ""}) SELECT '${kind}', jsonb_build_object(${fields.join(", ")})${runAt} FROM ${identifier(source.from)}
  RETURNING id
)`;
}

/**
 * A CTE `name AS (...)` queueing the jobs given as one JSON parameter (`param`, e.g. "$5", its value from
 * jobsParameter()) once per row of the CTE `when`: with `when` the CTE of the change, they are queued
 * only if the change applied.
 */
export function enqueueFromParameterCte(name: string, param: string, when: string): string {
  if (!/^\$[1-9][0-9]*$/.test(param)) throw new Error(`not a statement parameter: ${param}`);
  return `${identifier(name)} AS (
    INSERT INTO jobs (kind, payload, run_at)
    SELECT j.kind, j.payload, coalesce(j.run_at, now()) FROM ${identifier(when)}, jsonb_to_recordset(${param}::jsonb) AS j(kind text, payload jsonb, run_at timestamptz)
    RETURNING id
  )`;
}

/** Jobs as the JSON rows the CTE fragments read (kind, payload, run_at). */
export function jobRows(jobs: JobRequest[]): { kind: string; payload: unknown; run_at: string | null }[] {
  return jobs.map((j) => ({ kind: j.kind, payload: j.payload, run_at: j.runAt?.toISOString() ?? null }));
}

/** The value of enqueueFromParameterCte()'s parameter for these jobs. */
export function jobsParameter(jobs: JobRequest[]): string {
  return JSON.stringify(jobRows(jobs));
}

/**
 * A CTE `name AS (...)` queueing the jobs each row of the CTE `from` carries in its jsonb column `column` (jobRows()'s
 * array, or null for none): a batch of changes, each row with its own follow-ups.
 */
export function enqueueFromColumnCte(name: string, from: string, column: string): string {
  return `${identifier(name)} AS (
    INSERT INTO jobs (kind, payload, run_at)
    SELECT j.kind, j.payload, coalesce(j.run_at, now()) FROM ${identifier(from)} src, jsonb_to_recordset(src.${identifier(column)}) AS j(kind text, payload jsonb, run_at timestamptz)
    RETURNING id
  )`;
}

// --- The runner's statements ----------------------------------------------------------------------------

export interface ClaimedRow {
  id: bigint;
  kind: string;
  payload: unknown;
  attempts: number;
  created_at: Date;
}

/**
 * Claims up to `limit` due jobs of a kind for `workerId` until `leaseUntil` (FOR UPDATE SKIP LOCKED: each
 * job goes to one instance). Failed jobs are never claimed; a running job past its lease is due again.
 *
 * The claimed ids reach the UPDATE as an array (`id = ANY(ARRAY(...))`), not `id IN (subquery)`: the planner cannot
 * know how few rows the LIMITs give, and with a large queue it joined them to a sequential scan of the whole table
 * (241 ms a claim with 280,000 jobs queued, against 10 ms through the primary key: bench/billing.ts's e-mail drain).
 */
export function claimDue(prisma: PrismaClient, kind: string, limit: number, workerId: string, now: Date, leaseUntil: Date): Promise<ClaimedRow[]> {
  return prisma.$queryRaw<ClaimedRow[]>`
      UPDATE jobs SET status = 'running', run_at = ${leaseUntil}, attempts = attempts + 1,
        locked_by = ${workerId}, updated_at = ${now}
      WHERE id = ANY(ARRAY(
        SELECT id FROM jobs WHERE kind = ${kind} AND status <> 'failed' AND run_at <= ${now}
        ORDER BY run_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
      ))
      RETURNING id, kind, payload, attempts, created_at`;
}

/**
 * claimDue for several kinds in one statement, each up to its own limit: a pass over every kind (a nudge, the poll)
 * then costs one round trip, not one per registered kind (twenty-odd, one after the other, which made a webhook
 * nudged on commit wait for the claims of every kind before and after its own: bench/webhooks.ts). Each kind's
 * rows are found as claimDue finds them (jobs_due_idx), in a LATERAL subquery per kind.
 */
export function claimDueKinds(prisma: PrismaClient, limits: { kind: string; limit: number }[], workerId: string, now: Date, leaseUntil: Date): Promise<ClaimedRow[]> {
  if (!limits.length) return Promise.resolve([]);
  return prisma.$queryRaw<ClaimedRow[]>`
      UPDATE jobs SET status = 'running', run_at = ${leaseUntil}, attempts = attempts + 1,
        locked_by = ${workerId}, updated_at = ${now}
      WHERE id = ANY(ARRAY(
        SELECT due.id FROM unnest(${limits.map((l) => l.kind)}::text[], ${limits.map((l) => l.limit)}::int[]) AS k(kind, lim)
        CROSS JOIN LATERAL (
          SELECT id FROM jobs WHERE kind = k.kind AND status <> 'failed' AND run_at <= ${now}
          ORDER BY run_at LIMIT k.lim FOR UPDATE SKIP LOCKED
        ) due
      ))
      RETURNING id, kind, payload, attempts, created_at`;
}

/**
 * Puts a claimed job back in the queue, due at `runAt`; `countAttempt: false` takes back the claim's
 * attempt. Only while `workerId` still holds it: a job whose lease ran out belongs to whoever claimed it next.
 */
export async function requeueClaimed(prisma: PrismaClient, id: bigint, workerId: string, runAt: Date, error: string | undefined, countAttempt: boolean): Promise<void> {
  await prisma.$executeRaw`
      UPDATE jobs SET status = 'queued', run_at = ${runAt}, last_error = ${error?.slice(0, 1000) ?? null}, locked_by = NULL,
        attempts = attempts - ${countAttempt ? 0 : 1}, updated_at = ${new Date()}
      WHERE id = ${id} AND locked_by = ${workerId}`;
}

/**
 * Extends the lease of jobs `workerId` is still running (one statement): a job that runs longer than its lease (a
 * slow provider, a starved CPU) must not be claimed again, by another instance or this one, while it runs.
 */
export async function renewLeases(prisma: PrismaClient, ids: bigint[], workerId: string, leaseUntil: Date): Promise<void> {
  if (!ids.length) return;
  await prisma.$executeRaw`
      UPDATE jobs SET run_at = ${leaseUntil}
      WHERE id = ANY(${ids.map(String)}::bigint[]) AND locked_by = ${workerId} AND status = 'running'`;
}

/** Claimed jobs that could not run yet go back in the queue, due at `runAt`, their attempt not counted: one statement. */
export async function deferClaimedMany(prisma: PrismaClient, ids: bigint[], workerId: string, runAt: Date): Promise<void> {
  if (!ids.length) return;
  await prisma.$executeRaw`
      UPDATE jobs SET status = 'queued', run_at = ${runAt}, last_error = NULL, locked_by = NULL, attempts = attempts - 1, updated_at = ${new Date()}
      WHERE id = ANY(${ids.map(String)}::bigint[]) AND locked_by = ${workerId}`;
}

/** Keeps a claimed job as failed for good (an operator's to look at), while `workerId` still holds it. */
export async function failClaimed(prisma: PrismaClient, id: bigint, workerId: string, error: string): Promise<void> {
  await prisma.$executeRaw`
          UPDATE jobs SET status = 'failed', last_error = ${error.slice(0, 1000)}, locked_by = NULL, updated_at = ${new Date()}
          WHERE id = ${id} AND locked_by = ${workerId}`;
}

/** A claimed job is done: deleted, while `workerId` still holds it. */
export async function completeClaimed(prisma: PrismaClient, id: bigint, workerId: string): Promise<void> {
  await prisma.$executeRaw`DELETE FROM jobs WHERE id = ${id} AND locked_by = ${workerId}`;
}

/** Claimed jobs are done: deleted in one statement, those `workerId` still holds (none: no statement). */
export async function completeClaimedMany(prisma: PrismaClient, ids: bigint[], workerId: string): Promise<void> {
  if (!ids.length) return;
  await prisma.$executeRaw`DELETE FROM jobs WHERE id = ANY(${ids.map(String)}::bigint[]) AND locked_by = ${workerId}`;
}

// --- Reads for operators (CLI, metrics) -------------------------------------------------------------------

export interface QueueGaugeRow {
  kind: string;
  status: string;
  jobs: number;
  oldest_due: Date | null;
}

/** One row per kind and status: how many, and the oldest due ("due" as claimDue() sees it) as of `now`. */
export function queueGauges(prisma: PrismaClient, now: Date): Promise<QueueGaugeRow[]> {
  return prisma.$queryRaw<QueueGaugeRow[]>`
        SELECT kind, status::text AS status, count(*)::int AS jobs,
          min(run_at) FILTER (WHERE status <> 'failed' AND run_at <= ${now}) AS oldest_due
        FROM jobs GROUP BY kind, status`;
}

/** The queue by kind and status (count, earliest run_at), and the last `limit` jobs that gave up. */
export async function queueReport(prisma: PrismaClient, limit = 10) {
  const groups = await prisma.job.groupBy({ by: ["kind", "status"], _count: { _all: true }, _min: { runAt: true }, orderBy: [{ kind: "asc" }, { status: "asc" }] });
  const failed = await prisma.job.findMany({ where: { status: "failed" }, orderBy: { updatedAt: "desc" }, take: limit, select: { id: true, kind: true, attempts: true, lastError: true, updatedAt: true } });
  return { groups, failed };
}

// --- Retention (src/modules/retention) -------------------------------------------------------------------

/**
 * Deletes at most `limit` jobs that gave up more than `olderThanMs` ago (the database's clock); returns how many.
 * Only `failed` rows: queued and running jobs are work still to do, and a done job is already deleted. SKIP
 * LOCKED so a batch never waits on (or holds up) a row another statement has locked. Oldest first through
 * (status, updated_at), ids by array: the form of retention's other picks (retention/store.ts says why).
 */
export function deleteFailedJobsBatch(prisma: PrismaClient, olderThanMs: number, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM jobs WHERE id = ANY(ARRAY(
      SELECT id FROM jobs WHERE status = 'failed' AND updated_at < now() - make_interval(secs => ${olderThanMs / 1000}::double precision)
      ORDER BY updated_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ))`;
}
