import websocket from "@fastify/websocket";
import type { FastifyInstance } from "fastify";
import { createAuthenticator } from "./auth.ts";
import { createLifecycle } from "./app/lifecycle.ts";
import { mountGraphql } from "./app/graphql-endpoint.ts";
import { BODY_LIMIT_BYTES, createHttpApp, sendError } from "./app/http-app.ts";
import { buildOpenApiDocument } from "./app/openapi.ts";
import { registerProbes } from "./app/probes.ts";
import { createRequestContexts } from "./app/request-context.ts";
import { mountRestRoutes } from "./app/rest-endpoint.ts";
import { restRoutes } from "./app/rest-routes.ts";
import { schema } from "./app/schema.ts";
import { registerCheckoutRoutes } from "./checkout/routes.ts";
import { registerReceiptRoutes } from "./checkout/receipt.ts";
import { registerPaymentLinkRoutes } from "./checkout/payment-link.ts";
import { serveCliHandoff } from "./cli/handoff.ts";
import type { Config } from "./config.ts";
import { registerDashboardRoutes } from "./dashboard/routes.ts";
import { openDatabase, type Database, type OpenOptions } from "./db/database.ts";
import { createOperationAuthorizer } from "./graphql/authorize.ts";
import { SubscriptionFanout } from "./graphql/fanout.ts";
import { fingerprintKeyFrom, registerIdempotency } from "./idempotency/hooks.ts";
import { createIdempotencyStore } from "./idempotency/store.ts";
import { RedisConnections } from "./infra/redis.ts";
import { createForeground } from "./jobs/foreground.ts";
import type { Logger } from "./logger.ts";
import { createMetrics } from "./metrics/registry.ts";
import { registerMetricsRoutes } from "./metrics/routes.ts";
import { registerBrandRoutes } from "./modules/brand/routes.ts";
import { registerCallbackRoutes } from "./modules/callbacks/routes.ts";
import { registerLedgerReportRoutes } from "./modules/ledger/routes.ts";
import { registerTransactionReportRoutes } from "./modules/reports/routes.ts";
import { registerAuthRoutes } from "./modules/users/routes.ts";
import { registerOpenApiRoutes } from "./openapi/routes.ts";
import { requestBudgets } from "./rate-limit/hook.ts";
import { createRateLimiter, type GatewayRateLimiter } from "./rate-limit/limiter.ts";
import { compileRoutes } from "./rest/route-table.ts";
import { createExportSlots } from "./rest/export-slots.ts";
import { enforceRoutePolicies } from "./route-policy.ts";
import { looksLikeApiKey } from "./security/api-keys.ts";
import { loadOrCreateKeyFile, SecretBox } from "./security/encryption.ts";
import { createServices, type Services } from "./services.ts";

export interface Gateway {
  app: FastifyInstance;
  db: Database;
  services: Services;
  config: Config;
  /** Shared Redis connections (one client per purpose), when REDIS_URL is set. */
  redis: RedisConnections | undefined;
  /** Request budgets (undefined when disabled); a WebSocket subscribe calls chargeOperation() from rate-limit/limiter.ts. */
  rateLimiter: GatewayRateLimiter | undefined;
  /** Identical graphql-ws subscriptions sharing one execution per event; stats() for metrics. */
  subscriptions: SubscriptionFanout;
  /**
   * SIGTERM's first step: /ready answers 503 (a balancer stops sending), every response closes its connection,
   * and no more jobs are claimed; jobs still running at `releaseJobsAt` (epoch ms) go back to the queue.
   */
  drain(options?: { releaseJobsAt?: number }): void;
  /** Closes WebSockets (1001), stops accepting connections, lets in-flight requests finish, then closes the database. */
  close(): Promise<void>;
}

/**
 * The composition root: the database, the services and their jobs, then one HTTP app with every transport on it
 * (GraphQL, the REST table, the payer's pages, provider callbacks, the dashboard). Its steps live in src/app/.
 */
export async function createGateway(config: Config, logger: Logger, dbOptions: OpenOptions = {}): Promise<Gateway> {
  const db = await openDatabase(config, logger, { migrate: true, ...dbOptions });
  const encryptionKey = config.encryptionKey ?? loadOrCreateKeyFile(config.dataDir);
  const secrets = new SecretBox(encryptionKey);
  const redis = RedisConnections.fromConfig(config, logger);
  const metrics = createMetrics({ prisma: db.prisma, logger, poolStats: db.poolStats, readStats: db.readStats, backupStanza: config.metrics.backupStanza });
  const foreground = createForeground();
  const services = createServices({ prisma: db.prisma, sql: db.sql, read: db.read, secrets, encryptionKey, config, redis, logger, metrics, foreground });
  if (config.jobs.enabled) services.jobs.start();
  if (config.jobs.enabled) await services.reconciliations.scheduleDaily();
  if (config.jobs.enabled) await services.retention.scheduleHourly();
  if (config.jobs.enabled) await services.transactions.scheduleCheckoutExpiry();
  if (config.jobs.enabled) await services.mail.scheduleDailySummaries();
  // The embedded database allows one process: the CLI hands its database commands to this one over DATA_DIR/cli.sock.
  const cliHandoff = db.backend === "pglite" ? await serveCliHandoff(config.dataDir, { prisma: db.prisma, backend: db.backend, merchants: services.merchants, reconciliations: () => services.reconciliations, retention: () => services.retention, publicBaseUrl: config.publicBaseUrl }, logger) : undefined;
  const routes = compileRoutes(schema, restRoutes);
  const authenticator = createAuthenticator({
    apiKeys: { authenticate: (key) => services.merchants.authenticate(key), looksValid: looksLikeApiKey },
    accessTokens: services.tokens,
    userStates: services.userStates,
  });
  const rateLimiter = config.rateLimit.enabled
    ? await createRateLimiter({ perKeyPerMinute: config.rateLimit.perKeyPerMinute, perIpPerMinute: config.rateLimit.perIpPerMinute, redis, logger, onRefused: metrics.rateLimited })
    : undefined;

  const lifecycle = createLifecycle();
  const app = createHttpApp(config, logger, { metrics, foreground, isDraining: lifecycle.isDraining });

  // Every route declares who may call it and whose budget it spends (src/route-policy.ts): one without is
  // refused at startup. Each gets the one onRequest hook its policy needs (the rate limit, then the
  // credential), before idempotency and any other work; a 404 gets the policy of its URL's family.
  enforceRoutePolicies(app, { authenticator, budgets: requestBudgets(rateLimiter), refuse: sendError });

  const restDocuments = new Map(routes.map((route) => [`${route.method} ${route.path}`, route.document]));
  const idempotency = registerIdempotency(app, createIdempotencyStore(db.prisma, db.sql, { leaseMs: config.idempotencyLeaseMs, secrets }), {
    logger,
    graphqlPath: "/graphql",
    graphqlMaxTokens: config.graphql.maxTokens,
    fingerprintKey: fingerprintKeyFrom(encryptionKey),
    restDocument: (request) => restDocuments.get(`${request.method} ${request.routeOptions.url}`),
    permits: createOperationAuthorizer(schema),
  });
  const contexts = createRequestContexts({ prisma: db.prisma, services, authenticator, idempotency, shutdownSignal: lifecycle.shutdownSignal, logger });

  registerProbes(app, { db, redis, logger, isDraining: lifecycle.isDraining });
  await app.register(websocket, { options: { maxPayload: BODY_LIMIT_BYTES } });
  const subscriptions = new SubscriptionFanout();
  mountGraphql(app, { config, logger, schema, contexts, authenticator, rateLimiter, metrics, subscriptions });

  registerCheckoutRoutes(app, services);
  registerPaymentLinkRoutes(app, services);
  registerBrandRoutes(app, services);
  registerReceiptRoutes(app, services);
  registerCallbackRoutes(app, services);
  registerAuthRoutes(app, services);
  // Full CSV exports at once, per merchant and per instance (EXPORTS_PER_MERCHANT, EXPORTS_PER_INSTANCE).
  const exportSlots = createExportSlots(config.exports);
  registerLedgerReportRoutes(app, services, exportSlots);
  registerTransactionReportRoutes(app, services, exportSlots);
  registerOpenApiRoutes(app, buildOpenApiDocument());
  metrics.attach({ fanout: () => subscriptions.stats() });
  const metricsListener = await registerMetricsRoutes(app, metrics, config, logger);
  await registerDashboardRoutes(app);
  mountRestRoutes(app, routes, schema, contexts);

  return {
    app,
    db,
    services,
    config,
    redis,
    rateLimiter,
    subscriptions,
    drain: (options = {}) => lifecycle.drain(services, options.releaseJobsAt),
    close: () => lifecycle.close({ app, services, listeners: [cliHandoff, metricsListener], redis, db }),
  };
}
