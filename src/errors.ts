/**
 * The one error catalogue: every failure the gateway reports has a stable machine-readable code,
 * an HTTP status and a default message. REST renders {status:"error", message, code}; GraphQL renders
 * the same codes as typed error results.
 */
export const errorCatalogue = {
  invalid_api_key: { status: 401, message: "Invalid API key" },
  invalid_credentials: { status: 401, message: "Invalid e-mail or password" },
  invalid_token: { status: 401, message: "The access or refresh token is invalid or has expired" },
  invalid_signature: { status: 401, message: "The webhook signature does not match its body" },
  validation_failed: { status: 400, message: "Invalid request" },
  malformed_json: { status: 400, message: "Malformed JSON in request body" },
  unsupported_media_type: { status: 415, message: "Content-Type must be application/json" },
  payload_too_large: { status: 413, message: "Request body is larger than 1 MB" },
  uri_too_long: { status: 414, message: "A path parameter is too long" },
  request_header_too_large: { status: 431, message: "Request headers are too large" },
  not_acceptable: { status: 406, message: "This endpoint answers application/json (or text/event-stream for subscriptions)" },
  route_not_found: { status: 404, message: "Route not found" },
  method_not_allowed: { status: 405, message: "Method not allowed" },
  not_found: { status: 404, message: "Not found" },
  forbidden: { status: 403, message: "Not permitted" },
  conflict: { status: 409, message: "Conflict" },
  channel_inactive: { status: 400, message: "Payment channel is inactive" },
  transaction_not_refundable: { status: 409, message: "Only a completed payment can be refunded" },
  amount_exceeds_refundable: { status: 409, message: "The amount is more than can still be refunded" },
  transaction_disputed: { status: 409, message: "The payment has an open dispute" },
  dispute_closed: { status: 409, message: "The dispute can no longer be answered" },
  partial_refund_unsupported: { status: 400, message: "This payment can only be refunded in full" },
  payment_declined: { status: 402, message: "The payment was declined" },
  payment_method_detached: { status: 409, message: "The payment method was detached and can no longer be charged" },
  payment_method_not_reusable: { status: 409, message: "The provider does not allow this payment method to be charged again" },
  test_mode_only: { status: 403, message: "Test clocks exist in test mode only" },
  test_clock_advancing: { status: 409, message: "The test clock is still advancing" },
  unsupported_currency: { status: 400, message: "Currency is not supported" },
  rate_limited: { status: 429, message: "Rate limit exceeded" },
  mpesa_prompt_limit: { status: 429, message: "Too many M-Pesa prompts were sent to this phone number; try again later" },
  mpesa_prompt_pending: { status: 409, message: "An M-Pesa prompt sent to this phone number is still waiting for an answer" },
  idempotency_key_in_use: { status: 409, message: "A request with this Idempotency-Key is in progress" },
  idempotency_key_reused: { status: 422, message: "Idempotency-Key was used with a different request" },
  provider_error: { status: 502, message: "The payment provider returned an error" },
  provider_unavailable: { status: 503, message: "The payment provider is unavailable" },
  service_unavailable: { status: 503, message: "Service unavailable" },
  internal_error: { status: 500, message: "Internal server error" },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof errorCatalogue;

export class GatewayError extends Error {
  override name = "GatewayError";
  readonly code: ErrorCode;
  readonly status: number;
  /** The input field at fault, for validation errors. */
  readonly field: string | undefined;
  /** For a 429: when to try again (sent as Retry-After). */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message?: string, options?: { field?: string; cause?: unknown; retryAfterSeconds?: number }) {
    super(message ?? errorCatalogue[code].message, { cause: options?.cause });
    this.code = code;
    this.status = errorCatalogue[code].status;
    this.field = options?.field;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

/** One bad field of an input: where, and what is wrong with it (without the field's name). */
export interface FieldProblem {
  field: string;
  message: string;
}

/**
 * A bad value in an input field; the message names the first field. `errors` lists every bad field found (the first
 * one first), so a client fixes them all in one go: REST answers it beside `message`, GraphQL as `errors`.
 */
export class ValidationError extends GatewayError {
  override name = "ValidationError";
  readonly errors: FieldProblem[];
  constructor(field: string, problem: string, others: FieldProblem[] = []) {
    super("validation_failed", `${field}: ${problem}`, { field });
    this.errors = [{ field, message: problem }, ...others.filter((o) => o.field !== field)];
  }
}

export class NotFoundError extends GatewayError {
  override name = "NotFoundError";
  constructor(what: string) {
    super("not_found", `${what} not found`);
  }
}

export class ConflictError extends GatewayError {
  override name = "ConflictError";
  constructor(message: string, field?: string) {
    super("conflict", message, { field });
  }
}

export interface ErrorEnvelope {
  status: "error";
  message: string;
  code: ErrorCode;
  /** A validation error's every bad field (the first is the one `message` names). */
  errors?: FieldProblem[];
}

export function errorEnvelope(error: GatewayError): ErrorEnvelope {
  const envelope: ErrorEnvelope = { status: "error", message: error.message, code: error.code };
  if (error instanceof ValidationError) envelope.errors = error.errors;
  else if (error.code === "validation_failed" && error.field) envelope.errors = [{ field: error.field, message: error.message.replace(`${error.field}: `, "") }];
  return envelope;
}

/** PostgreSQL's SQLSTATE behind a database error, through Prisma's driver adapters or from pg directly. */
function sqlState(error: unknown): string | undefined {
  const e = error as { code?: unknown; meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } } | null;
  const code = e?.meta?.driverAdapterError?.cause?.originalCode ?? e?.code;
  return typeof code === "string" ? code : undefined;
}

/** A unique constraint refused the write (Prisma's P2002, or PostgreSQL's 23505 underneath). */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "P2002" || sqlState(error) === "23505";
}

/**
 * Prisma's codes for "could not reach / lost the database" (P1xxx connection errors, P2024 pool timeout, P2037 too
 * many connections) and P2028, an interactive transaction that could not start or finish in its time (rolled back:
 * the database is overloaded, and a retry is safe).
 */
const unavailablePrismaCodes = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2028", "P2037"]);
/**
 * Driver-adapter kinds, SQLSTATEs (57P0x shutdown, 08xxx connection, 53300 too many, 25006 a write on a node that is a
 * replica: in a failover a new connection can reach the old primary, restarted read-only, in the second before the
 * balancer's check moves it) and socket errors of the same kind.
 */
const unavailableCodes = new Set([
  "DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections",
  "57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006", "53300", "25006",
  "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH",
]);
const unavailableMessage = /Connection terminated|connection timeout|timeout exceeded when trying to connect|Can't reach database server|Client has encountered a connection error/i;

/** True when an error, or anything it wraps, says the database is down or unreachable (not that a query was wrong). */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!error || typeof error !== "object" || depth > 5) return false;
  const e = error as { code?: unknown; kind?: unknown; originalCode?: unknown; message?: unknown; cause?: unknown; meta?: { driverAdapterError?: unknown } };
  if (typeof e.code === "string" && (unavailablePrismaCodes.has(e.code) || unavailableCodes.has(e.code))) return true;
  if (typeof e.kind === "string" && unavailableCodes.has(e.kind)) return true;
  if (typeof e.originalCode === "string" && unavailableCodes.has(e.originalCode)) return true;
  if (typeof e.message === "string" && unavailableMessage.test(e.message)) return true;
  return isDatabaseUnavailable(e.cause, depth + 1) || isDatabaseUnavailable(e.meta?.driverAdapterError, depth + 1);
}

/** Seconds a client should wait before retrying a 503 (the database is usually back within seconds). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * Anything that is not a GatewayError is masked: no stack trace or SQL leaves the process. The one
 * database refusal a client causes with any text field is named instead: PostgreSQL cannot store a
 * NUL character in text (22021) or JSON (22P05). A database that is down is a 503 the client may
 * retry, not an internal error.
 */
export function toGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  const state = sqlState(error);
  if (state === "22021" || state === "22P05") return new GatewayError("validation_failed", "Text must not contain NUL characters (\\u0000)", { cause: error });
  if (isDatabaseUnavailable(error)) return new GatewayError("service_unavailable", "The database is unavailable; retry shortly", { cause: error });
  return new GatewayError("internal_error", undefined, { cause: error });
}
