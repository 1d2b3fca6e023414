import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { createYoga, type YogaServerInstance } from "graphql-yoga";
import type { Principal } from "./auth.ts";
import type { Config } from "./config.ts";
import { openDatabase, type Database, type OpenOptions } from "./db/database.ts";
import { GatewayError, errorEnvelope, toGatewayError } from "./errors.ts";
import type { GraphQLContext } from "./graphql/context.ts";
import { schema } from "./graphql/schema.ts";
import type { Logger } from "./logger.ts";
import { compileRoutes, runOperation, type RestRequest } from "./rest/route-table.ts";
import { restRoutes } from "./rest/routes.ts";
import { loadOrCreateKeyFile, SecretBox } from "./security/encryption.ts";
import { createServices, type Services } from "./services.ts";

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export const BODY_LIMIT_BYTES = 1024 * 1024;

export interface Gateway {
  app: FastifyInstance;
  db: Database;
  services: Services;
  config: Config;
  /** Stops accepting connections, lets in-flight requests finish, then closes the database. */
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

function sendError(reply: FastifyReply, error: GatewayError) {
  return reply.code(error.status).type("application/json; charset=utf-8").send(errorEnvelope(error));
}

function isGraphiqlPageRequest(request: FastifyRequest): boolean {
  return request.method === "GET" && (request.headers.accept ?? "").includes("text/html");
}

export async function createGateway(config: Config, logger: Logger, dbOptions: OpenOptions = {}): Promise<Gateway> {
  const db = await openDatabase(config, logger, { migrate: true, ...dbOptions });
  const secrets = new SecretBox(config.encryptionKey ?? loadOrCreateKeyFile(config.dataDir));
  const services = createServices({ prisma: db.prisma, secrets });
  const routes = compileRoutes(schema, restRoutes);

  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    forceCloseConnections: "idle",
    return503OnClosing: true,
  });

  const contextFor = (principal: Principal | null): GraphQLContext => ({ principal, prisma: db.prisma, services });

  const yoga: YogaServerInstance<{ req: FastifyRequest; reply: FastifyReply }, GraphQLContext> = createYoga({
    schema,
    graphqlEndpoint: "/graphql",
    graphiql: config.nodeEnv !== "production",
    landingPage: false,
    logging: {
      debug: (...args) => logger.debug(args),
      info: (...args) => logger.info(args),
      warn: (...args) => logger.warn(args),
      error: (...args) => logger.error(args),
    },
    context: ({ req }) => contextFor(req.principal),
  });

  app.decorateRequest("principal", null);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = error instanceof GatewayError ? error : fastifyErrorToGateway(error);
    if (known) return sendError(reply, known);
    request.log.error({ err: error }, "unhandled error");
    return sendError(reply, toGatewayError(error));
  });

  app.setNotFoundHandler((_request, reply) => sendError(reply, new GatewayError("route_not_found")));

  /** Every /api, /v1 and /graphql request needs a valid key, checked before any other work. */
  app.addHook("onRequest", async (request, reply) => {
    const path = request.url;
    const guarded = path.startsWith("/api/") || path.startsWith("/v1/") || path === "/graphql" || path.startsWith("/graphql?");
    if (!guarded) return;
    if (path.startsWith("/graphql") && isGraphiqlPageRequest(request) && config.nodeEnv !== "production") return;
    const header = request.headers["x-api-key"];
    const principal = await services.merchants.authenticate(Array.isArray(header) ? header[0] : header);
    if (!principal) return sendError(reply, new GatewayError("invalid_api_key"));
    request.principal = principal;
  });

  app.get("/health", async () => ({ status: "success", service: "payment-gateway", uptime_seconds: Math.round(process.uptime()) }));

  app.get("/ready", async (_request, reply) => {
    try {
      await db.ping();
      return { status: "success", database: "ok", backend: db.backend };
    } catch (error) {
      logger.warn({ err: error }, "readiness check failed: database unreachable");
      return sendError(reply, new GatewayError("service_unavailable", "Database unreachable"));
    }
  });

  app.route({
    url: "/graphql",
    method: ["GET", "POST", "OPTIONS"],
    handler: async (req, reply) => {
      const response = await yoga.handleNodeRequestAndResponse(req, reply, { req, reply });
      response.headers.forEach((value, key) => {
        reply.header(key, value);
      });
      reply.status(response.status);
      reply.send(response.body);
      return reply;
    },
  });

  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.path,
      handler: async (request, reply) => {
        const restRequest: RestRequest = {
          body: request.body && typeof request.body === "object" && !Array.isArray(request.body) ? (request.body as Record<string, unknown>) : {},
          query: (request.query ?? {}) as Record<string, unknown>,
          params: (request.params ?? {}) as Record<string, string>,
        };
        const data = await runOperation(schema, route, route.variables(restRequest), contextFor(request.principal));
        const { statusCode = 200, body } = route.respond(data, restRequest);
        reply.code(statusCode).type("application/json; charset=utf-8");
        return reply.send(typeof body === "string" ? body : JSON.stringify(body));
      },
    });
  }

  let closing: Promise<void> | undefined;
  return {
    app,
    db,
    services,
    config,
    close() {
      closing ??= (async () => {
        await app.close();
        await db.close();
      })();
      return closing;
    },
  };
}
