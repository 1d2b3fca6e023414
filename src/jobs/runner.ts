import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { PrismaClient } from "../db/database.ts";
import type { Logger } from "../logger.ts";
import type { Foreground } from "./foreground.ts";
import { claimDue, claimDueKinds, completeClaimed, completeClaimedMany, deferClaimedMany, failClaimed, renewLeases, requeueClaimed, type ClaimedRow } from "./store.ts";

/**
 * The one durable job runner. Jobs live in the `jobs` table, so a job enqueued in the same database
 * transaction as the change that caused it survives any crash after commit. Every statement on that
 * table is in ./store.ts, features enqueue through it. Instances claim due jobs
 * with FOR UPDATE SKIP LOCKED, so each job runs on one instance at a time; `run_at` doubles as the
 * lease while a job runs, renewed every third of it while it still runs, so the job of an instance that died is
 * claimed again once its lease ends, and a job that runs long (a slow provider, a starved CPU) is never run twice at once.
 *
 * graphile-worker and pg-boss were weighed: both drive PostgreSQL through a node-postgres Pool (and
 * graphile-worker through LISTEN/NOTIFY), which the embedded in-process PGlite cannot offer, and the
 * gateway must behave the same on both backends. This is the reconciler's SKIP LOCKED pattern, made general.
 */
export interface ClaimedJob {
  id: bigint;
  kind: string;
  /** Runs of this job so far, this one included. */
  attempt: number;
  createdAt: Date;
}

/** Nothing: done (the job is deleted). `retryInMs`: run again later; `countAttempt: false` when it never really ran. */
export type JobOutcome = void | { retryInMs: number; error?: string; countAttempt?: boolean };

/** A job of a batch: its payload and its claim. */
export interface BatchJob<P> {
  payload: P;
  job: ClaimedJob;
}

/** A batch's answer for one job: an outcome as `run` returns it, or the Error it failed with (as if `run` threw). */
export type BatchOutcome = JobOutcome | Error;

interface JobDefinitionBase<P> {
  kind: string;
  /** Jobs of this kind running at once in one instance (default 10). */
  concurrency?: number;
  /**
   * While the API is busy, the kind keeps 1/busyShare of its slots (default BUSY_SHARE): work with a deadline of its
   * own (invoices due today) keeps a larger share than work that may wait (a webhook backlog).
   */
  busyShare?: number;
  /**
   * Its jobs spend their time waiting on other servers (webhook POSTs), not on this process or the database. While
   * the API is busy, the busy share then limits how many start per claim (claims are paced), not how many wait: a slow
   * endpoint's posts holding their slots do not hold back everyone else's deliveries.
   */
  waitsOnNetwork?: boolean;
  /**
   * Its jobs may wait for other work: while a kind that does not yield has a backlog in this instance (its last claim
   * filled every slot it had), this one claims one unit (a batch, or a job) per poll interval. A morning's renewals
   * are then paid before their e-mails go out, not beside them (bench/billing.ts), and the e-mails still move. A unit
   * at a time, not a job at a time: a batch of one costs the claim, reads and writes of a whole batch.
   */
  yields?: boolean;
  /** A job that throws this many times is kept as failed (default 10); an explicit retry is the handler's call. */
  maxAttempts?: number;
  /** Called once when a job gives up after throwing maxAttempts times. */
  onGiveUp?(payload: P, job: ClaimedJob, error: string): Promise<void>;
}

/** A kind whose jobs run one by one. */
export interface JobDefinition<P = any> extends JobDefinitionBase<P> {
  run(payload: P, job: ClaimedJob): Promise<JobOutcome>;
}

/**
 * A kind whose jobs run in batches: the jobs of one claim, at most `batchSize` together, one outcome per job in
 * their order (a throw fails them all). A batch's done jobs are deleted in one statement, so a kind with many
 * small jobs (webhook deliveries) spends a few statements per batch, not per job.
 */
export interface BatchJobDefinition<P = any> extends JobDefinitionBase<P> {
  runBatch(jobs: BatchJob<P>[]): Promise<BatchOutcome[]>;
  /** Jobs handed to one runBatch call at most (default: the kind's concurrency). */
  batchSize?: number;
}

type AnyJobDefinition = JobDefinition | BatchJobDefinition;
const isBatch = (definition: AnyJobDefinition): definition is BatchJobDefinition => "runBatch" in definition;

export interface JobRunnerOptions {
  prisma: PrismaClient;
  logger: Logger;
  /** How often an idle instance looks for due jobs (others' jobs, retries, leases of dead instances). */
  pollIntervalMs: number;
  /** How long a claimed job is this instance's; longer than any job can take. */
  leaseMs: number;
  /** Whether the API is busy in this process: while it is, each kind runs a share of its concurrency (BUSY_SHARE). */
  foreground?: Foreground;
}

/**
 * While the API is busy, background work keeps 1/BUSY_SHARE of its slots (at least one per kind) and claims at most
 * every BUSY_PAUSE_MS: a webhook backlog then takes about a fifth of the event loop (10 deliveries per 10 ms at
 * ~0.2 ms each), in bursts of ~2 ms, instead of three quarters of it (bench/webhook-drain.ts).
 */
const BUSY_SHARE = 20;
const BUSY_PAUSE_MS = 10;

const MAX_BACKOFF_MS = 60 * 60_000;

/** Exponential backoff with jitter for a job that threw: about 1 s, 2 s, 4 s ... at most an hour. */
export function errorBackoffMs(attempt: number): number {
  const base = Math.min(1000 * 2 ** Math.max(0, attempt - 1), MAX_BACKOFF_MS);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

export function createJobRunner(options: JobRunnerOptions) {
  const { prisma, logger, leaseMs } = options;
  const definitions = new Map<string, AnyJobDefinition>();
  const inFlight = new Map<string, number>();
  /** Kinds whose last claim filled every free slot: more may be due as soon as one finishes. */
  const saturated = new Set<string>();
  /** Jobs running in this instance (one job, or a batch), with their rows (to release them at shutdown). */
  const running = new Map<Promise<void>, ClaimedRow[]>();
  /** Per kind, jobs that settled with progress since its last claim: what a follow-up claims. */
  const credit = new Map<string, number>();
  /** Kinds whose last pass was held to the busy share. */
  const throttled = new Set<string>();
  /** When each yielding kind last claimed while it yielded (see `yields`). */
  const yieldedClaimAt = new Map<string, number>();
  const workerId = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  let started = false;
  let passing = false;
  let pollTimer: NodeJS.Timeout | undefined;
  let wakeTimer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;
  let wakeAt = Infinity;

  function claim(kind: string, limit: number): Promise<ClaimedRow[]> {
    const now = new Date();
    return claimDue(prisma, kind, limit, workerId, now, new Date(now.getTime() + leaseMs));
  }

  function claimKinds(limits: { kind: string; limit: number }[]): Promise<ClaimedRow[]> {
    const now = new Date();
    return claimDueKinds(prisma, limits, workerId, now, new Date(now.getTime() + leaseMs));
  }

  /** Times at which retries this instance scheduled fall due; one timer is armed for the earliest. */
  const wakeTimes: number[] = [];

  function armWakeTimer() {
    if (!started || wakeTimes.length === 0) return;
    const next = Math.min(...wakeTimes);
    if (next >= wakeAt) return;
    if (wakeTimer) clearTimeout(wakeTimer);
    wakeAt = next;
    // A few ms late rather than early: run_at has millisecond precision and an early pass claims nothing.
    wakeTimer = setTimeout(() => {
      wakeAt = Infinity;
      wakeTimer = undefined;
      const now = Date.now();
      for (let i = wakeTimes.length - 1; i >= 0; i--) if (wakeTimes[i]! <= now) wakeTimes.splice(i, 1);
      trigger();
      armWakeTimer();
    }, Math.max(0, next - Date.now()) + 5);
    wakeTimer.unref();
  }

  /** Wakes this instance when a retry it scheduled falls due (sooner than the next poll). */
  function wakeUpAt(time: number) {
    if (!started) return;
    wakeTimes.push(time);
    armWakeTimer();
  }

  async function reschedule(row: ClaimedRow, retryInMs: number, error: string | undefined, countAttempt: boolean) {
    const runAt = new Date(Date.now() + Math.max(0, retryInMs));
    await requeueClaimed(prisma, row.id, workerId, runAt, error, countAttempt);
    // A deferred job (no capacity here now) is claimed again by the follow-ups as capacity frees, or at the next
    // poll; waking a pass for each would claim every free slot, only to defer those too, again and again.
    if (countAttempt) wakeUpAt(runAt.getTime());
  }

  const jobOf = (row: ClaimedRow): ClaimedJob => ({ id: row.id, kind: row.kind, attempt: row.attempts, createdAt: row.created_at });
  const asError = (error: unknown) => (error instanceof Error ? error : new Error(String(error)));
  const isDeferral = (outcome: BatchOutcome): outcome is { retryInMs: number; countAttempt: false } => !!outcome && !(outcome instanceof Error) && outcome.countAttempt === false && !outcome.error;
  /** False for a deferral (`countAttempt: false`): the job could not run yet, so its slot freed up for nothing. */
  const progressed = (outcome: BatchOutcome) => outcome instanceof Error || !outcome || outcome.countAttempt !== false;

  /** Settles a job that is not done (retry, or failed for good); true when it is done, for the caller to delete. */
  async function settle(definition: AnyJobDefinition, row: ClaimedRow, outcome: BatchOutcome): Promise<boolean> {
    if (outcome instanceof Error) {
      const message = outcome.message;
      if (row.attempts >= (definition.maxAttempts ?? 10)) {
        logger.error({ jobId: String(row.id), kind: row.kind, attempts: row.attempts, err: message }, "job failed for good");
        await failClaimed(prisma, row.id, workerId, message);
        await definition.onGiveUp?.(row.payload, jobOf(row), message);
      } else {
        logger.warn({ jobId: String(row.id), kind: row.kind, attempt: row.attempts, err: message }, "job failed; will retry");
        await reschedule(row, errorBackoffMs(row.attempts), message, true);
      }
      return false;
    }
    if (outcome) {
      await reschedule(row, outcome.retryInMs, outcome.error, outcome.countAttempt ?? true);
      return false;
    }
    return true;
  }

  /** Runs one job and settles it; returns how many jobs made progress (0 or 1). */
  async function execute(definition: JobDefinition, row: ClaimedRow): Promise<number> {
    let outcome: BatchOutcome;
    try {
      outcome = await definition.run(row.payload, jobOf(row));
    } catch (error) {
      outcome = asError(error);
    }
    if (await settle(definition, row, outcome)) await completeClaimed(prisma, row.id, workerId);
    return progressed(outcome) ? 1 : 0;
  }

  /** Runs a batch and settles it: retries one by one (rare), every done job in one DELETE. Returns how many made progress. */
  async function executeBatch(definition: BatchJobDefinition, rows: ClaimedRow[]): Promise<number> {
    let outcomes: BatchOutcome[];
    try {
      outcomes = await definition.runBatch(rows.map((row) => ({ payload: row.payload, job: jobOf(row) })));
      if (outcomes.length !== rows.length) throw new Error(`runBatch of ${definition.kind} answered ${outcomes.length} outcomes for ${rows.length} jobs`);
    } catch (error) {
      outcomes = rows.map(() => asError(error));
    }
    const done: bigint[] = [];
    await Promise.all(rows.map(async (row, i) => void (!isDeferral(outcomes[i]) && (await settle(definition, row, outcomes[i])) && done.push(row.id))));
    // Jobs that could not run yet (no turn free) go back together, due with the latest retry of their group: one
    // group per power of two of the delay, so a job asked back in 200 ms is not held as long as one asked back in 10 s.
    const deferrals = new Map<number, { ids: bigint[]; retryInMs: number }>();
    rows.forEach((row, i) => {
      const outcome = outcomes[i]!;
      if (!isDeferral(outcome)) return;
      const retryInMs = Math.max(0, outcome.retryInMs);
      const bucket = Math.ceil(Math.log2(retryInMs + 1));
      const group = deferrals.get(bucket) ?? { ids: [], retryInMs: 0 };
      group.ids.push(row.id);
      group.retryInMs = Math.max(group.retryInMs, retryInMs);
      deferrals.set(bucket, group);
    });
    for (const { ids, retryInMs } of deferrals.values()) await deferClaimedMany(prisma, ids, workerId, new Date(Date.now() + retryInMs));
    await completeClaimedMany(prisma, done, workerId);
    return outcomes.filter(progressed).length;
  }

  /** The rows of one claim, as the units that run: one job each, or batches of at most batchSize. */
  function units(definition: AnyJobDefinition, rows: ClaimedRow[]): ClaimedRow[][] {
    if (!isBatch(definition)) return rows.map((row) => [row]);
    const size = Math.max(1, definition.batchSize ?? definition.concurrency ?? 10);
    const out: ClaimedRow[][] = [];
    for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
    return out;
  }

  const runUnit = (definition: AnyJobDefinition, rows: ClaimedRow[]) => (isBatch(definition) ? executeBatch(definition, rows) : execute(definition, rows[0]!));

  function start(definition: AnyJobDefinition, rows: ClaimedRow[]) {
    const { kind } = definition;
    inFlight.set(kind, (inFlight.get(kind) ?? 0) + rows.length);
    const done: Promise<void> = runUnit(definition, rows)
      .catch((error: unknown) => {
        logger.error({ err: error, jobIds: rows.map((r) => String(r.id)), kind }, "job bookkeeping failed; its lease will expire");
        return 0;
      })
      .then((progress) => {
        running.delete(done);
        inFlight.set(kind, (inFlight.get(kind) ?? rows.length) - rows.length);
        // More of this kind are likely due: claim as many as just made progress, this kind only.
        if (saturated.has(kind) && progress > 0) {
          credit.set(kind, (credit.get(kind) ?? 0) + progress);
          trigger(kind);
        }
      });
    running.set(done, rows);
  }

  /**
   * Claims for every kind (`kinds` undefined: the poll, a nudge, a retry falling due) as many as it has free
   * slots, or, for a follow-up after jobs settled, for those kinds only as many as made progress: a deferred
   * job freed its slot only to wait again, and claiming on it at once would churn the queue.
   */
  async function pass(kinds: Set<string> | undefined) {
    const apiBusy = options.foreground?.busy() ?? false;
    const backlog = [...definitions.values()].some((definition) => !definition.yields && saturated.has(definition.kind));
    const wanted: { definition: AnyJobDefinition; limit: number }[] = [];
    for (const definition of definitions.values()) {
      const { kind } = definition;
      if (kinds && !kinds.has(kind)) continue;
      const yielding = !!definition.yields && backlog;
      const busy = apiBusy || yielding;
      const concurrency = definition.concurrency ?? 10;
      const share = Math.max(1, Math.ceil(concurrency / (definition.busyShare ?? BUSY_SHARE)));
      const unit = isBatch(definition) ? Math.min(concurrency, definition.batchSize ?? concurrency) : 1;
      const slots = yielding ? unit : busy && !definition.waitsOnNetwork ? share : concurrency;
      const free = slots - (inFlight.get(kind) ?? 0);
      // Once the API (or the backlog it yields to) is no longer busy, a kind held back claims every free slot at once, not only its credit.
      const claimable = kinds && !(throttled.has(kind) && !busy) ? Math.min(free, credit.get(kind) ?? 0) : free;
      let limit = busy && definition.waitsOnNetwork ? Math.min(claimable, share) : claimable;
      if (yielding) {
        // One unit per poll interval (a tenth early: the poll's timer may fire a little before the interval is over).
        const due = Date.now() - (yieldedClaimAt.get(kind) ?? -Infinity) >= options.pollIntervalMs * 0.9;
        limit = due ? free : 0; // its slots are one unit
      }
      if (busy && share < concurrency) throttled.add(kind);
      else throttled.delete(kind);
      // Asked (a nudge, the poll) with every slot taken: the next of its jobs to finish claims again, so work
      // committed now does not wait for the poll (2 s) when the last claim had come back short.
      if (!kinds && free <= 0) saturated.add(kind);
      if (limit <= 0) continue;
      if (yielding) yieldedClaimAt.set(kind, Date.now());
      credit.delete(kind);
      wanted.push({ definition, limit });
    }
    if (!wanted.length) return;
    // Every kind's claim in one statement: a pass costs one round trip however many kinds are registered.
    const rows = await claimKinds(wanted.map(({ definition, limit }) => ({ kind: definition.kind, limit })));
    for (const { definition, limit } of wanted) {
      const mine = rows.filter((row) => row.kind === definition.kind);
      if (mine.length === limit) saturated.add(definition.kind);
      else saturated.delete(definition.kind);
      for (const unit of units(definition, mine)) start(definition, unit);
    }
  }

  /** Extends the leases of the jobs running here (until they settle, through a shutdown's wait too). */
  function renewRunning() {
    const ids = [...running.values()].flat().map((row) => row.id);
    if (!ids.length) return;
    renewLeases(prisma, ids, workerId, new Date(Date.now() + leaseMs)).catch((error: unknown) => logger.warn({ err: error }, "renewing job leases failed; will try again"));
  }

  /** Kinds asked for since the last pass; all of them when `passAll`. */
  const asked = new Set<string>();
  let passAll = false;

  /** Runs a claiming pass (over every kind, or one kind) now, or right after the current one (passes never overlap). */
  function trigger(kind?: string) {
    if (!started) return;
    if (kind === undefined) passAll = true;
    else asked.add(kind);
    if (passing) return;
    passing = true;
    void (async () => {
      try {
        while (started && (passAll || asked.size)) {
          // Between claims the event loop serves whatever else waits (API requests): a backlog never starves them.
          if (options.foreground?.busy()) await new Promise<void>((resolve) => setTimeout(resolve, BUSY_PAUSE_MS));
          else await new Promise<void>((resolve) => setImmediate(resolve));
          const kinds = passAll ? undefined : new Set(asked);
          passAll = false;
          asked.clear();
          await pass(kinds);
        }
      } catch (error) {
        logger.error({ err: error }, "claiming jobs failed; will try again at the next poll");
      } finally {
        passing = false;
      }
    })();
  }

  return {
    workerId,

    register<P>(definition: JobDefinition<P> | BatchJobDefinition<P>) {
      if (definitions.has(definition.kind)) throw new Error(`job kind ${definition.kind} is registered twice`);
      definitions.set(definition.kind, definition);
    },

    /** Starts working the queue in this instance. */
    start() {
      if (started) return;
      started = true;
      pollTimer = setInterval(() => trigger(), options.pollIntervalMs);
      pollTimer.unref();
      renewTimer ??= setInterval(renewRunning, Math.max(100, Math.floor(leaseMs / 3)));
      renewTimer.unref();
      trigger();
    },

    /** Call after committing jobs that may be due now: this instance picks them up without waiting for a poll. */
    nudge() {
      trigger();
    },

    /** Claims every job due now (of the given kinds) and runs each once, waiting for them: for operators and tests. */
    async runDueJobs(kinds?: string[]): Promise<number> {
      let claimed = 0;
      for (const definition of definitions.values()) {
        if (kinds && !kinds.includes(definition.kind)) continue;
        const rows = await claim(definition.kind, 1000);
        claimed += rows.length;
        await Promise.all(units(definition, rows).map((unit) => runUnit(definition, unit)));
      }
      return claimed;
    },

    /**
     * Stops claiming and waits for running jobs to finish. Jobs still running at `releaseAt` (epoch ms; a
     * shutdown's deadline) are put back in the queue, due now and without counting the attempt, so another
     * instance runs them at once instead of after their lease; this instance's late outcome is then ignored
     * (the store's writes are guarded by the claim). At-least-once: a webhook may go out twice.
     */
    async stop(options: { releaseAt?: number | undefined } = {}) {
      started = false;
      passAll = false;
      asked.clear();
      if (pollTimer) clearInterval(pollTimer);
      if (wakeTimer) clearTimeout(wakeTimer);
      wakeAt = Infinity;
      wakeTimes.length = 0;
      let releaseTimer: NodeJS.Timeout | undefined;
      const released =
        options.releaseAt === undefined
          ? new Promise<never>(() => {})
          : new Promise<void>((resolve) => {
              releaseTimer = setTimeout(() => {
                const rows = [...running.values()].flat();
                if (rows.length) logger.warn({ jobs: rows.map((r) => String(r.id)) }, "shutting down: releasing jobs still running");
                void Promise.allSettled(rows.map((row) => requeueClaimed(prisma, row.id, workerId, new Date(), "released at shutdown", false))).then(() => resolve());
              }, Math.max(0, options.releaseAt! - Date.now()));
            });
      try {
        while (passing || running.size) {
          const finished = await Promise.race([Promise.allSettled([...running.keys()]).then(() => false), released.then(() => true)]);
          if (finished) return;
          if (passing) await new Promise((resolve) => setTimeout(resolve, 5));
        }
      } finally {
        if (releaseTimer) clearTimeout(releaseTimer);
        // Leases were renewed through the wait: the jobs still running were either finished or released by now.
        if (renewTimer) clearInterval(renewTimer);
        renewTimer = undefined;
      }
    },
  };
}

export type JobRunner = ReturnType<typeof createJobRunner>;
