import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { PrismaClient } from "../db/database.ts";
import type { PublishedEvent } from "../modules/events/publisher.ts";

/**
 * The gateway's Prometheus metrics, one registry per gateway instance (tests run several in one process).
 * Labels are bounded sets only (route templates, statuses, providers, job kinds): never references,
 * e-mails, keys or raw URLs. Counters count what this instance did since it started, as Prometheus
 * expects; queue depth and pool use are read when scraped.
 */
export interface MetricsSources {
  prisma: PrismaClient;
  /** The PostgreSQL pool's connections (PGlite has one in-process connection and no pool). */
  poolStats?: () => { total: number; idle: number; waiting: number };
  /** Open live-status connections: graphql-ws sockets and GraphQL SSE streams. */
  openSubscriptions: () => { websocket: number; sse: number };
  /** The shared subscription executions (src/graphql/fanout.ts). */
  fanout?: () => { groups: number; subscribers: number; executions: number; deliveries: number; slowConsumersClosed: number };
}

export type GatewayMetrics = ReturnType<typeof createMetrics>;

/** The surface whose budget ran out, from the request path (bounded: a few fixed names). */
export function limiterOf(url: string): string {
  if (url.startsWith("/v1/auth/")) return "login";
  if (url.startsWith("/payment/checkout/")) return "checkout";
  if (url.startsWith("/graphql")) return "graphql";
  if (url.startsWith("/api/") || url.startsWith("/v1/")) return "rest";
  return "other";
}

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "gateway_" });

  const httpDuration = new Histogram({
    name: "gateway_http_request_duration_seconds",
    help: "HTTP requests by route template, method and status code.",
    labelNames: ["route", "method", "status"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  // The same requests counted plainly too: the usual rate() source, and readable by parsers that flatten histograms.
  const httpRequests = new Counter({
    name: "gateway_http_requests_total",
    help: "HTTP requests by route template, method and status code.",
    labelNames: ["route", "method", "status"] as const,
    registers: [registry],
  });
  const payments = new Counter({
    name: "gateway_payments_total",
    help: "Payments (transactions) that reached a status on this instance, by status and provider; created counts new pending payments.",
    labelNames: ["status", "provider"] as const,
    registers: [registry],
  });
  const payouts = new Counter({
    name: "gateway_payouts_total",
    help: "Payouts that reached a status on this instance, by status and provider.",
    labelNames: ["status", "provider"] as const,
    registers: [registry],
  });
  const webhookDeliveries = new Counter({
    name: "gateway_webhook_delivery_attempts_total",
    help: "Webhook delivery attempts by outcome: succeeded, retrying (will be tried again), failed (gave up).",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const webhookLag = new Histogram({
    name: "gateway_webhook_delivery_lag_seconds",
    help: "From an event's creation to its webhook's successful delivery.",
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600],
    registers: [registry],
  });
  const rateLimited = new Counter({
    name: "gateway_rate_limit_refusals_total",
    help: "Requests refused with 429, by limiter (rest, graphql, checkout, login).",
    labelNames: ["limiter"] as const,
    registers: [registry],
  });

  // Where a status event's provider comes from: its channel, whose provider never changes.
  const providers = new Map<number, Promise<string>>();
  let sources: MetricsSources | undefined;
  const providerOf = (channelId: unknown): Promise<string> => {
    if (typeof channelId !== "number" || !sources) return Promise.resolve("none");
    let provider = providers.get(channelId);
    if (!provider) {
      provider = sources.prisma.paymentChannel
        .findUnique({ where: { id: channelId }, select: { provider: true } })
        .then((c) => c?.provider ?? "none")
        .catch(() => {
          providers.delete(channelId);
          return "unknown";
        });
      providers.set(channelId, provider);
    }
    return provider;
  };

  return {
    registry,

    /** Scrape-time readings need the database and the servers; wired once they exist. */
    attach(attached: MetricsSources) {
      sources = attached;
      const { prisma } = attached;
      new Gauge({
        name: "gateway_jobs_queued",
        help: "Jobs waiting to run (queued), by kind.",
        labelNames: ["kind"] as const,
        registers: [registry],
        async collect() {
          this.reset();
          const rows = await prisma.job.groupBy({ by: ["kind"], where: { status: "queued" }, _count: { _all: true } });
          for (const row of rows) this.set({ kind: row.kind }, row._count._all);
        },
      });
      new Gauge({
        name: "gateway_jobs_oldest_due_age_seconds",
        help: "How long the oldest due job of each kind has been waiting past its run time (0: none overdue).",
        labelNames: ["kind"] as const,
        registers: [registry],
        async collect() {
          this.reset();
          const rows = await prisma.job.groupBy({ by: ["kind"], where: { status: "queued", runAt: { lte: new Date() } }, _min: { runAt: true } });
          for (const row of rows) this.set({ kind: row.kind }, row._min.runAt ? Math.max(0, (Date.now() - row._min.runAt.getTime()) / 1000) : 0);
        },
      });
      new Gauge({
        name: "gateway_live_connections_open",
        help: "Open live-status connections, by transport: graphql-ws sockets and GraphQL SSE streams.",
        labelNames: ["transport"] as const,
        registers: [registry],
        collect() {
          const open = attached.openSubscriptions();
          this.set({ transport: "websocket" }, open.websocket);
          this.set({ transport: "sse" }, open.sse);
        },
      });
      if (attached.fanout) {
        const fanout = attached.fanout;
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
      }
      if (attached.poolStats) {
        const poolStats = attached.poolStats;
        new Gauge({
          name: "gateway_db_pool_connections",
          help: "PostgreSQL pool connections: total open, idle, and requests waiting for one.",
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
    },

    observeRequest(route: string, method: string, status: number, seconds: number) {
      const labels = { route, method, status: String(status) };
      httpDuration.observe(labels, seconds);
      httpRequests.inc(labels);
      if (status === 429) rateLimited.inc({ limiter: limiterOf(route) });
    },

    /** Called with every event this instance commits (once each: the publisher's after-commit call). */
    eventCommitted(event: PublishedEvent) {
      const [subject, status] = event.type.split(".") as [string, string];
      const payload = event.payload as Record<string, Record<string, unknown> | undefined>;
      if (subject === "transaction") {
        // A new checkout payment is announced as created, an STK push as pending: both are a new pending payment.
        const label = status === "created" ? "pending" : status;
        void providerOf(payload.transaction?.channel_id).then((provider) => payments.inc({ status: label, provider }));
      } else if (subject === "payout") {
        void providerOf(payload.payout?.payment_channel_id).then((provider) => payouts.inc({ status, provider }));
      }
    },

    webhookAttempt(outcome: "succeeded" | "retrying" | "failed", eventCreatedAt?: Date) {
      webhookDeliveries.inc({ outcome });
      if (outcome === "succeeded" && eventCreatedAt) webhookLag.observe(Math.max(0, (Date.now() - eventCreatedAt.getTime()) / 1000));
    },
  };
}
