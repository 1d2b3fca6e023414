import { timingSafeEqual, createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { FastifyInstance } from "fastify";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { GatewayMetrics } from "./registry.ts";

const ENVELOPE = { "content-type": "application/json; charset=utf-8" };

/** Constant-time comparison of the presented bearer token (hashes first, so lengths do not leak). */
function tokenMatches(header: string | undefined, token: string): boolean {
  const presented = header?.startsWith("Bearer ") ? header.slice(7) : "";
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(presented), digest(token));
}

/**
 * GET /metrics in Prometheus text. Where it is served: on METRICS_PORT, a listener of its own (and not
 * on the API port), when set; otherwise on the API port, behind METRICS_TOKEN when set, open in
 * development and test, and not at all in production without a token (metrics show volumes and
 * merchants' activity, which is not for the internet).
 */
export async function registerMetricsRoutes(
  app: FastifyInstance,
  metrics: GatewayMetrics,
  config: Pick<Config, "metrics" | "nodeEnv" | "host">,
  logger: Logger,
): Promise<{ close(): Promise<void> }> {
  const { token, port } = config.metrics;
  const answer = async (authorization: string | undefined): Promise<{ status: number; type: string; body: string }> => {
    if (token && !tokenMatches(authorization, token)) {
      return { status: 401, type: ENVELOPE["content-type"], body: JSON.stringify({ status: "error", message: "A valid metrics bearer token is required", code: "invalid_token" }) };
    }
    return { status: 200, type: metrics.registry.contentType, body: await metrics.registry.metrics() };
  };

  if (port === undefined) {
    if (token || config.nodeEnv !== "production") {
      app.get("/metrics", async (request, reply) => {
        const { status, type, body } = await answer(request.headers.authorization);
        return reply.code(status).header("cache-control", "no-store").type(type).send(body);
      });
    }
    return { close: async () => {} };
  }

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" || path !== "/metrics") {
      response.writeHead(404, ENVELOPE).end(JSON.stringify({ status: "error", message: "Not found", code: "route_not_found" }));
      return;
    }
    answer(request.headers.authorization).then(
      ({ status, type, body }) => response.writeHead(status, { "content-type": type, "cache-control": "no-store" }).end(body),
      (error: unknown) => {
        logger.error({ err: error }, "metrics collection failed");
        response.writeHead(500, ENVELOPE).end(JSON.stringify({ status: "error", message: "Metrics unavailable", code: "internal_error" }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, config.host, () => resolve());
  });
  logger.info({ port, host: config.host }, "metrics listening");
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
