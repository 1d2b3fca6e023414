import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { PrismaClient } from "../db/database.ts";
import type { Logger } from "../logger.ts";
import { claimDue, completeClaimed, failClaimed, requeueClaimed, type ClaimedRow } from "./store.ts";

/**
 * The one durable job runner. Jobs live in the `jobs` table, so a job enqueued in the same database
 * transaction as the change that caused it survives any crash after commit. Every statement on that
 * table is in ./store.ts, features enqueue through it. Instances claim due jobs
 * with FOR UPDATE SKIP LOCKED, so each job runs on one instance at a time; `run_at` doubles as the
 * lease while a job runs, so the job of an instance that died is claimed again once the lease ends.
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

export interface JobDefinition<P = any> {
  kind: string;
  run(payload: P, job: ClaimedJob): Promise<JobOutcome>;
  /** Jobs of this kind running at once in one instance (default 10). */
  concurrency?: number;
  /** A job that throws this many times is kept as failed (default 10); an explicit retry is the handler's call. */
  maxAttempts?: number;
  /** Called once when a job gives up after throwing maxAttempts times. */
  onGiveUp?(payload: P, job: ClaimedJob, error: string): Promise<void>;
}

export interface JobRunnerOptions {
  prisma: PrismaClient;
  logger: Logger;
  /** How often an idle instance looks for due jobs (others' jobs, retries, leases of dead instances). */
  pollIntervalMs: number;
  /** How long a claimed job is this instance's; longer than any job can take. */
  leaseMs: number;
}

const MAX_BACKOFF_MS = 60 * 60_000;

/** Exponential backoff with jitter for a job that threw: about 1 s, 2 s, 4 s ... at most an hour. */
export function errorBackoffMs(attempt: number): number {
  const base = Math.min(1000 * 2 ** Math.max(0, attempt - 1), MAX_BACKOFF_MS);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

export function createJobRunner(options: JobRunnerOptions) {
  const { prisma, logger, leaseMs } = options;
  const definitions = new Map<string, JobDefinition>();
  const inFlight = new Map<string, number>();
  /** Kinds whose last claim filled every free slot: more may be due as soon as one finishes. */
  const saturated = new Set<string>();
  /** Jobs running in this instance, with their rows (to release them at shutdown). */
  const running = new Map<Promise<void>, ClaimedRow>();
  const workerId = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  let started = false;
  let passing = false;
  let again = false;
  let pollTimer: NodeJS.Timeout | undefined;
  let wakeTimer: NodeJS.Timeout | undefined;
  let wakeAt = Infinity;

  function claim(kind: string, limit: number): Promise<ClaimedRow[]> {
    const now = new Date();
    return claimDue(prisma, kind, limit, workerId, now, new Date(now.getTime() + leaseMs));
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
    wakeUpAt(runAt.getTime());
  }

  async function execute(definition: JobDefinition, row: ClaimedRow) {
    const job: ClaimedJob = { id: row.id, kind: row.kind, attempt: row.attempts, createdAt: row.created_at };
    let outcome: JobOutcome;
    try {
      outcome = await definition.run(row.payload, job);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (row.attempts >= (definition.maxAttempts ?? 10)) {
        logger.error({ jobId: String(row.id), kind: row.kind, attempts: row.attempts, err: message }, "job failed for good");
        await failClaimed(prisma, row.id, workerId, message);
        await definition.onGiveUp?.(row.payload, job, message);
      } else {
        logger.warn({ jobId: String(row.id), kind: row.kind, attempt: row.attempts, err: message }, "job failed; will retry");
        await reschedule(row, errorBackoffMs(row.attempts), message, true);
      }
      return;
    }
    if (outcome) await reschedule(row, outcome.retryInMs, outcome.error, outcome.countAttempt ?? true);
    else await completeClaimed(prisma, row.id, workerId);
  }

  function start(definition: JobDefinition, row: ClaimedRow) {
    inFlight.set(definition.kind, (inFlight.get(definition.kind) ?? 0) + 1);
    const done: Promise<void> = execute(definition, row)
      .catch((error: unknown) => logger.error({ err: error, jobId: String(row.id), kind: row.kind }, "job bookkeeping failed; its lease will expire"))
      .finally(() => {
        running.delete(done);
        inFlight.set(definition.kind, (inFlight.get(definition.kind) ?? 1) - 1);
        if (saturated.has(definition.kind)) trigger();
      });
    running.set(done, row);
  }

  async function pass() {
    for (const definition of definitions.values()) {
      const free = (definition.concurrency ?? 10) - (inFlight.get(definition.kind) ?? 0);
      if (free <= 0) continue;
      const rows = await claim(definition.kind, free);
      if (rows.length === free) saturated.add(definition.kind);
      else saturated.delete(definition.kind);
      for (const row of rows) start(definition, row);
    }
  }

  /** Runs a claiming pass now, or right after the current one (passes never overlap). */
  function trigger() {
    if (!started) return;
    if (passing) {
      again = true;
      return;
    }
    passing = true;
    void (async () => {
      try {
        do {
          again = false;
          await pass();
        } while (again && started);
      } catch (error) {
        logger.error({ err: error }, "claiming jobs failed; will try again at the next poll");
      } finally {
        passing = false;
      }
    })();
  }

  return {
    workerId,

    register<P>(definition: JobDefinition<P>) {
      if (definitions.has(definition.kind)) throw new Error(`job kind ${definition.kind} is registered twice`);
      definitions.set(definition.kind, definition);
    },

    /** Starts working the queue in this instance. */
    start() {
      if (started) return;
      started = true;
      pollTimer = setInterval(trigger, options.pollIntervalMs);
      pollTimer.unref();
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
        await Promise.all(rows.map((row) => execute(definition, row)));
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
                const rows = [...running.values()];
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
      }
    },
  };
}

export type JobRunner = ReturnType<typeof createJobRunner>;
