import { randomUUID } from "node:crypto";
import { STATUS_CODES } from "node:http";
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from "fastify";
import type { Principal } from "../auth.ts";
import type { Config } from "../config.ts";
import { GatewayError, UNAVAILABLE_RETRY_AFTER_SECONDS, errorEnvelope, toGatewayError } from "../errors.ts";
import type { Foreground } from "../jobs/foreground.ts";
import { redactCallbackToken, type Logger } from "../logger.ts";
import type { GatewayMetrics } from "../metrics/registry.ts";
import { refuseDeepJson } from "../rest/json-depth.ts";
import { registerSecurityHeaders } from "../security/headers.ts";

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export const BODY_LIMIT_BYTES = 1024 * 1024;

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

/** A catalogue error in the envelope, with its status (and Retry-After when it has one). */
export function sendError(reply: FastifyReply, error: GatewayError) {
  // A 503 is temporary (the database or a dependency is down): say when to come back.
  if (error.status === 503 && !reply.hasHeader("retry-after")) reply.header("retry-after", String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  if (error.retryAfterSeconds !== undefined) reply.header("retry-after", String(error.retryAfterSeconds));
  return reply.code(error.status).type("application/json; charset=utf-8").send(errorEnvelope(error));
}

/**
 * The Fastify instance every transport mounts on, with what holds for every request: body and parameter limits,
 * JSON only (not too deep), request ids, every failure in the error envelope, the security headers, and one log
 * line (and metric) per request. While `isDraining()`, each answer closes its connection.
 */
export function createHttpApp(
  config: Pick<Config, "trustProxy">,
  logger: Logger,
  deps: { metrics: GatewayMetrics; foreground: Foreground; isDraining: () => boolean },
): FastifyInstance {
  const { metrics, foreground, isDraining } = deps;
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

  app.addHook("onRequest", async (request, reply) => {
    foreground.requestArrived();
    reply.header("x-request-id", request.id);
    // While draining, no connection is kept for another request: the client (or balancer) opens a new one elsewhere.
    if (isDraining()) reply.header("connection", "close");
  });
  registerSecurityHeaders(app);
  const logRequests = logger.isLevelEnabled("info");
  // The request line's fields are the gateway's own scalars (the callback token cut from the URL below), which no
  // redact path can match, so it is written without pino's redaction: with the wildcard paths (`*.config`) every
  // field of a line goes through a redactor, which cost verify about 10 % of its throughput at LOG_LEVEL=info.
  const requestLines = logger.child({}, { redact: { paths: [] } });
  // The request line: who (merchant, mode, user), what (route), how it went. Tokens in callback paths are redacted.
  app.addHook("onResponse", async (request, reply) => {
    metrics.observeRequest(request.routeOptions.url, request.method, reply.statusCode, reply.elapsedTime / 1000);
    if (!logRequests) return; // LOG_LEVEL=warn or silent: not even the line's object
    const principal = request.principal;
    requestLines.info(
      {
        requestId: request.id,
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
  return app;
}
