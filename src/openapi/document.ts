import { errorCatalogue } from "../errors.ts";
import { envelope, errorEnvelope } from "./schemas.ts";
import type { DocumentedRoute } from "./types.ts";

/** Fastify's /verify/:reference as OpenAPI's /verify/{reference}. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, "{$1}");

/** Error statuses every operation can answer (bad input, credentials, role, limits, an outage), in the envelope. */
const COMMON_ERRORS = [400, 401, 403, 413, 415, 429, 503];

function errorTable(): string {
  const rows = Object.entries(errorCatalogue).map(([code, { status, message }]) => `| \`${code}\` | ${status} | ${message} |`);
  return ["| code | HTTP status | default message |", "|---|---:|---|", ...rows].join("\n");
}

function operation(route: DocumentedRoute) {
  const { doc } = route;
  const isV1 = route.path.startsWith("/v1/");
  const isAuth = route.path.startsWith("/v1/auth/");
  const parameters: object[] = [];
  for (const name of route.path.match(/:([A-Za-z_]+)/g) ?? []) {
    parameters.push({ name: name.slice(1), in: "path", required: true, schema: { type: "string", maxLength: 200 } });
  }
  for (const [name, param] of Object.entries(doc.query ?? {})) {
    parameters.push({ name, in: "query", required: false, description: param.description, schema: param.schema });
  }
  if (route.method === "POST" && !isAuth) parameters.push({ $ref: "#/components/parameters/IdempotencyKey" });

  const responses: Record<string, object> = {
    [String(doc.status ?? 200)]: {
      description: doc.responseDescription ?? "Success",
      headers: isAuth ? {} : { "X-RateLimit-Limit": { $ref: "#/components/headers/RateLimitLimit" }, "X-RateLimit-Remaining": { $ref: "#/components/headers/RateLimitRemaining" }, "X-RateLimit-Reset": { $ref: "#/components/headers/RateLimitReset" } },
      content: { [doc.contentType ?? "application/json"]: { schema: doc.response } },
    },
  };
  for (const status of [...COMMON_ERRORS, ...(doc.errors ?? [])].sort()) {
    responses[String(status)] =
      status === 429
        ? { $ref: "#/components/responses/RateLimited" }
        : { description: `Error (${status}): see the error-code table`, content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
  }
  responses.default = { description: "Any other error, in the same envelope", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };

  return {
    operationId: doc.operationId,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    security: isAuth ? [] : isV1 ? [{ ApiKey: [] }, { Bearer: [] }] : [{ ApiKey: [] }],
    ...(parameters.length ? { parameters } : {}),
    ...(doc.body ? { requestBody: { required: true, content: { [doc.bodyContentType ?? "application/json"]: { schema: doc.body } } } } : {}),
    responses,
  };
}

/**
 * The OpenAPI 3.1 document of the given routes, built from the definitions that serve them (method, path and
 * their `doc`), so the document cannot drift from the routes. Which routes: the composition root's
 * (src/app/openapi.ts).
 */
export function openApiDocumentOf(routes: readonly DocumentedRoute[], options: { serverUrl?: string } = {}) {
  const paths: Record<string, Record<string, object>> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path]![route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Payment gateway REST API",
      version: "1.0.0",
      license: { name: "MIT", identifier: "MIT" },
      description: [
        "The REST interface of the self-hosted payment gateway: the legacy `/api` routes exactly as published, and the `/v1` group.",
        "Amounts are integers in the currency's minor unit (KES 15.00 is 1500).",
        "",
        "**Authentication**: `/api` routes take `X-API-Key` (a secret key, `sk_test_...` or `sk_live_...`, whose mode decides test or live data);",
        "`/v1` routes take it too, or `Authorization: Bearer <access token>` from `POST /v1/auth/login`.",
        "",
        "**Safe retries**: a POST with an `Idempotency-Key` header is done once; a retry with the same key and body gets the first answer again",
        "(with `Idempotent-Replayed: true`).",
        "",
        "**Rate limits**: responses carry `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`; a refused request is a 429 with `Retry-After`.",
        "",
        "**Errors** are `{\"status\":\"error\",\"message\":...,\"code\":...}` with these codes:",
        "",
        errorTable(),
      ].join("\n"),
    },
    servers: [{ url: options.serverUrl ?? "/", description: "This gateway (relative: the host serving this document)" }],
    tags: [
      { name: "Transactions", description: "Payments by card through the hosted checkout" },
      { name: "Mobile money", description: "M-Pesa STK push and C2B" },
      { name: "Payment channels", description: "Where payments go (sandbox, mpesa, paystack)" },
      { name: "Customers", description: "The merchant's payers" },
      { name: "Payouts", description: "Money out to phones (M-Pesa B2C), never sent twice" },
      { name: "Refunds", description: "Money back to payers, in full or in part, never more than was paid" },
      { name: "Balances", description: "What each channel holds for the merchant, from the double-entry ledger, and what moved it" },
      { name: "Webhooks", description: "Signed event deliveries to the merchant's server" },
      { name: "Account", description: "Who the credential belongs to" },
      { name: "Auth", description: "Users signing in for short-lived bearer tokens" },
    ],
    paths,
    components: {
      securitySchemes: {
        ApiKey: { type: "apiKey", in: "header", name: "X-API-Key", description: "A secret API key: sk_test_... (test mode) or sk_live_... (live mode)." },
        Bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "An access token from POST /v1/auth/login or /v1/auth/refresh (15 minutes)." },
      },
      parameters: {
        IdempotencyKey: {
          name: "Idempotency-Key",
          in: "header",
          required: false,
          description: "Makes the POST safe to retry: the same key and body give the first answer again; another body with the key is a 422.",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
      },
      headers: {
        RateLimitLimit: { description: "Requests allowed per window for this credential", schema: { type: "integer" } },
        RateLimitRemaining: { description: "Requests left in the window", schema: { type: "integer" } },
        RateLimitReset: { description: "Seconds until the window resets", schema: { type: "integer" } },
      },
      responses: {
        RateLimited: {
          description: "Rate limit exceeded",
          headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer" } } },
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
      schemas: { Error: errorEnvelope(Object.keys(errorCatalogue)), SuccessEnvelope: envelope({}) },
    },
  };
}

export type OpenApiDocument = ReturnType<typeof openApiDocumentOf>;
