import { createHmac, hkdfSync } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Kind, parse, type DocumentNode, type OperationDefinitionNode } from "graphql";
import type { Principal } from "../auth.ts";
import { GatewayError, ValidationError, errorCatalogue, type ErrorCode } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { IdempotencyScope } from "./scope.ts";
import type { IdempotencyStore } from "./store.ts";

/**
 * Stripe-style Idempotency-Key on POST (optional, like Stripe's): keyed per merchant, mode and caller (the
 * API key or the signed-in user that sent it; see principalScope). A preHandler (after authentication and
 * body parsing, so after rate limiting) claims the key or answers from its record; an onSend hook stores the
 * response once it exists, sealed (the store encrypts bodies: they may hold a secret shown once).
 *
 * - authorization first: a caller the schema would refuse the operation (a viewer creating an API key) is
 *   answered exactly as without a key, its 403, and nothing is claimed, looked up or stored;
 * - same key, same request (sha256 of method, URL and body): the stored status and body again, with
 *   `Idempotent-Replayed: true`; while the first is still running: 409 idempotency_key_in_use; once the
 *   first's lease has lapsed without a response (its instance died), the retry takes the key over and
 *   runs in an IdempotencyScope, so it returns what the first committed rather than creating it again;
 * - same key, different request: 422 idempotency_key_reused;
 * - not stored (the claim is dropped, so a corrected retry runs): requests refused before anything
 *   executed, i.e. 429s, 403s, validation failures and other request errors (see isStored); 5xx are stored.
 *
 * GraphQL: only POSTs whose operation is a mutation are keyed. A query changes nothing, so retrying it is
 * already safe, and replaying a stored read for 24 h would only serve stale data; the header is ignored.
 */
export const IDEMPOTENCY_HEADER = "idempotency-key";
export const MAX_KEY_LENGTH = 255;

/** 4xx codes that mean "refused before execution": such responses are not stored. */
const refusedBeforeExecution = new Set<ErrorCode>([
  "validation_failed",
  "malformed_json",
  "unsupported_media_type",
  "payload_too_large",
  "route_not_found",
  "method_not_allowed",
  "invalid_api_key",
  "invalid_token",
  // Every "forbidden" (a role, or a channel that cannot do this) is decided before anything is written.
  "forbidden",
  "rate_limited",
  "idempotency_key_in_use",
  "idempotency_key_reused",
]);

export interface IdempotencyHooks {
  /** The scope a route runs its work in (see scope.ts); undefined for a request without a claimed key. */
  scopeOf(request: FastifyRequest): IdempotencyScope | undefined;
}

export function registerIdempotency(
  app: FastifyInstance,
  store: IdempotencyStore,
  options: {
    logger: Logger;
    graphqlPath: string;
    graphqlMaxTokens: number;
    /** Keys the request fingerprints (fingerprintKeyFrom). */
    fingerprintKey: Buffer;
    /** The GraphQL document a REST row runs (by request), for its authorization; undefined for other routes. */
    restDocument(request: FastifyRequest): DocumentNode | undefined;
    /** Whether the caller passes the schema's authorization for every root field (src/graphql/authorize.ts). */
    permits(principal: Principal, document: DocumentNode, operation: OperationDefinitionNode): boolean;
  },
): IdempotencyHooks {
  const { logger, graphqlPath, graphqlMaxTokens, fingerprintKey, restDocument, permits } = options;
  const claims = new WeakMap<FastifyRequest, IdempotencyScope>();

  app.addHook("preHandler", async (request, reply) => {
    const key = request.headers[IDEMPOTENCY_HEADER];
    if (key === undefined || request.method !== "POST" || !request.principal) return;
    // Node joins a repeated header with ", "; that is then just a (probably too long or mismatching) key.
    const value = Array.isArray(key) ? key.join(", ") : key;
    if (value.length === 0) throw new ValidationError("Idempotency-Key", "must not be empty");
    if (value.length > MAX_KEY_LENGTH) throw new ValidationError("Idempotency-Key", `must be at most ${MAX_KEY_LENGTH} characters`);
    const isGraphql = request.routeOptions.url === graphqlPath;
    const run = isGraphql ? graphqlOperation(request.body, graphqlMaxTokens) : operationOf(restDocument(request));
    if (isGraphql && run?.operation.operation !== "mutation") return;
    // Authorization before any record is looked at: a refused caller gets the 403 it gets without a key,
    // and neither learns of nor leaves a record.
    if (run && !permits(request.principal, run.document, run.operation)) return;

    const { merchantId, mode } = request.principal;
    const result = await store.claim({
      merchantId,
      mode,
      principal: principalScope(request.principal),
      key: value,
      fingerprint: requestFingerprint(fingerprintKey, request.method, request.url, request.body),
    });
    switch (result.outcome) {
      case "claimed":
        claims.set(request, { claimId: result.id, recoveryPoint: result.recoveryPoint });
        return;
      case "in_flight":
        throw new GatewayError("idempotency_key_in_use");
      case "mismatch":
        throw new GatewayError(
          "idempotency_key_reused",
          "Idempotency-Key was already used with a different request (method, path or body); use a new key for a new request",
        );
      case "replay":
        reply.code(result.status).header("idempotent-replayed", "true");
        if (result.contentType) reply.type(result.contentType);
        return reply.send(result.body);
    }
  });

  app.addHook("onSend", async (request, reply, payload) => {
    const id = claims.get(request)?.claimId;
    if (id === undefined) return payload;
    claims.delete(request);
    const bytes = await payloadBytes(payload);
    const body = bytes.toString("utf8");
    const contentType = reply.getHeader("content-type");
    try {
      if (isStored(reply.statusCode, body, request.routeOptions.url === graphqlPath)) {
        await store.complete(id, { status: reply.statusCode, body, contentType: typeof contentType === "string" ? contentType : null });
      } else {
        await store.release(id);
      }
    } catch (error) {
      // The response itself is fine; the key stays in flight and expires with its record.
      logger.error({ err: error }, "could not record an Idempotency-Key result");
    }
    return bytes;
  });

  // Expired records are deleted by the retention job (src/modules/retention), a day after they expire.
  return { scopeOf: (request) => claims.get(request) };
}

/**
 * The caller a key belongs to: each API key and each user has its own keys, so one caller's stored answer
 * (a new API key, a webhook secret) is never replayed to another, whatever their role.
 */
export function principalScope(principal: Principal): string {
  return principal.keyId !== null ? `key:${principal.keyId}` : `user:${principal.userId}`;
}

/** The fingerprint's HMAC key, derived from the encryption key (as access tokens' is). */
export function fingerprintKeyFrom(encryptionKey: Buffer): Buffer {
  return Buffer.from(hkdfSync("sha256", encryptionKey, Buffer.alloc(0), "payment-gateway idempotency fingerprints v1", 32));
}

/**
 * HMAC-SHA256 over method, URL and the parsed body with object keys sorted, so key order does not matter.
 * Keyed, not a bare hash: bodies carry passwords (createUser, changePassword), and a plain sha256 kept for
 * 24 h could be guessed offline far faster than their scrypt hashes.
 */
export function requestFingerprint(key: Buffer, method: string, url: string, body: unknown): string {
  return createHmac("sha256", key)
    .update(`${method}\n${url}\n${JSON.stringify(sortKeys(body ?? null))}`)
    .digest("hex");
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

interface Operation {
  document: DocumentNode;
  operation: OperationDefinitionNode;
}

function operationOf(document: DocumentNode | undefined): Operation | undefined {
  const operation = document?.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
  return document && operation ? { document, operation } : undefined;
}

/** The operation a GraphQL POST would run, or undefined when yoga would refuse it anyway. */
function graphqlOperation(body: unknown, maxTokens: number): Operation | undefined {
  if (!body || typeof body !== "object" || Array.isArray(body)) return undefined;
  const { query, operationName } = body as { query?: unknown; operationName?: unknown };
  if (typeof query !== "string") return undefined;
  try {
    // maxTokens as GraphQL Armor: a huge document is refused before this hook spends time on it.
    const document = parse(query, { noLocation: true, maxTokens });
    const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
    const chosen = typeof operationName === "string" ? operations.find((o) => o.name?.value === operationName) : operations.length === 1 ? operations[0] : undefined;
    return chosen ? { document, operation: chosen } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a response records the key. Not stored: 429s and the database's 503s (answers that ask for a retry),
 * REST envelopes whose code means the request was refused before execution, and GraphQL responses without `data`
 * (the spec's sign that an error was raised before execution began: syntax, validation, armor limits, variables),
 * with a refusal among their errors
 * (a role's 403), or whose every root field is such a typed result (visible when the client selects `code`).
 */
export function isStored(status: number, body: string, isGraphql: boolean): boolean {
  if (status === 429) return false;
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return true;
  }
  if (!json || typeof json !== "object") return true;
  const record = json as Record<string, unknown>;
  // "The database is unavailable; retry shortly": stored, it would be replayed to that very retry for a day. The retry
  // runs again instead and finds what this attempt committed through its recovery point. (A provider's refusal,
  // provider_unavailable, is the payment's recorded outcome and is replayed.)
  if (status === 503 && record.code === UNAVAILABLE) return false;
  if (status >= 400 && status < 500 && typeof record.code === "string" && Object.hasOwn(errorCatalogue, record.code)) {
    return !refusedBeforeExecution.has(record.code as ErrorCode);
  }
  if (isGraphql) {
    if (!("data" in record)) return false;
    const errors = Array.isArray(record.errors) ? (record.errors as { extensions?: { code?: unknown } }[]) : [];
    if (errors.some((e) => refused(e?.extensions?.code) || e?.extensions?.code === UNAVAILABLE)) return false;
    const roots = record.data && typeof record.data === "object" ? Object.values(record.data) : [];
    const allRefused = roots.length > 0 && roots.every((v) => v !== null && typeof v === "object" && refused((v as { code?: unknown }).code));
    return !allRefused;
  }
  return true;
}

const UNAVAILABLE: ErrorCode = "service_unavailable";

function refused(code: unknown): boolean {
  return typeof code === "string" && refusedBeforeExecution.has(code as ErrorCode);
}

/** The body's bytes: REST sends strings, yoga a stream, which is read here and sent on as these bytes. */
async function payloadBytes(payload: unknown): Promise<Buffer> {
  if (payload === null || payload === undefined) return Buffer.alloc(0);
  if (typeof payload === "string") return Buffer.from(payload, "utf8");
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  if (typeof (payload as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
    const chunks: Buffer[] = [];
    for await (const chunk of payload as AsyncIterable<unknown>) {
      chunks.push(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk as Uint8Array));
    }
    return Buffer.concat(chunks);
  }
  return Buffer.from(String(payload), "utf8");
}
