import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { readArchiver, readBackups } from "../db/backups.ts";
import type { PrismaClient } from "../db/database.ts";
import { REPLICA_STATES, type ReadStats } from "../db/replicas.ts";
import { queueGauges, type QueueGaugeRow } from "../jobs/store.ts";
import type { Logger } from "../logger.ts";
import type { StatusCounter } from "../modules/events/status-machine.ts";
import type { LimiterName } from "../rate-limit/limiter.ts";

/**
 * The gateway's Prometheus metrics, on a registry of its own per gateway instance (tests run several
 * gateways in one process; prom-client's global registry would mix them).
 *
 * Labels are bounded sets only: route templates, methods, status codes, transaction statuses, provider
 * names, job kinds, limiter names. Never a reference, e-mail, key, IP or raw URL.
 *
 * Counters count what this instance did since it started (Prometheus sums instances and rate() absorbs
 * restarts). The job queue is read from the database when scraped, so every instance reports the
 * whole (shared) queue: aggregate it with max(), not sum().
 */
export interface MetricsDeps {
  prisma: PrismaClient;
  logger: Logger;
  /**
   * The PostgreSQL pool's connections. PGlite has none to report: it is one in-process connection whose
   * queries run one at a time, and the request histogram already shows when they queue.
   */
  poolStats?: () => { total: number; idle: number; waiting: number };
  /** The read replicas (DATABASE_READ_URL); unset without them. */
  readStats?: () => ReadStats;
  /** The pgBackRest stanza whose last backup's age to export (PGBACKREST_STANZA); unset: none. */
  backupStanza?: string | undefined;
}

/** What the transports add once they exist (server.ts). */
export interface LiveSources {
  /** The shared subscription executions (src/graphql/fanout.ts). */
  fanout: () => { groups: number; subscribers: number; executions: number; deliveries: number; slowConsumersClosed: number };
}

export type GatewayMetrics = ReturnType<typeof createMetrics>;

/** The route label of a request no route matched (404s of unknown paths): never the path itself. */
export const UNMATCHED_ROUTE = "unmatched";

export function createMetrics(deps: MetricsDeps) {
  const { prisma, logger } = deps;
  const registry = new Registry();
  // Unprefixed (process_cpu_seconds_total, nodejs_eventloop_lag_seconds...): the names Node.js dashboards and alerts expect.
  collectDefaultMetrics({ register: registry });

  const httpDuration = new Histogram({
    name: "gateway_http_request_duration_seconds",
    help: "HTTP requests by Fastify route template (unmatched: no route), method and status code; _count counts requests.",
    labelNames: ["route", "method", "status"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const payments = new Counter({
    name: "gateway_payments_total",
    help: "Payments (transactions) that entered a status on this instance, counted once per committed change, by status and provider.",
    labelNames: ["status", "provider"] as const,
    registers: [registry],
  });
  const payouts = new Counter({
    name: "gateway_payouts_total",
    help: "Payouts that entered a status on this instance, counted once per committed change, by status and provider.",
    labelNames: ["status", "provider"] as const,
    registers: [registry],
  });
  const webhookAttempts = new Counter({
    name: "gateway_webhook_delivery_attempts_total",
    help: "Webhook delivery attempts by outcome: succeeded, retrying (will be tried again), failed (given up).",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const webhookLag = new Histogram({
    name: "gateway_webhook_delivery_lag_seconds",
    help: "From an event's creation to the successful delivery of its webhook (retries included).",
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600, 86400],
    registers: [registry],
  });
  const refusals = new Counter({
    name: "gateway_rate_limit_refusals_total",
    help: "Requests and WebSocket operations refused with 429, by the budget that ran out: api_key, ip, login_email, login_ip, and M-Pesa prompts from the payer pages: push_phone, push_link, push_merchant.",
    labelNames: ["limiter"] as const,
    registers: [registry],
  });

  const jobsQueued = new Gauge({
    name: "gateway_jobs_queued",
    help: "Jobs waiting to run (due now or scheduled later), by kind; read from the shared jobs table when scraped.",
    labelNames: ["kind"] as const,
    registers: [registry],
    collect: () => collectJobs(),
  });
  const jobsOldestDue = new Gauge({
    name: "gateway_jobs_oldest_due_age_seconds",
    help: "How long the oldest due job of each kind has waited past its run time (0: nothing overdue).",
    labelNames: ["kind"] as const,
    registers: [registry],
    collect: () => collectJobs(),
  });
  const jobsFailed = new Gauge({
    name: "gateway_jobs_failed",
    help: "Jobs kept as failed after their last attempt (an operator's to look at), by kind.",
    labelNames: ["kind"] as const,
    registers: [registry],
    collect: () => collectJobs(),
  });

  /** Kinds seen so far stay at 0 when their jobs are gone, so their series do not vanish. Bounded: kinds are code. */
  const kinds = new Set<string>();
  let jobsReading: Promise<void> | undefined;
  /** One query per scrape, shared by the three job gauges (prom-client collects them concurrently). */
  function collectJobs(): Promise<void> {
    jobsReading ??= readJobs().finally(() => {
      jobsReading = undefined;
    });
    return jobsReading;
  }
  async function readJobs(): Promise<void> {
    const now = new Date();
    let rows: QueueGaugeRow[];
    try {
      rows = await queueGauges(prisma, now);
    } catch (error) {
      // The database is down: this scrape has no job series, the rest (process, requests) still answers.
      logger.warn({ err: error }, "metrics: the jobs table could not be read");
      for (const gauge of [jobsQueued, jobsOldestDue, jobsFailed]) gauge.reset();
      return;
    }
    const queued = new Map<string, number>();
    const failed = new Map<string, number>();
    const oldest = new Map<string, number>();
    for (const row of rows) {
      kinds.add(row.kind);
      if (row.status === "queued") queued.set(row.kind, Number(row.jobs));
      if (row.status === "failed") failed.set(row.kind, Number(row.jobs));
      if (row.oldest_due) {
        const age = Math.max(0, (now.getTime() - new Date(row.oldest_due).getTime()) / 1000);
        oldest.set(row.kind, Math.max(oldest.get(row.kind) ?? 0, age));
      }
    }
    for (const kind of kinds) {
      jobsQueued.set({ kind }, queued.get(kind) ?? 0);
      jobsFailed.set({ kind }, failed.get(kind) ?? 0);
      jobsOldestDue.set({ kind }, oldest.get(kind) ?? 0);
    }
  }

  let openWebSockets = 0;
  let openSseStreams = 0;
  new Gauge({
    name: "gateway_live_connections_open",
    help: "Open live-status connections, by transport: graphql-ws sockets and GraphQL SSE streams.",
    labelNames: ["transport"] as const,
    registers: [registry],
    collect() {
      this.set({ transport: "websocket" }, openWebSockets);
      this.set({ transport: "sse" }, openSseStreams);
    },
  });

  if (deps.poolStats) {
    const poolStats = deps.poolStats;
    new Gauge({
      name: "gateway_db_pool_connections",
      help: "PostgreSQL pool connections: total open, idle, and queries waiting for one.",
      labelNames: ["state"] as const,
      registers: [registry],
      collect() {
        const stats = poolStats();
        this.set({ state: "total" }, stats.total);
        this.set({ state: "idle" }, stats.idle);
        this.set({ state: "waiting" }, stats.waiting);
      },
    });
  }

  if (deps.readStats) registerReplicaMetrics(registry, deps.readStats);
  // WAL archiving is PostgreSQL's (pg_stat_archiver); PGlite has none.
  if (deps.poolStats) registerBackupMetrics(registry, prisma, logger, deps.backupStanza);

  // A payment's provider is its channel's, which never changes: looked up once per channel, then known.
  const providers = new Map<number, string>();
  const lookups = new Map<number, Promise<string>>();
  function withProvider(channelId: number | null, use: (provider: string) => void): void {
    if (channelId === null) return use("none");
    const known = providers.get(channelId);
    if (known) return use(known);
    let lookup = lookups.get(channelId);
    if (!lookup) {
      lookup = prisma.paymentChannel
        .findUnique({ where: { id: channelId }, select: { provider: true } })
        .then((channel) => {
          const provider = channel?.provider ?? "none";
          providers.set(channelId, provider);
          return provider;
        })
        // Counted anyway, under a fixed label; the next change of this channel looks again.
        .catch(() => "unknown")
        .finally(() => lookups.delete(channelId));
      lookups.set(channelId, lookup);
    }
    void lookup.then(use);
  }

  const statusCounter: StatusCounter = {
    statusChanged(subject, status, channelId) {
      withProvider(channelId, (provider) => (subject === "transaction" ? payments : payouts).inc({ status, provider }));
    },
  };

  return {
    registry,
    /** For the services: told once per committed status change (events/status-machine.ts). */
    statusCounter,

    /** The shared-subscription counters, once the server has built the fanout. */
    attach(live: LiveSources) {
      const { fanout } = live;
      new Gauge({
        name: "gateway_subscription_groups",
        help: "Shared subscription executions open (one per distinct operation and scope), and the subscriptions they serve.",
        labelNames: ["count"] as const,
        registers: [registry],
        collect() {
          const stats = fanout();
          this.set({ count: "groups" }, stats.groups);
          this.set({ count: "subscribers" }, stats.subscribers);
        },
      });
      new Counter({
        name: "gateway_subscription_frames_total",
        help: "Shared subscriptions: events executed (once per group), next frames written, sockets closed for being too slow.",
        labelNames: ["kind"] as const,
        registers: [registry],
        collect() {
          const stats = fanout();
          this.reset();
          this.inc({ kind: "executions" }, stats.executions);
          this.inc({ kind: "deliveries" }, stats.deliveries);
          this.inc({ kind: "slow_consumers_closed" }, stats.slowConsumersClosed);
        },
      });
    },

    /** `route` is Fastify's route template (request.routeOptions.url), undefined when no route matched. */
    observeRequest(route: string | undefined, method: string, status: number, seconds: number) {
      httpDuration.observe({ route: route ?? UNMATCHED_ROUTE, method, status: String(status) }, seconds);
    },

    rateLimited(limiter: LimiterName) {
      refusals.inc({ limiter });
    },

    webhookAttempt(outcome: "succeeded" | "retrying" | "failed", eventCreatedAt?: Date) {
      webhookAttempts.inc({ outcome });
      if (outcome === "succeeded" && eventCreatedAt) webhookLag.observe(Math.max(0, (Date.now() - eventCreatedAt.getTime()) / 1000));
    },

    /** Wraps a @fastify/websocket handler so each socket counts while it is open. */
    countSockets<Socket extends { once(event: "close", listener: () => void): unknown }, Rest extends unknown[], Result>(
      handler: (socket: Socket, ...rest: Rest) => Result,
    ) {
      // A function, not an arrow: @fastify/websocket calls the handler with the Fastify instance as `this`.
      return function (this: unknown, socket: Socket, ...rest: Rest) {
        openWebSockets++;
        socket.once("close", () => openWebSockets--);
        return handler.call(this, socket, ...rest);
      };
    },

    /** Counts an SSE response until its connection closes. */
    countSseStream(response: { once(event: "close", listener: () => void): unknown }) {
      openSseStreams++;
      response.once("close", () => openSseStreams--);
    },
  };
}

/**
 * The read replicas: each one's state (1 on the state it is in) and lag, the reads each answered, and the reads the
 * primary answered instead. Read from the router's own counts when scraped. Labels: the replica's host:port, from
 * configuration (bounded), and the fallback's reason.
 */
function registerReplicaMetrics(registry: Registry, readStats: () => ReadStats): void {
  new Gauge({
    name: "gateway_db_replica_state",
    help: "Each read replica's state, 1 for the one it is in: ok (in rotation), lagging (behind by more than DATABASE_READ_MAX_LAG_MS), down (unreachable or not a standby).",
    labelNames: ["replica", "state"] as const,
    registers: [registry],
    collect() {
      for (const replica of readStats().replicas) {
        for (const state of REPLICA_STATES) this.set({ replica: replica.name, state }, replica.state === state ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: "gateway_db_replica_lag_seconds",
    help: "How far each read replica's replay is behind the primary, as last checked; absent while it is down.",
    labelNames: ["replica"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const replica of readStats().replicas) if (replica.lagMs !== null) this.set({ replica: replica.name }, replica.lagMs / 1000);
    },
  });
  new Counter({
    name: "gateway_db_replica_reads_total",
    help: "Statements each read replica answered (lists, reports, dashboards' figures).",
    labelNames: ["replica"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const replica of readStats().replicas) this.inc({ replica: replica.name }, replica.reads);
    },
  });
  new Counter({
    name: "gateway_db_read_fallbacks_total",
    help: "Replica reads the primary answered instead: no_replica (none in rotation: down or lagging), replica_failed (retried after a replica's failure).",
    labelNames: ["reason"] as const,
    registers: [registry],
    collect() {
      const { fallbacks } = readStats();
      this.reset();
      this.inc({ reason: "no_replica" }, fallbacks.noReplica);
      this.inc({ reason: "replica_failed" }, fallbacks.replicaFailed);
    },
  });
}

/** `pgbackrest info` runs at most this often (a scrape in between reports the age from the last answer). */
const BACKUP_INFO_EVERY_MS = 60_000;

/**
 * The backups' freshness (deploy/pgbackrest/, src/db/backups.ts), for the alert rules in deploy/alerts.yml: the age of
 * the last WAL segment archived and whether archiving is failing now (pg_stat_archiver, read when scraped), and with
 * a stanza, the age of the last good backup (from `pgbackrest info`). An age is absent until there is one.
 */
function registerBackupMetrics(registry: Registry, prisma: PrismaClient, logger: Logger, stanza: string | undefined): void {
  const ageOf = (at: Date) => Math.max(0, (Date.now() - at.getTime()) / 1000);
  let archiver: Promise<Awaited<ReturnType<typeof readArchiver>> | undefined> | undefined;
  /** One query per scrape, shared by the two archive gauges. */
  const readArchiverOnce = () =>
    (archiver ??= readArchiver(prisma)
      .catch((error: unknown) => {
        logger.warn({ err: error }, "metrics: could not read pg_stat_archiver");
        return undefined;
      })
      .finally(() => setTimeout(() => (archiver = undefined), 1000)));
  new Gauge({
    name: "gateway_wal_archive_age_seconds",
    help: "Seconds since PostgreSQL last archived a WAL segment (pg_stat_archiver on the primary); absent before the first.",
    registers: [registry],
    async collect() {
      const row = await readArchiverOnce();
      this.reset();
      if (row?.last_archived_time) this.set(ageOf(row.last_archived_time));
    },
  });
  new Gauge({
    name: "gateway_wal_archive_failing",
    help: "1 when archive_command's last attempt failed (after its last success), else 0.",
    registers: [registry],
    async collect() {
      const row = await readArchiverOnce();
      const failing = row?.last_failed_time && (!row.last_archived_time || row.last_failed_time > row.last_archived_time);
      this.set(failing ? 1 : 0);
    },
  });
  if (!stanza) return;
  let lastBackup: { readAt: number; finishedAt: Date | undefined } | undefined;
  new Gauge({
    name: "gateway_backup_age_seconds",
    help: "Seconds since the last good pgBackRest backup (full, diff or incr) of PGBACKREST_STANZA finished; absent before the first, or while the repository cannot be read.",
    registers: [registry],
    async collect() {
      if (!lastBackup || Date.now() - lastBackup.readAt > BACKUP_INFO_EVERY_MS) {
        const finishedAt = await readBackups(stanza).then(
          ({ last }) => (last ? new Date(last.timestamp.stop * 1000) : undefined),
          (error: unknown) => {
            logger.warn({ err: error }, "metrics: could not read the backups (pgbackrest info)");
            return undefined;
          },
        );
        lastBackup = { readAt: Date.now(), finishedAt };
      }
      this.reset();
      if (lastBackup.finishedAt) this.set(ageOf(lastBackup.finishedAt));
    },
  });
}
