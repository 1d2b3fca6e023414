import { setTimeout as sleep } from "node:timers/promises";
import type { Config } from "../../config.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { deleteFailedJobsBatch, enqueue } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import { deleteOldProviderCallsBatch } from "../provider-calls/store.ts";
import { deleteFinishedMessagesBatch } from "../mail/store.ts";
import * as store from "./store.ts";

/**
 * Bounded tables: what the gateway only needs for a while is deleted once that while is over, by a job on the
 * runner, every hour, in batches. Money and its history (transactions, payouts, refunds, the ledger,
 * reconciliations) are never deleted.
 */
export const RETENTION_JOB = "retention.run";
const SCHEDULE_KEY = { schedule: "hourly" } as const;
/** Minutes past each hour (UTC) the job runs: a fixed moment, so restarts re-queue the same run instead of postponing it. */
const SCHEDULE_MINUTE = 40;
/** A run that ran out of time (a large backlog) continues this soon instead of in an hour. */
const CONTINUE_AFTER_MS = 60_000;
/** Rows per statement: small enough that one batch is a short transaction, large enough to clear a backlog. */
export const BATCH_SIZE = 1000;
/** Between two batches: lets writers (on PGlite, the one connection) in before the next one. */
const PAUSE_MS = 10;
/** Idempotency-Key records are kept this long after they expire (they expire 24 h after the request). */
export const IDEMPOTENCY_KEY_GRACE_MS = 24 * 3_600_000;
/** Provider calls on record (support's view of what a provider was asked and answered) are kept 30 days. */
export const PROVIDER_CALLS_KEPT_MS = 30 * 86_400_000;

export type RetentionSettings = Config["retention"];

/** Rows deleted per table, in the order the tables are pruned. */
export interface RetentionCounts {
  webhook_deliveries: number;
  events: number;
  jobs: number;
  idempotency_keys: number;
  refresh_tokens: number;
  provider_calls: number;
  mail_messages: number;
}

export interface RetentionRun {
  deleted: RetentionCounts;
  /** False when the deadline came first: what is left is deleted by the next run. */
  complete: boolean;
}

/**
 * Prunes every bounded table once, batch by batch, until nothing old is left or `deadline` (epoch ms) passes.
 * Deliveries go before events, so events whose last delivery went in this run can go in it too.
 */
export async function applyRetention(prisma: PrismaClient, settings: RetentionSettings, options: { deadline?: number; batchSize?: number } = {}): Promise<RetentionRun> {
  const limit = options.batchSize ?? BATCH_SIZE;
  const deadline = options.deadline ?? Infinity;
  const tables: [keyof RetentionCounts, () => Promise<number>][] = [
    ["webhook_deliveries", () => store.deleteFinishedDeliveriesBatch(prisma, settings.webhookDeliveriesMs, limit)],
    ["events", () => store.deleteEventsBatch(prisma, settings.eventsMs, limit)],
    ["jobs", () => deleteFailedJobsBatch(prisma, settings.failedJobsMs, limit)],
    ["idempotency_keys", () => store.deleteExpiredIdempotencyKeysBatch(prisma, IDEMPOTENCY_KEY_GRACE_MS, limit)],
    ["refresh_tokens", () => store.deleteExpiredRefreshTokensBatch(prisma, limit)],
    ["provider_calls", () => deleteOldProviderCallsBatch(prisma, PROVIDER_CALLS_KEPT_MS, limit)],
    ["mail_messages", () => deleteFinishedMessagesBatch(prisma, settings.mailMessagesMs, limit)],
  ];
  const deleted: RetentionCounts = { webhook_deliveries: 0, events: 0, jobs: 0, idempotency_keys: 0, refresh_tokens: 0, provider_calls: 0, mail_messages: 0 };
  for (const [table, deleteBatch] of tables) {
    for (;;) {
      const count = await deleteBatch();
      deleted[table] += count;
      // A short batch means nothing old is left (rows skipped as locked wait for the next run).
      if (count < limit) break;
      if (Date.now() >= deadline) return { deleted, complete: false };
      await sleep(PAUSE_MS);
    }
  }
  return { deleted, complete: true };
}

export interface RetentionServiceDeps {
  prisma: PrismaClient;
  jobs: JobRunner;
  settings: RetentionSettings;
  /** The job runner's lease: a run stops well within it, so its job is never claimed again while it runs. */
  leaseMs: number;
  logger: Logger;
}

export function createRetentionService(deps: RetentionServiceDeps) {
  const { prisma, settings, logger } = deps;

  /** The next SCHEDULE_MINUTE past an hour, UTC. */
  function nextHourlyRun(now = Date.now()): Date {
    const hour = 3_600_000;
    const offset = SCHEDULE_MINUTE * 60_000;
    return new Date(Math.floor((now - offset) / hour) * hour + hour + offset);
  }

  /** The one queued run, at `runAt`: by its key, a copy already queued is replaced (as the reconciliation schedule). */
  const queueNextRun = (runAt: Date = nextHourlyRun()): Promise<void> => enqueue(prisma, RETENTION_JOB, { ...SCHEDULE_KEY }, { key: SCHEDULE_KEY, runAt });

  deps.jobs.register<Record<string, never>>({
    kind: RETENTION_JOB,
    concurrency: 1,
    // Prunes, then queues the next run: in an hour, or in a minute when a backlog is left or the run failed (it
    // never throws: the runner's retry would be a second copy beside the one queued here).
    async run() {
      let complete = false;
      try {
        const run = await applyRetention(prisma, settings, { deadline: Date.now() + deps.leaseMs / 2 });
        complete = run.complete;
        if (Object.values(run.deleted).some((n) => n > 0)) logger.info({ deleted: run.deleted, complete }, "retention: deleted old rows");
      } catch (error) {
        logger.warn({ err: error }, "retention run failed; trying again in a minute");
      }
      await queueNextRun(complete ? nextHourlyRun() : new Date(Date.now() + CONTINUE_AFTER_MS));
    },
  });

  return {
    /** Queues the hourly run (at gateway start); at most one stays queued. */
    scheduleHourly: () => queueNextRun(),
    /** The operator's run (CLI): everything old, however long it takes. */
    runNow: () => applyRetention(prisma, settings),
  };
}

export type RetentionService = ReturnType<typeof createRetentionService>;
