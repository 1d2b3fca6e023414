import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import type { Config } from "../config.ts";
import { GatewayError, errorEnvelope } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { GatewayMetrics } from "./registry.ts";

const JSON_TYPE = "application/json; charset=utf-8";

/** Constant-time comparison of the presented bearer token (hashed first, so neither length nor prefix leaks). */
function tokenMatches(authorization: string | undefined, token: string): boolean {
  // The scheme is case-insensitive (RFC 9110 11.1); one or more spaces before the token.
  const presented = /^bearer +(\S+) *$/i.exec(authorization ?? "")?.[1] ?? "";
  const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();
  return timingSafeEqual(digest(presented), digest(token));
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const envelope = (error: GatewayError, headers: Record<string, string> = {}): Answer => ({
  status: error.status,
  headers: { "content-type": JSON_TYPE, ...headers },
  body: JSON.stringify(errorEnvelope(error)),
});

/**
 * GET /metrics in Prometheus text format. Where it is served:
 * - METRICS_PORT set: on a listener of its own on that port (bound to HOST), and not on the API port;
 * - otherwise on the API port: behind METRICS_TOKEN when set; open in development and test; and, in
 *   production without a token, not at all (a 404): volumes, error rates and merchants' activity are
 *   not for the internet, and an operator who wants them says how they are protected.
 * METRICS_TOKEN applies on either port. No API key and no rate limit on the API port either: its own
 * token, when set, is all it asks for.
 */
export async function registerMetricsRoutes(
  app: FastifyInstance,
  metrics: GatewayMetrics,
  config: Pick<Config, "metrics" | "nodeEnv" | "host">,
  logger: Logger,
): Promise<{ close(): Promise<void> }> {
  const { token, port } = config.metrics;

  async function answer(authorization: string | undefined): Promise<Answer> {
    if (token && !tokenMatches(authorization, token)) {
      return envelope(new GatewayError("invalid_token", "A valid metrics bearer token is required"), { "www-authenticate": 'Bearer realm="metrics"' });
    }
    return { status: 200, headers: { "content-type": metrics.registry.contentType }, body: await metrics.registry.metrics() };
  }

  if (port === undefined) {
    if (token || config.nodeEnv !== "production") {
      app.get("/metrics", { config: { auth: "none", rateLimit: "none" } }, async (request, reply) => {
        const { status, headers, body } = await answer(request.headers.authorization);
        return reply.code(status).headers({ ...headers, "cache-control": "no-store" }).send(body);
      });
    }
    return { close: async () => {} };
  }

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? "/").split("?")[0];
    const reply = ({ status, headers, body }: Answer) => response.writeHead(status, { ...headers, "cache-control": "no-store" }).end(body);
    if (path !== "/metrics") return reply(envelope(new GatewayError("route_not_found")));
    if (request.method !== "GET") return reply(envelope(new GatewayError("method_not_allowed"), { allow: "GET" }));
    answer(request.headers.authorization).then(reply, (error: unknown) => {
      logger.error({ err: error }, "metrics collection failed");
      reply(envelope(new GatewayError("internal_error")));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, config.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (error) => logger.error({ err: error }, "metrics listener failed"));
  logger.info({ port, host: config.host }, "metrics listening");
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Prometheus keeps its scrape connection alive: without this close() would wait for it.
        server.closeAllConnections();
      }),
  };
}
