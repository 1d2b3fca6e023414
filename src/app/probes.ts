import type { FastifyInstance } from "fastify";
import type { Database } from "../db/database.ts";
import { errorEnvelope, GatewayError, UNAVAILABLE_RETRY_AFTER_SECONDS } from "../errors.ts";
import type { RedisConnections } from "../infra/redis.ts";
import type { Logger } from "../logger.ts";
import { sendError } from "./http-app.ts";

/**
 * For this long after the database stopped answering, /ready calls it `failing_over` (a Patroni failover takes about
 * 30 s, deploy/patroni/patroni.yml), then `unreachable`: past that, a person is needed.
 */
const FAILOVER_WINDOW_MS = 60_000;

/** GET / (where everything else is), /health (the process is up) and /ready (it can serve: a balancer's check). */
export function registerProbes(app: FastifyInstance, deps: { db: Database; redis: RedisConnections | undefined; logger: Logger; isDraining: () => boolean }): void {
  const { db, redis, logger } = deps;
  const open = { config: { auth: "none", rateLimit: "none" } } as const;
  /** When the database first failed the check in the current outage (unset while it answers). */
  let unreachableSince: number | undefined;

  // Where a person (or a curl) starting at the root finds everything else.
  app.get("/", open, async () => ({
    status: "success",
    service: "payment-gateway",
    links: { dashboard: "/dashboard", api_reference: "/docs", openapi: "/openapi.json", graphql: "/graphql", health: "/health", ready: "/ready" },
  }));

  app.get("/health", open, async () => ({ status: "success", service: "payment-gateway", uptime_seconds: Math.round(process.uptime()) }));

  app.get("/ready", open, async (_request, reply) => {
    if (deps.isDraining()) return sendError(reply, new GatewayError("service_unavailable", "Shutting down"));
    try {
      // Reported, not required: while Redis (or part of a cluster) is down each instance limits on its own, and
      // a 503 from every instance at once would take the whole gateway out of its balancer.
      const redisHealth = redis?.health();
      await db.ping();
      unreachableSince = undefined;
      return { status: "success", database: "ok", backend: db.backend, ...(redisHealth && { redis: await redisHealth }) };
    } catch (error) {
      unreachableSince ??= Date.now();
      const database = Date.now() - unreachableSince < FAILOVER_WINDOW_MS ? "failing_over" : "unreachable";
      logger.warn({ err: error, database }, "readiness check failed: database unreachable");
      // The error envelope, plus what the database is doing, for an operator (or a drill) watching it switch.
      const unavailable = new GatewayError("service_unavailable", "Database unreachable");
      return reply.code(503).header("retry-after", String(UNAVAILABLE_RETRY_AFTER_SECONDS)).send({ ...errorEnvelope(unavailable), database });
    }
  });
}
