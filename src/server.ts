import websocket from "@fastify/websocket";
import { randomUUID } from "node:crypto";
import { STATUS_CODES } from "node:http";
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { renderGraphiQL } from "@graphql-yoga/render-graphiql";
import { createYoga, type YogaServerInstance } from "graphql-yoga";
import { createAuthenticator, credentialFrom, type Principal } from "./auth.ts";
import { registerCheckoutRoutes } from "./checkout/routes.ts";
import { registerPaymentLinkRoutes } from "./checkout/payment-link.ts";
import { registerBrandRoutes } from "./modules/brand/routes.ts";
import { registerDashboardRoutes } from "./dashboard/routes.ts";
import type { Config } from "./config.ts";
import { registerCallbackRoutes } from "./modules/callbacks/routes.ts";
import { registerAuthRoutes } from "./modules/users/routes.ts";
import { registerLedgerReportRoutes } from "./modules/ledger/routes.ts";
import { registerTransactionReportRoutes } from "./modules/transactions/report-routes.ts";
import { openDatabase, type Database, type OpenOptions } from "./db/database.ts";
import { GatewayError, UNAVAILABLE_RETRY_AFTER_SECONDS, errorEnvelope, toGatewayError } from "./errors.ts";
import type { GraphQLContext } from "./graphql/context.ts";
import { createOperationAuthorizer } from "./graphql/authorize.ts";
import { graphqlHardening } from "./graphql/hardening.ts";
import { runWithRequestLog, useErrorLog, useRefusalLog, yogaLogging } from "./graphql/logging.ts";
import { maskError } from "./graphql/mask-errors.ts";
import { schema } from "./graphql/schema.ts";
import { SubscriptionFanout } from "./graphql/fanout.ts";
import { graphqlWebSocketHandler } from "./graphql/websocket.ts";
import { LiveConnections } from "./graphql/live-connections.ts";
import { expiryOf } from "./modules/users/tokens.ts";
import { subscriptionReady } from "./graphql/ready.ts";
import { fingerprintKeyFrom, registerIdempotency } from "./idempotency/hooks.ts";
import { createMetrics } from "./metrics/registry.ts";
import { registerMetricsRoutes } from "./metrics/routes.ts";
import { registerOpenApiRoutes } from "./openapi/routes.ts";
import { createIdempotencyStore } from "./idempotency/store.ts";
import { RedisConnections } from "./infra/redis.ts";
import { redactCallbackToken, type Logger } from "./logger.ts";
import { budgetedAuthentication, requestBudgets } from "./rate-limit/hook.ts";
import { chargeOperation, createRateLimiter, type GatewayRateLimiter } from "./rate-limit/limiter.ts";
import { compileRoutes, restRoutePolicy, runOperation, type RestRequest } from "./rest/route-table.ts";
import { createExportSlots } from "./rest/export-slots.ts";
import { refuseDeepJson } from "./rest/json-depth.ts";
import { restRoutes } from "./rest/routes.ts";
import { looksLikeApiKey } from "./security/api-keys.ts";
import { loadOrCreateKeyFile, SecretBox } from "./security/encryption.ts";
import { graphiqlCsp, registerSecurityHeaders } from "./security/headers.ts";
import { enforceRoutePolicies } from "./route-policy.ts";
import { createServices, type Services } from "./services.ts";
import { createForeground } from "./jobs/foreground.ts";
import { serveCliHandoff } from "./cli/handoff.ts";
import { assertSafeText } from "./validation.ts";

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** GraphiQL's first query: how to authenticate, then one that shows who you are. */
const GRAPHIQL_QUERY = `# Authenticate in the Headers tab below, with
#   "X-API-Key": your test key (sk_test_...)
# or "Authorization": "Bearer <access token>"
#   from POST /v1/auth/login (a dashboard user).
# Lost the key? npm run cli -- demo
# Without one: a 401, and no schema docs.
{ viewer { name mode } }
`;

export const BODY_LIMIT_BYTES = 1024 * 1024;

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

/** Fastify's own failures (body parsing, limits) mapped onto the catalogue. */
function fastifyErrorToGateway(error: FastifyError): GatewayError | undefined {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new GatewayError("malformed_json");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new GatewayError("unsupported_media_type");
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new GatewayError("payload_too_large");
  }
  if (error instanceof SyntaxError || (error as { type?: string }).type === "entity.parse.failed") {
    return new GatewayError("malformed_json");
  }
  return undefined;
}

/**
 * Errors Node and Fastify answer before any route runs (malformed or oversized requests) get the same
 * envelope as everything else; the socket is closed afterwards, as Node does.
 */
function clientErrorResponse(error: NodeJS.ErrnoException): string {
  const gatewayError =
    error.code === "HPE_HEADER_OVERFLOW"
      ? new GatewayError("request_header_too_large")
      : new GatewayError("validation_failed", error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? "The request took too long to arrive" : "Malformed HTTP request");
  const body = JSON.stringify(errorEnvelope(gatewayError));
  const status = error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : gatewayError.status;
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`;
}

function sendError(reply: FastifyReply, error: GatewayError) {
  // A 503 is temporary (the database or a dependency is down): say when to come back.
  if (error.status === 503 && !reply.hasHeader("retry-after")) reply.header("retry-after", String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  if (error.retryAfterSeconds !== undefined) reply.header("retry-after", String(error.retryAfterSeconds));
  return reply.code(error.status).type("application/json; charset=utf-8").send(errorEnvelope(error));
}

/**
 * GraphQL over GET carries variables and extensions as JSON in the query string; text that is not a
 * JSON object there is the client's mistake (a 400 in GraphQL's error format), not a server error.
 */
function refuseMalformedGraphqlGet(request: FastifyRequest): string | null {
  if (request.method !== "GET") return null;
  const query = (request.query ?? {}) as Record<string, unknown>;
  for (const name of ["variables", "extensions"]) {
    const value = query[name];
    if (value === undefined || value === "") continue;
    let parsed: unknown;
    try {
      parsed = typeof value === "string" ? JSON.parse(value) : undefined;
    } catch {
      parsed = undefined;
    }
    if (parsed === null || (typeof parsed === "object" && !Array.isArray(parsed))) continue;
    return JSON.stringify({ errors: [{ message: `${name} must be a JSON object`, extensions: { code: "BAD_REQUEST" } }] });
  }
  return null;
}

/** An Accept header without its multipart/* entries: "" when nothing else was listed, undefined when there was none. */
function withoutMultipart(accept: string | undefined): string | undefined {
  if (!accept || !/multipart\//i.test(accept)) return accept;
  return accept
    .split(",")
    .filter((entry) => !/^\s*multipart\//i.test(entry))
    .join(",")
    .trim();
}

function isGraphiqlPageRequest(request: FastifyRequest): boolean {
  return request.method === "GET" && (request.headers.accept ?? "").includes("text/html");
}

export async function createGateway(config: Config, logger: Logger, dbOptions: OpenOptions = {}): Promise<Gateway> {
  const db = await openDatabase(config, logger, { migrate: true, ...dbOptions });
  const encryptionKey = config.encryptionKey ?? loadOrCreateKeyFile(config.dataDir);
  const secrets = new SecretBox(encryptionKey);
  const redis = RedisConnections.fromConfig(config, logger);
  const metrics = createMetrics({ prisma: db.prisma, logger, poolStats: db.poolStats, readStats: db.readStats });
  const foreground = createForeground();
  const services = createServices({ prisma: db.prisma, sql: db.sql, read: db.read, secrets, encryptionKey, config, redis, logger, metrics, foreground });
  if (config.jobs.enabled) services.jobs.start();
  if (config.jobs.enabled) await services.reconciliations.scheduleDaily();
  if (config.jobs.enabled) await services.retention.scheduleHourly();
  if (config.jobs.enabled) await services.transactions.scheduleCheckoutExpiry();
  // The embedded database allows one process: the CLI hands its database commands to this one over DATA_DIR/cli.sock.
  const cliHandoff = db.backend === "pglite" ? await serveCliHandoff(config.dataDir, { prisma: db.prisma, backend: db.backend, merchants: services.merchants, reconciliations: () => services.reconciliations, retention: () => services.retention }, logger) : undefined;
  const routes = compileRoutes(schema, restRoutes);
  const authenticator = createAuthenticator({
    apiKeys: { authenticate: (key) => services.merchants.authenticate(key), looksValid: looksLikeApiKey },
    accessTokens: services.tokens,
    userStates: services.userStates,
  });
  const rateLimiter = config.rateLimit.enabled
    ? await createRateLimiter({ perKeyPerMinute: config.rateLimit.perKeyPerMinute, perIpPerMinute: config.rateLimit.perIpPerMinute, redis, logger, onRefused: metrics.rateLimited })
    : undefined;

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    forceCloseConnections: "idle",
    return503OnClosing: true,
    trustProxy: config.trustProxy,
    // One line per request, written once the merchant is known (onResponse below), not Fastify's two.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: "requestId" }),
    // A caller's (or proxy's) X-Request-Id is kept when it is a plain token, so one id follows a request across services.
    genReqId: (request) => {
      const presented = request.headers["x-request-id"];
      return typeof presented === "string" && /^[A-Za-z0-9._:-]{8,128}$/.test(presented) ? presented : randomUUID();
    },
    // A path Fastify cannot decode, or a parameter over its length limit, answered in the envelope.
    frameworkErrors: (error, _request, reply) =>
      sendError(
        reply,
        error.code === "FST_ERR_MAX_PARAM_LENGTH" ? new GatewayError("uri_too_long") : new GatewayError("validation_failed", "The URL is not valid (bad percent-encoding)"),
      ),
    clientErrorHandler: (error, socket) => {
      if ((error as NodeJS.ErrnoException).code === "ECONNRESET" || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorResponse(error as NodeJS.ErrnoException));
      socket.destroy(error);
    },
  });

  // Aborted first on close: open subscriptions end, so WebSocket and SSE connections close cleanly.
  const shutdown = new AbortController();
  const contextFor = (principal: Principal | null, log: Logger, signal: AbortSignal = shutdown.signal): GraphQLContext => ({
    principal,
    prisma: db.prisma,
    services,
    shutdownSignal: signal,
    log,
  });
  // A user disabled, demoted or given a new password, a key revoked (here or on another instance): its sockets and
  // SSE streams end at once. After a Redis reconnect (changes may have been missed) every connection checks again.
  const live = new LiveConnections();
  services.userStates.onChanged((userId) => (userId === "all" ? live.recheckAll() : live.end(`user:${userId}`, "Forbidden: the user was disabled or changed")));
  services.keyCache.onRevoked((keyId) => live.end(`key:${keyId}`, "Forbidden: the API key was revoked"));
  /**
   * An SSE subscription's signal: ends with the server, or when its principal changes (registered in `live` until
   * the response closes). Other requests share the server's signal.
   */
  const streamSignalFor = (req: FastifyRequest | undefined, reply: FastifyReply | undefined, principal: Principal | null): AbortSignal => {
    if (!req || !reply || !principal || !(req.headers.accept ?? "").includes("text/event-stream")) return shutdown.signal;
    const ended = new AbortController();
    const unregister = live.add(principal, {
      end: () => ended.abort(),
      recheck: () =>
        void authenticator.authenticate(credentialFrom(req.headers["x-api-key"] as string | undefined, req.headers.authorization, true)).then(
          (now) => now || ended.abort(),
          () => ended.abort(),
        ),
    });
    reply.raw.once("close", unregister);
    return AbortSignal.any([shutdown.signal, ended.signal]);
  };
  // A request holding an Idempotency-Key carries its claim on its principal to the services (src/idempotency/scope.ts).
  const callerOf = (request: FastifyRequest): Principal | null => {
    const claim = request.principal && idempotency.scopeOf(request);
    return claim ? { ...request.principal!, idempotency: claim } : request.principal;
  };

  const yoga: YogaServerInstance<{ req: FastifyRequest; reply: FastifyReply }, GraphQLContext> = createYoga({
    schema,
    graphqlEndpoint: "/graphql",
    // Opens on how to authenticate (headers tab shown, the key's header ready to fill) rather than on a bare 401.
    graphiql: config.nodeEnv !== "production" && {
      title: "Payment gateway · GraphiQL",
      defaultQuery: GRAPHIQL_QUERY,
      headers: JSON.stringify({ "X-API-Key": "" }, null, 2),
      defaultEditorToolsVisibility: "headers",
    },
    // GraphiQL's scripts and styles from the package, inline: no CDN, so it works on a machine with no internet.
    renderGraphiQL,
    landingPage: false,
    // No origin is trusted by default (yoga's default reflects any Origin), and then no CORS work runs at all. Listed
    // origins get a header naming themselves, without cookies (every credential here is a header a page sends on
    // purpose); any other gets none (a list would answer it "null", which a sandboxed page's own Origin matches).
    cors: config.corsOrigins.length
      ? (request) => {
          const origin = request.headers.get("origin");
          if (!origin || !config.corsOrigins.includes(origin)) return false;
          return { origin: [origin], credentials: false, methods: ["GET", "POST"], allowedHeaders: ["content-type", "x-api-key", "authorization", "idempotency-key"] };
        }
      : false,
    maskedErrors: { maskError },
    plugins: [...graphqlHardening(config.graphql), subscriptionReady(), useRefusalLog(), useErrorLog()],
    // Client mistakes at info, typed error results at debug, only the unexpected at error; with the request id.
    logging: yogaLogging(logger),
    // Over HTTP the principal comes from the request's key; over WebSocket from connection_init.
    context: (initial) => {
      const { principal, req, reply } = initial as { principal?: Principal; req?: FastifyRequest; reply?: FastifyReply };
      if (principal) return contextFor(principal, (req?.log as Logger | undefined) ?? logger);
      const caller = req ? callerOf(req) : null;
      return contextFor(caller, (req?.log as Logger | undefined) ?? logger, streamSignalFor(req, reply, caller));
    },
  });

  app.decorateRequest("principal", null);
  // Fastify parses text/plain bodies by default; the API takes JSON only, so they get the documented 415.
  app.removeContentTypeParser("text/plain");
  // A JSON body nested deeper than MAX_JSON_DEPTH is a 400 before it is parsed (src/rest/json-depth.ts).
  refuseDeepJson(app);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = error instanceof GatewayError ? error : (fastifyErrorToGateway(error) ?? toGatewayError(error));
    if (known.code === "internal_error") request.log.error({ err: error }, "unhandled error");
    else if (known.code === "service_unavailable") request.log.warn({ err: error }, "database unavailable");
    return sendError(reply, known);
  });

  app.setNotFoundHandler((_request, reply) => sendError(reply, new GatewayError("route_not_found")));

  let draining = false;
  app.addHook("onRequest", async (request, reply) => {
    foreground.requestArrived();
    reply.header("x-request-id", request.id);
    // While draining, no connection is kept for another request: the client (or balancer) opens a new one elsewhere.
    if (draining) reply.header("connection", "close");
  });
  registerSecurityHeaders(app);
  const logRequests = logger.isLevelEnabled("info");
  // The request line: who (merchant, mode, user), what (route), how it went. Tokens in callback paths are redacted.
  app.addHook("onResponse", async (request, reply) => {
    metrics.observeRequest(request.routeOptions.url, request.method, reply.statusCode, reply.elapsedTime / 1000);
    if (!logRequests) return; // LOG_LEVEL=warn or silent: not even the line's object
    const principal = request.principal;
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url ?? null,
        url: redactCallbackToken(request.url),
        statusCode: reply.statusCode,
        responseTimeMs: Math.round(reply.elapsedTime * 10) / 10,
        merchantId: principal?.merchantId ?? null,
        mode: principal?.mode ?? null,
        ...(principal?.userId ? { userId: principal.userId } : {}),
      },
      "request completed",
    );
  });

  // Every route declares who may call it and whose budget it spends (src/route-policy.ts): one without is
  // refused at startup. Each gets the one onRequest hook its policy needs (the rate limit, then the
  // credential), before idempotency and any other work; a 404 gets the policy of its URL's family.
  enforceRoutePolicies(app, { authenticator, budgets: requestBudgets(rateLimiter), refuse: sendError });

  const restDocuments = new Map(routes.map((route) => [`${route.method} ${route.path}`, route.document]));
  const idempotency = registerIdempotency(app, createIdempotencyStore(db.prisma, { leaseMs: config.idempotencyLeaseMs, secrets }), {
    logger,
    graphqlPath: "/graphql",
    graphqlMaxTokens: config.graphql.maxTokens,
    fingerprintKey: fingerprintKeyFrom(encryptionKey),
    restDocument: (request) => restDocuments.get(`${request.method} ${request.routeOptions.url}`),
    permits: createOperationAuthorizer(schema),
  });

  const open = { config: { auth: "none", rateLimit: "none" } } as const;

  // Where a person (or a curl) starting at the root finds everything else.
  app.get("/", open, async () => ({
    status: "success",
    service: "payment-gateway",
    links: { dashboard: "/dashboard", api_reference: "/docs", openapi: "/openapi.json", graphql: "/graphql", health: "/health", ready: "/ready" },
  }));

  app.get("/health", open, async () => ({ status: "success", service: "payment-gateway", uptime_seconds: Math.round(process.uptime()) }));

  app.get("/ready", open, async (_request, reply) => {
    if (draining) return sendError(reply, new GatewayError("service_unavailable", "Shutting down"));
    try {
      // Reported, not required: while Redis (or part of a cluster) is down each instance limits on its own, and
      // a 503 from every instance at once would take the whole gateway out of its balancer.
      const redisHealth = redis?.health();
      await db.ping();
      return { status: "success", database: "ok", backend: db.backend, ...(redisHealth && { redis: await redisHealth }) };
    } catch (error) {
      logger.warn({ err: error }, "readiness check failed: database unreachable");
      return sendError(reply, new GatewayError("service_unavailable", "Database unreachable"));
    }
  });

  await app.register(websocket, { options: { maxPayload: BODY_LIMIT_BYTES } });

  const handleGraphql = async (req: FastifyRequest, reply: FastifyReply) => {
    const refused = refuseMalformedGraphqlGet(req);
    if (refused) return reply.code(400).type("application/json; charset=utf-8").send(refused);
    // GraphQL answers JSON, or SSE for subscriptions: yoga's multipart/mixed (incremental delivery) is not
    // offered, so its errors never come back in a format clients of this API do not read.
    const accept = withoutMultipart(req.headers.accept);
    if (accept === "") return sendError(reply, new GatewayError("not_acceptable"));
    if (accept !== undefined) req.headers.accept = accept;
    const response = await runWithRequestLog(req.log as Logger, () => yoga.handleNodeRequestAndResponse(req, reply, { req, reply }));
    // yoga answers an Accept it cannot serve with an empty 406; say why, in the envelope.
    if (response.status === 406) return sendError(reply, new GatewayError("not_acceptable"));
    response.headers.forEach((value, key) => {
      reply.header(key, value);
    });
    reply.status(response.status);
    const contentType = response.headers.get("content-type") ?? "";
    if (contentType.startsWith("text/event-stream")) metrics.countSseStream(reply.raw);
    if (contentType.startsWith("text/html")) {
      // GraphiQL: its inline scripts are allowed by hash, nothing else inline.
      const html = await response.text();
      return reply.header("content-security-policy", graphiqlCsp(html)).send(html);
    }
    reply.send(response.body);
    return reply;
  };

  // GET serves GraphiQL, GraphQL over HTTP and SSE, and the graphql-ws upgrade on the same path.
  const subscriptions = new SubscriptionFanout();
  // GraphiQL's page (outside production) opens without a credential; the budget is spent all the same.
  const graphqlPolicy = { auth: "api-key-or-user", rateLimit: "caller" } as const;
  app.route({
    url: "/graphql",
    method: "GET",
    config: { ...graphqlPolicy, ...(config.nodeEnv !== "production" ? { authExemptWhen: isGraphiqlPageRequest } : {}) },
    handler: handleGraphql,
    wsHandler: metrics.countSockets(graphqlWebSocketHandler({
      yoga,
      authenticate: budgetedAuthentication(rateLimiter, authenticator),
      chargeOperation: (budget) => chargeOperation(rateLimiter, budget),
      reauthenticate: (credential) => authenticator.authenticate(credential),
      expiresAt: (credential) => (credential && "bearer" in credential ? expiryOf(credential.bearer) : undefined),
      live,
      keepAliveMs: config.graphql.wsKeepAliveMs,
      fanout: subscriptions,
    })),
  });
  app.route({ url: "/graphql", method: "POST", config: graphqlPolicy, handler: handleGraphql });
  // A CORS preflight carries no credential (browsers never send one): answered by yoga's CORS policy, spending the IP's budget.
  app.route({ url: "/graphql", method: "OPTIONS", config: { auth: "none", rateLimit: "caller" }, handler: handleGraphql });

  registerCheckoutRoutes(app, services);
  registerPaymentLinkRoutes(app, services);
  registerBrandRoutes(app, services);
  registerCallbackRoutes(app, services);
  registerAuthRoutes(app, services);
  // Full CSV exports at once, per merchant and per instance (EXPORTS_PER_MERCHANT, EXPORTS_PER_INSTANCE).
  const exportSlots = createExportSlots(config.exports);
  registerLedgerReportRoutes(app, services, exportSlots);
  registerTransactionReportRoutes(app, services, exportSlots);
  registerOpenApiRoutes(app);
  metrics.attach({ fanout: () => subscriptions.stats() });
  const metricsListener = await registerMetricsRoutes(app, metrics, config, logger);
  await registerDashboardRoutes(app);

  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.path,
      config: restRoutePolicy(route),
      handler: async (request, reply) => {
        const restRequest: RestRequest = {
          body: request.body && typeof request.body === "object" && !Array.isArray(request.body) ? (request.body as Record<string, unknown>) : {},
          query: (request.query ?? {}) as Record<string, unknown>,
          params: (request.params ?? {}) as Record<string, string>,
        };
        assertSafeText(restRequest);
        const data = await runWithRequestLog(request.log as Logger, () =>
          runOperation(schema, route, route.variables(restRequest), contextFor(callerOf(request), request.log as Logger)),
        );
        const { statusCode = 200, body } = route.respond(data, restRequest);
        reply.code(statusCode).type("application/json; charset=utf-8");
        return reply.send(typeof body === "string" ? body : JSON.stringify(body));
      },
    });
  }

  let closing: Promise<void> | undefined;
  let jobsStopped: Promise<void> | undefined;
  return {
    app,
    db,
    services,
    config,
    redis,
    rateLimiter,
    subscriptions,
    drain(options = {}) {
      draining = true;
      jobsStopped ??= services.jobs.stop({ releaseAt: options.releaseJobsAt });
    },
    close() {
      closing ??= (async () => {
        // 1001 Going Away before the subscriptions end: clients see a dropped connection (and reconnect and
        // resubscribe, through the balancer to another instance), not subscriptions that completed.
        for (const socket of app.websocketServer?.clients ?? []) socket.close(1001, "server shutting down");
        shutdown.abort();
        await app.close();
        await cliHandoff?.close();
        await metricsListener.close();
        await (jobsStopped ?? services.jobs.stop());
        // Provider calls recorded by the last requests and jobs are written before the database closes.
        await services.providerCalls.flush();
        services.momo.close();
        await redis?.close();
        await db.close();
      })();
      return closing;
    },
  };
}
