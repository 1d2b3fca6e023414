import { isIP } from "node:net";
import { availableParallelism } from "node:os";
import { z } from "zod";

/** Every environment variable the gateway reads, parsed and validated once at startup. */
const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === "" ? undefined : v))
  .optional();

/** A positive whole number, e.g. a per-minute budget or a GraphQL limit. */
const positiveInt = (fallback: number) =>
  optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(1, "must be at least 1").optional()).transform((v) => v ?? fallback);

/** A whole number that may be 0, e.g. a cache lifetime where 0 turns the cache off. */
const nonNegativeInt = (fallback: number) =>
  optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(0, "must be 0 or more").optional()).transform((v) => v ?? fallback);

/** A number of days greater than 0, fractions allowed (a retention period). */
const positiveDays = (fallback: number) =>
  optionalString
    .pipe(z.coerce.number<string | undefined>().refine((v) => Number.isFinite(v) && v > 0, "must be a number of days greater than 0 (fractions allowed, e.g. 0.5 for 12 hours)").optional())
    .transform((v) => v ?? fallback);

/** "true"/"false" (also 1/0, yes/no); unset means the given default (which may depend on NODE_ENV). */
const booleanFlag = z
  .string()
  .trim()
  .toLowerCase()
  .optional()
  .transform((v) => (v === "" ? undefined : v))
  .pipe(z.enum(["true", "false", "1", "0", "yes", "no"], { message: "must be true or false" }).optional())
  .transform((v) => (v === undefined ? undefined : v === "true" || v === "1" || v === "yes"));

const envSchema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().trim().min(1).default("0.0.0.0"),
  PUBLIC_BASE_URL: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  /** Origins (scheme://host[:port], comma-separated) whose browsers may call /graphql from another origin; none by default. */
  CORS_ORIGINS: optionalString.refine((v) => v === undefined || corsOrigins(v) !== null, "must be comma-separated origins such as https://shop.example (scheme, host and port only)"),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
      .optional(),
  ),
  /** Read replicas of DATABASE_URL's server (comma-separated URLs): lists, reports and dashboards read from them. */
  DATABASE_READ_URL: optionalString.refine((v) => v === undefined || readUrls(v) !== null, "must be one or more comma-separated postgres:// or postgresql:// URLs, each named once"),
  /** A replica further behind the primary than this is taken out of rotation (its reads go to the primary). */
  DATABASE_READ_MAX_LAG_MS: optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(100, "must be at least 100").optional()).transform((v) => v ?? 5000),
  /** Connections each instance keeps to the primary (and to each replica) at most. */
  DATABASE_POOL_SIZE: positiveInt(10),
  DATA_DIR: z.string().trim().min(1).default("./data"),
  REDIS_URL: optionalString.pipe(
    z
      .string()
      .regex(/^rediss?:\/\//, "must be a redis:// or rediss:// URL")
      .optional(),
  ),
  /** Redis Cluster seed nodes, comma-separated host:port (instead of REDIS_URL). */
  REDIS_CLUSTER_NODES: optionalString.refine(
    (v) => v === undefined || parseClusterNodes(v) !== null,
    "must be comma-separated host:port pairs, e.g. 10.0.0.1:6379,10.0.0.2:6379 (IPv6 as [::1]:6379)",
  ),
  LOG_LEVEL: z.enum(logLevels).optional(),
  ENCRYPTION_KEY: optionalString.pipe(
    z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hexadecimal characters (32 bytes)")
      .optional(),
  ),
  /** Fastify's trustProxy: false, true (trust every hop), or comma-separated addresses/CIDRs of the proxies. */
  TRUST_PROXY: optionalString.refine(
    (v) => v === undefined || v === "true" || v === "false" || v.split(",").every((p) => isProxyAddress(p.trim())),
    "must be true, false, or comma-separated IP addresses, CIDR ranges, loopback, linklocal or uniquelocal",
  ),
  RATE_LIMIT_ENABLED: booleanFlag,
  RATE_LIMIT_PER_MINUTE: positiveInt(100),
  RATE_LIMIT_IP_PER_MINUTE: positiveInt(30),
  /** Full CSV exports (GET /v1/reports/*.csv) one merchant may stream at once from one instance; beyond: 429 with Retry-After. */
  EXPORTS_PER_MERCHANT: positiveInt(2),
  /** Full CSV exports one instance streams at once, all merchants together; beyond: 429 with Retry-After. */
  EXPORTS_PER_INSTANCE: positiveInt(4),
  GRAPHQL_MAX_DEPTH: positiveInt(8),
  GRAPHQL_MAX_COST: positiveInt(5000),
  GRAPHQL_MAX_ALIASES: positiveInt(15),
  GRAPHQL_MAX_TOKENS: positiveInt(1000),
  GRAPHQL_MAX_DIRECTIVES: positiveInt(50),
  GRAPHQL_INTROSPECTION: booleanFlag,
  GRAPHQL_WS_KEEPALIVE_MS: positiveInt(12_000),
  /** Overrides the Daraja base URL of every mpesa channel (a proxy, or a loopback fake in tests). */
  MPESA_BASE_URL: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  SANDBOX_STK_DELAY_MS: positiveInt(2000),
  SANDBOX_REFUND_DELAY_MS: positiveInt(1000),
  /** How long after a payment with the disputing test card a sandbox dispute opens, and after evidence its verdict comes. */
  SANDBOX_DISPUTE_DELAY_MS: positiveInt(2000),
  /** A sandbox dispute's deadline, after it opened (default 48 hours, as Paystack's in Kenya). */
  SANDBOX_DISPUTE_DUE_MS: positiveInt(48 * 3_600_000),
  /** How often each open dispute is asked about, so a lost webhook still ends right (default one hour). */
  DISPUTE_CHECK_EVERY_MS: positiveInt(3_600_000),
  /** Delays before each retry of a subscription invoice's failed charge, each after the previous attempt (units ms, s, m, h, d). */
  SUBSCRIPTION_RETRY_SCHEDULE: optionalString.refine((v) => v === undefined || parseDurations(v) !== null, "must be comma-separated delays such as 1d,3d,5d (units ms, s, m, h, d)"),
  /** After the last retry fails: true cancels the subscription, false (default) leaves it unpaid. */
  SUBSCRIPTION_CANCEL_UNPAID: booleanFlag,
  /** A certificate or public key PEM used instead of Safaricom's to encrypt B2C initiator passwords (tests). */
  MPESA_CERT_PATH: optionalString,
  PAYOUT_RESULT_OVERDUE_MS: positiveInt(60_000),
  STK_CALLBACK_OVERDUE_MS: positiveInt(30_000),
  STK_QUERY_BACKOFF_MS: positiveInt(10_000),
  STK_LIFETIME_MS: positiveInt(180_000),
  C2B_VALIDATION_TIMEOUT_MS: positiveInt(5000),
  /** Overrides https://api.paystack.co for every paystack channel (a proxy, or a loopback fake in tests). */
  PAYSTACK_BASE_URL: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  /** A pending Paystack payment with no webhook is first verified this long after initialize, then with backoff. */
  PAYSTACK_VERIFY_AFTER_MS: positiveInt(60_000),
  /** A Paystack payment still unpaid this long after initialize is failed as abandoned (Paystack's own 24 h). */
  PAYSTACK_ABANDON_AFTER_MS: positiveInt(24 * 3_600_000),
  /** How long one call to Paystack may take before it counts as unanswered. */
  PAYSTACK_TIMEOUT_MS: positiveInt(15_000),
  /** A Paystack refund is first asked about this long after it was sent (webhooks usually settle it sooner), then with doubling waits. */
  PAYSTACK_REFUND_CHECK_AFTER_MS: positiveInt(60_000),
  /** An M-Pesa reversal (or refund B2C payment) with no result this long after it was sent is asked about (Transaction Status), then with doubling waits. */
  REVERSAL_RESULT_OVERDUE_MS: positiveInt(60_000),
  JOBS_ENABLED: booleanFlag,
  JOB_POLL_INTERVAL_MS: positiveInt(2000),
  JOB_LEASE_MS: positiveInt(60_000),
  IDEMPOTENCY_LEASE_MS: positiveInt(60_000),
  API_KEY_CACHE_TTL_MS: nonNegativeInt(30_000),
  CHECKOUT_CHARGE_LEASE_MS: positiveInt(120_000),
  /** Hosted checkout (issue 25): failed attempts (card or STK) a payment takes before it fails (1 = a decline ends it), and how long it stays payable. */
  CHECKOUT_MAX_ATTEMPTS: optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(1, "must be from 1 to 10").max(10, "must be from 1 to 10").optional()).transform((v) => v ?? 3),
  CHECKOUT_EXPIRY_MS: optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(1000, "must be at least 1000 (one second)").optional()).transform((v) => v ?? 24 * 3_600_000),
  /** Bearer token /metrics requires; unset: open in development and test, not served in production (see METRICS_PORT). */
  METRICS_TOKEN: optionalString.pipe(
    z
      .string()
      .min(16, "must be at least 16 characters (generate one with: openssl rand -hex 32)")
      .regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces (it is sent in an Authorization header)")
      .optional(),
  ),
  /** Serve /metrics on its own listener (same HOST) instead of the API port, e.g. for a private scrape network. */
  METRICS_PORT: optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(1, "must be a port from 1 to 65535").max(65535, "must be a port from 1 to 65535").optional()),
  /** pgBackRest stanza whose last backup /metrics reports (deploy/pgbackrest/; `pgbackrest info` on this machine). */
  PGBACKREST_STANZA: optionalString.pipe(z.string().regex(/^[A-Za-z0-9_.-]+$/, "must be a stanza name (letters, digits, _ . -)").optional()),
  /** Signs users' access tokens; shared by every instance. Unset: derived from the encryption key. */
  JWT_SECRET: optionalString.pipe(z.string().min(32, "must be at least 32 characters (generate one with: openssl rand -hex 32)").optional()),
  ACCESS_TOKEN_TTL_SECONDS: positiveInt(900),
  REFRESH_TOKEN_TTL_DAYS: positiveInt(30),
  /** log2 of scrypt's N for new password hashes; below 15 (OWASP's minimum) only with NODE_ENV=test, to keep test suites fast. */
  PASSWORD_HASH_COST: optionalString.pipe(z.coerce.number<string | undefined>().int("must be a whole number").min(10, "must be from 10 to 20").max(20, "must be from 10 to 20").optional()).transform((v) => v ?? 15),
  LOGIN_FAILURES_PER_EMAIL: positiveInt(5),
  LOGIN_FAILURES_PER_IP: positiveInt(20),
  LOGIN_FAILURE_WINDOW_SECONDS: positiveInt(900),
  /** M-Pesa prompts the payer pages (checkout, payment links) may send in PUSH_LIMIT_WINDOW_SECONDS: per phone number, per payment link, per merchant and mode. */
  PUSH_LIMIT_PER_PHONE: positiveInt(3),
  PUSH_LIMIT_PER_LINK: positiveInt(100),
  PUSH_LIMIT_PER_MERCHANT: positiveInt(1000),
  PUSH_LIMIT_WINDOW_SECONDS: positiveInt(600),
  WEBHOOK_RETRY_SCHEDULE: optionalString.refine((v) => v === undefined || parseDurations(v) !== null, "must be comma-separated delays such as 0,5s,5m,30m,2h,24h (units ms, s, m, h, d)"),
  /** Test mode only: merchant URLs (webhook endpoints, C2B URLs) may be on loopback or private networks. */
  ALLOW_PRIVATE_URLS: booleanFlag,
  /** The older name of ALLOW_PRIVATE_URLS, still read; ALLOW_PRIVATE_URLS wins when both are set. */
  WEBHOOK_ALLOW_PRIVATE_URLS: booleanFlag,
  WEBHOOK_TIMEOUT_MS: positiveInt(10_000),
  /** Gateway processes sharing PORT (node:cluster): a whole number, or "auto" for one per core. */
  WORKERS: optionalString.refine((v) => v === undefined || v === "auto" || /^[1-9]\d{0,2}$/.test(v), "must be auto or a whole number from 1 to 999"),
  /** From SIGTERM to exit at most this long; what is still running then is cut off. */
  SHUTDOWN_TIMEOUT_MS: positiveInt(10_000),
  /** After SIGTERM, keep serving (with /ready at 503) this long so a load balancer notices before the port closes. */
  SHUTDOWN_DRAIN_DELAY_MS: nonNegativeInt(0),
  /** Retention (src/modules/retention): days kept; fractions allowed (0.5 is 12 h). */
  JOB_RETENTION_DAYS: positiveDays(7),
  WEBHOOK_DELIVERY_RETENTION_DAYS: positiveDays(30),
  EVENT_RETENTION_DAYS: positiveDays(90),
  MAIL_RETENTION_DAYS: positiveDays(90),
  /** E-mail (src/modules/mail): smtp://user:pass@host:587 or smtps://...; STARTTLS is required unless ?tls=off (a local relay). Unset: no mail is sent. */
  SMTP_URL: optionalString.refine((v) => v === undefined || smtpSettings(v) !== null, "must be an smtp:// or smtps:// URL with a host (e.g. smtp://user:pass@smtp.example:587)"),
  /** The sender of every message, e.g. "Shop <receipts@shop.example>". */
  MAIL_FROM: optionalString.refine((v) => v === undefined || /^(?:[^<>\r\n]*<[^\s@<>]+@[^\s@<>]+>|[^\s@<>]+@[^\s@<>]+)$/.test(v), "must be an address, or a name and <address>"),
  /** DKIM signing: all three or none. */
  MAIL_DKIM_DOMAIN: optionalString,
  MAIL_DKIM_SELECTOR: optionalString,
  MAIL_DKIM_PRIVATE_KEY_FILE: optionalString,
  /** Waits before each retry of a message the SMTP server refused for now (4xx, unreachable); then it is failed. */
  MAIL_RETRY_SCHEDULE: optionalString.refine((v) => v === undefined || parseDurations(v) !== null, "must be comma-separated durations such as 30s,2m,10m"),
});

/** The groups of docs/configuration.md, in order. */
export const CONFIG_SECTIONS = [
  "Server",
  "Database",
  "Redis",
  "Secrets and sign-in",
  "Rate limits",
  "GraphQL",
  "Hosted checkout",
  "M-Pesa",
  "Paystack",
  "Sandbox",
  "Disputes and recurring payments",
  "Jobs and webhooks",
  "Retention",
  "E-mail",
  "Metrics and backups",
] as const;

/** What the configuration reference says of one variable: its default as a reader needs it, and what it does (Markdown). */
export interface VariableDoc {
  section: (typeof CONFIG_SECTIONS)[number];
  default: string;
  description: string;
}

/**
 * Every variable's entry in docs/configuration.md, which `npm run docs:config` (src/config-docs.ts) writes from this
 * and test/unit/config-docs.test.ts keeps equal. Keyed by the schema's own keys, so a variable cannot be added to
 * the schema without its documentation (the type checker refuses a missing entry). Links are relative to docs/.
 */
export const CONFIG_DOCS: Record<keyof typeof envSchema.shape, VariableDoc> = {
  // Server
  NODE_ENV: { section: "Server", default: "`development`", description: "`production` turns off GraphiQL, GraphQL introspection and field suggestions, serves `/metrics` only when `METRICS_TOKEN` or `METRICS_PORT` says so, and never creates the demo merchant. `test` is for the test suite." },
  PORT: { section: "Server", default: "`3000`", description: "HTTP port." },
  HOST: { section: "Server", default: "`0.0.0.0`", description: "Interface to listen on." },
  PUBLIC_BASE_URL: { section: "Server", default: "`http://localhost:PORT`", description: "Base of every URL the gateway hands out (checkout pages, provider callbacks)." },
  LOG_LEVEL: { section: "Server", default: "`info` (`warn` with `NODE_ENV=test`)", description: "`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. Logs are JSON lines; in development with a terminal attached they are pretty-printed. Each request writes one line, `request completed`, with its `requestId` (also sent back as `X-Request-Id`; a caller's own well-formed `X-Request-Id` is kept), `method`, `route`, `statusCode`, `responseTimeMs`, `merchantId`, `mode` and the signed-in `userId`. GraphQL errors are logged on the request's line of descent (with its `requestId`): a client's mistake (a bad argument or cursor) at `info`, a typed error result or a request refused before execution at `debug`, and only an unexpected failure at `error`, with its stack." },
  TRUST_PROXY: { section: "Server", default: "unset", description: "Behind a proxy: its addresses (comma-separated IPs or CIDRs, or `loopback`, `linklocal`, `uniquelocal`), so a client's address comes from `X-Forwarded-For`, believed from those addresses only. `true` trusts every hop (only when nothing but the proxy can reach the gateway). Unset: the connection's address, and any `X-Forwarded-*` header is ignored (every client behind a proxy then shares its IP budget). URLs are always built from `PUBLIC_BASE_URL`, never from forwarded headers." },
  CORS_ORIGINS: { section: "Server", default: "unset", description: "Origins (e.g. `https://shop.example,http://localhost:5173`) whose pages may call `/graphql` from another origin; each gets `Access-Control-Allow-Origin` for itself only, never with credentials (every credential here is a header a page sends on purpose). Unset: no origin at all; the dashboard needs none, as the gateway serves it." },
  WORKERS: { section: "Server", default: "`1`", description: "Gateway processes sharing `PORT` on this machine (node:cluster); `auto`: one per core. More than one needs `DATABASE_URL` (the embedded PGlite belongs to one process) and `REDIS_URL` or `REDIS_CLUSTER_NODES` (rate limits, live events and key revocations are shared through it); without them the gateway stops at start saying so. Every worker runs the job runner. See [Deployment](deployment.md)." },
  SHUTDOWN_DRAIN_DELAY_MS: { section: "Server", default: "`0`", description: "After SIGTERM, keep serving this long with `/ready` at 503 (each answer closing its connection) before closing the port, so a load balancer stops sending first. Behind HAProxy as in `deploy/`: more than its checks' `inter` \u00d7 `fall` (`3000` there)." },
  SHUTDOWN_TIMEOUT_MS: { section: "Server", default: "`10000`", description: "From SIGTERM to exit at most this long, drain delay included; jobs still running a second before it are put back in the queue, and whatever is still running at it is cut off (exit code 1). Keep your supervisor's stop timeout above it." },
  // Database
  DATABASE_URL: { section: "Database", default: "unset", description: "`postgres://...`: use PostgreSQL. Unset: embedded PGlite in `DATA_DIR`." },
  DATABASE_READ_URL: { section: "Database", default: "unset", description: "One or more `postgres://...` URLs of streaming replicas of `DATABASE_URL`, comma-separated: lists, reports and the dashboard's figures read from them. Needs `DATABASE_URL`. See [Read replicas](deployment.md#read-replicas)." },
  DATABASE_POOL_SIZE: { section: "Database", default: "`10`", description: "Connections each instance opens to the primary (and to each replica) at most: size it with the database's `max_connections` divided among the instances." },
  DATABASE_READ_MAX_LAG_MS: { section: "Database", default: "`5000`", description: "A replica further behind the primary than this (at least 100) leaves rotation; its reads go to the primary until it catches up." },
  DATA_DIR: { section: "Database", default: "`./data`", description: "Embedded database and its generated encryption key. One process per folder. Owner-only: see [DATA_DIR permissions](security.md#data_dir-permissions)." },
  // Redis
  REDIS_URL: { section: "Redis", default: "unset", description: "`redis://...`: share rate limits and events between instances. Unset: in memory." },
  REDIS_CLUSTER_NODES: { section: "Redis", default: "unset", description: "Instead of `REDIS_URL`, a Redis Cluster: some of its nodes as comma-separated `host:port` (IPv6 as `[::1]:6379`); the rest are discovered. Both set, or a malformed list, stops the gateway at start. Counts as Redis wherever `REDIS_URL` is required. See [Redis Cluster](deployment.md#redis-cluster)." },
  // Secrets and sign-in
  ENCRYPTION_KEY: { section: "Secrets and sign-in", default: "generated", description: "64 hex characters (32 bytes) encrypting provider credentials (AES-256-GCM). Required with `DATABASE_URL`; the embedded default generates one into `DATA_DIR/encryption.key` (mode 0600)." },
  JWT_SECRET: { section: "Secrets and sign-in", default: "derived", description: "At least 32 characters signing users' access tokens. Unset: derived from the encryption key (so shared by instances that share it)." },
  ACCESS_TOKEN_TTL_SECONDS: { section: "Secrets and sign-in", default: "`900`", description: "Lifetime of an access token." },
  REFRESH_TOKEN_TTL_DAYS: { section: "Secrets and sign-in", default: "`30`", description: "Lifetime of a refresh token (each refresh issues a new one)." },
  PASSWORD_HASH_COST: { section: "Secrets and sign-in", default: "`15`", description: "log2 of scrypt's N for new password hashes (2^15: 32 MiB, OWASP's minimum); higher is slower and safer. Values below 15 are refused unless `NODE_ENV=test` (the test suite uses 10). Existing hashes keep the cost they were made with." },
  LOGIN_FAILURES_PER_EMAIL: { section: "Secrets and sign-in", default: "`5`", description: "Wrong passwords allowed per e-mail in `LOGIN_FAILURE_WINDOW_SECONDS` before 429 (only wrong passwords count). See [Sign-in limits](security.md#signing-in-and-tokens)." },
  LOGIN_FAILURES_PER_IP: { section: "Secrets and sign-in", default: "`20`", description: "Sign-in attempts (successes too) allowed per client IP in `LOGIN_FAILURE_WINDOW_SECONDS` before 429." },
  LOGIN_FAILURE_WINDOW_SECONDS: { section: "Secrets and sign-in", default: "`900`", description: "The window of `LOGIN_FAILURES_PER_EMAIL` and `LOGIN_FAILURES_PER_IP`, in seconds." },
  API_KEY_CACHE_TTL_MS: { section: "Secrets and sign-in", default: "`30000`", description: "How long an instance trusts a verified API key without looking it up again (`0`: every request). `key revoke` reaches every instance at once through Redis (the CLI publishes it when `REDIS_URL` is set); without Redis, instances sharing a PostgreSQL notice within this time." },
  // Rate limits
  RATE_LIMIT_ENABLED: { section: "Rate limits", default: "`true`", description: "`false` only when something in front of the gateway limits already." },
  RATE_LIMIT_PER_MINUTE: { section: "Rate limits", default: "`100`", description: "Requests per minute per API key, REST and GraphQL together. Over it: 429 with `Retry-After`; every API response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds until the window resets)." },
  RATE_LIMIT_IP_PER_MINUTE: { section: "Rate limits", default: "`30`", description: "Requests per minute per client IP without a valid key (missing, malformed, unknown or revoked). An IP over it is refused even with a valid key until its window resets." },
  EXPORTS_PER_MERCHANT: { section: "Rate limits", default: "`2`", description: "Full CSV exports one merchant (both modes) may stream at once from one instance; beyond, 429 with `Retry-After: 5`." },
  EXPORTS_PER_INSTANCE: { section: "Rate limits", default: "`4`", description: "Full CSV exports all merchants together may stream at once from one instance; beyond, 429 with `Retry-After: 5`." },
  PUSH_LIMIT_PER_PHONE: { section: "Rate limits", default: "`3`", description: "M-Pesa prompts started from the payer pages (checkout, payment links) per phone number, counted across all merchants, in `PUSH_LIMIT_WINDOW_SECONDS`. See [M-Pesa prompt limits](mpesa.md#m-pesa-prompt-limits)." },
  PUSH_LIMIT_PER_LINK: { section: "Rate limits", default: "`100`", description: "M-Pesa prompts started from the payer pages per payment link, in `PUSH_LIMIT_WINDOW_SECONDS`. See [M-Pesa prompt limits](mpesa.md#m-pesa-prompt-limits)." },
  PUSH_LIMIT_PER_MERCHANT: { section: "Rate limits", default: "`1000`", description: "M-Pesa prompts started from the payer pages per merchant and mode, in `PUSH_LIMIT_WINDOW_SECONDS`. See [M-Pesa prompt limits](mpesa.md#m-pesa-prompt-limits)." },
  PUSH_LIMIT_WINDOW_SECONDS: { section: "Rate limits", default: "`600`", description: "The window of the `PUSH_LIMIT_*` budgets, in seconds." },
  IDEMPOTENCY_LEASE_MS: { section: "Rate limits", default: "`60000`", description: "How long a request holds its `Idempotency-Key`; a retry after that (the instance died) takes the key over, see [Rate limits and safe retries](api.md#safe-retries-idempotency-key). Keep it above the longest request." },
  // GraphQL
  GRAPHQL_MAX_DEPTH: { section: "GraphQL", default: "`8`", description: "Deepest field nesting in one GraphQL document (inline fragments not counted)." },
  GRAPHQL_MAX_COST: { section: "GraphQL", default: "`5000`", description: "GraphQL Armor cost limit (`first`/`last` multiply a list's cost)." },
  GRAPHQL_MAX_ALIASES: { section: "GraphQL", default: "`15`", description: "Aliases per document." },
  GRAPHQL_MAX_TOKENS: { section: "GraphQL", default: "`1000`", description: "Tokens per document." },
  GRAPHQL_MAX_DIRECTIVES: { section: "GraphQL", default: "`50`", description: "Directives per document." },
  GRAPHQL_INTROSPECTION: { section: "GraphQL", default: "on, off in production", description: "`true`/`false`: introspection and \"Did you mean\" suggestions (both reveal the schema)." },
  GRAPHQL_WS_KEEPALIVE_MS: { section: "GraphQL", default: "`12000`", description: "Interval of WebSocket pings on subscription connections." },
  // Hosted checkout
  CHECKOUT_MAX_ATTEMPTS: { section: "Hosted checkout", default: "`3`", description: "Failed attempts (declined cards, failed M-Pesa pushes) a hosted-checkout payment takes before it fails with the last attempt's code; `1` = a decline ends it. From 1 to 10." },
  CHECKOUT_EXPIRY_MS: { section: "Hosted checkout", default: "`86400000`", description: "An unpaid hosted-checkout payment fails as `abandoned` this long after initialize (24 h; at least 1000)." },
  CHECKOUT_CHARGE_LEASE_MS: { section: "Hosted checkout", default: "`120000`", description: "How long a checkout card charge holds its transaction; after that (the instance died mid-charge) the payer may pay again. Keep it above the card provider's timeout." },
  // M-Pesa
  MPESA_BASE_URL: { section: "M-Pesa", default: "unset", description: "Overrides the Daraja base URL of every mpesa channel (a proxy, or a test server)." },
  MPESA_CERT_PATH: { section: "M-Pesa", default: "Safaricom's", description: "A certificate (or public key) PEM used instead of Safaricom's sandbox/production certificate to encrypt B2C initiator passwords." },
  STK_CALLBACK_OVERDUE_MS: { section: "M-Pesa", default: "`30000`", description: "A pending STK push with no callback this long after it was sent is asked about (STK query). See [Reconciliation of pushes](mpesa.md#reconciliation-of-pushes)." },
  STK_QUERY_BACKOFF_MS: { section: "M-Pesa", default: "`10000`", description: "First wait between two STK queries of one push; it doubles each time, at most 60 s." },
  STK_LIFETIME_MS: { section: "M-Pesa", default: "`180000`", description: "An STK push with no answer this long after it was sent fails as expired (`1019`); a checkout's prompt holds its payment this long at most." },
  C2B_VALIDATION_TIMEOUT_MS: { section: "M-Pesa", default: "`5000`", description: "How long a merchant's C2B validation URL has to answer." },
  PAYOUT_RESULT_OVERDUE_MS: { section: "M-Pesa", default: "`60000`", description: "A payout with no result this long after it was sent is asked about (Transaction Status), then with doubling waits (at most hourly)." },
  REVERSAL_RESULT_OVERDUE_MS: { section: "M-Pesa", default: "`60000`", description: "An M-Pesa refund (reversal or B2C) with no Result this long after it was sent is asked about (Transaction Status), then with doubling waits (at most hourly)." },
  // Paystack
  PAYSTACK_BASE_URL: { section: "Paystack", default: "`https://api.paystack.co`", description: "Overrides Paystack's API base for every paystack channel (a proxy, or a test server)." },
  PAYSTACK_VERIFY_AFTER_MS: { section: "Paystack", default: "`60000`", description: "A pending Paystack payment is first verified this long after initialize (in case its webhook never comes), then with doubling waits (at most hourly)." },
  PAYSTACK_ABANDON_AFTER_MS: { section: "Paystack", default: "`86400000`", description: "A Paystack payment still unpaid this long after initialize fails as `abandoned` (Paystack's own 24 hours)." },
  PAYSTACK_TIMEOUT_MS: { section: "Paystack", default: "`15000`", description: "How long one call to Paystack may take; longer is a 503 `provider_unavailable`." },
  PAYSTACK_REFUND_CHECK_AFTER_MS: { section: "Paystack", default: "`60000`", description: "A Paystack refund is first asked about (`GET /refund/:id`) this long after it was sent, in case no `refund.*` webhook settles it, then with doubling waits (at most hourly)." },
  // Sandbox
  SANDBOX_STK_DELAY_MS: { section: "Sandbox", default: "`2000`", description: "How long the sandbox takes to \"answer\" an STK push." },
  SANDBOX_REFUND_DELAY_MS: { section: "Sandbox", default: "`1000`", description: "How long after it was made a sandbox refund settles." },
  SANDBOX_DISPUTE_DELAY_MS: { section: "Sandbox", default: "`2000`", description: "How long after a payment with the disputing test card its sandbox dispute opens, and after evidence is submitted its verdict comes." },
  SANDBOX_DISPUTE_DUE_MS: { section: "Sandbox", default: "`172800000`", description: "A sandbox dispute's deadline after it opened (48 hours, as Paystack's in Kenya)." },
  // Disputes and recurring payments
  DISPUTE_CHECK_EVERY_MS: { section: "Disputes and recurring payments", default: "`3600000`", description: "Each open dispute is asked about this often (and just after its deadline), so a lost provider webhook still ends right." },
  SUBSCRIPTION_RETRY_SCHEDULE: { section: "Disputes and recurring payments", default: "`1d,3d,5d`", description: "Delays before each retry of a subscription invoice's failed charge, each after the previous attempt (units ms, s, m, h, d); after the last, the invoice is uncollectible." },
  SUBSCRIPTION_CANCEL_UNPAID: { section: "Disputes and recurring payments", default: "`false`", description: "After an invoice's last retry fails: `true` cancels the subscription, `false` leaves it `unpaid`." },
  // Jobs and webhooks
  JOBS_ENABLED: { section: "Jobs and webhooks", default: "`true`", description: "`false` for an API-only instance: it enqueues deferred work but another instance runs it." },
  JOB_POLL_INTERVAL_MS: { section: "Jobs and webhooks", default: "`2000`", description: "How often an instance looks for due jobs it was not told about (other instances' work, retries, jobs of a crashed instance)." },
  JOB_LEASE_MS: { section: "Jobs and webhooks", default: "`60000`", description: "How long a claimed job belongs to one instance; after that (its instance died) another takes it. At least `WEBHOOK_TIMEOUT_MS` + 5 s." },
  WEBHOOK_RETRY_SCHEDULE: { section: "Jobs and webhooks", default: "live `0,5s,5m,30m,2h,5h,10h,10h,24h,24h`; test `0,5s,5m,30m,2h,5h,10h,24h`", description: "Comma-separated delays before each delivery attempt, e.g. `0,5s,5m,30m,2h,5h,10h,24h,24h` (units `ms`, `s`, `m`, `h`, `d`; a bare number is ms). Overrides both modes' schedules." },
  WEBHOOK_TIMEOUT_MS: { section: "Jobs and webhooks", default: "`10000`", description: "A delivery answered 2xx within this long succeeded." },
  ALLOW_PRIVATE_URLS: { section: "Jobs and webhooks", default: "`false`", description: "`true` lets test-mode merchant URLs (webhook endpoints, C2B confirmation and validation URLs) be on loopback or private networks (local development). Live mode never allows them." },
  WEBHOOK_ALLOW_PRIVATE_URLS: { section: "Jobs and webhooks", default: "`false`", description: "The older name of `ALLOW_PRIVATE_URLS`, still read; `ALLOW_PRIVATE_URLS` wins when both are set." },
  // Retention
  JOB_RETENTION_DAYS: { section: "Retention", default: "`7`", description: "Jobs that gave up (`status = 'failed'`) are deleted this many days after they failed. Days; fractions allowed (`0.5` is 12 h). See [Retention](operations.md#retention)." },
  WEBHOOK_DELIVERY_RETENTION_DAYS: { section: "Retention", default: "`30`", description: "Finished webhook deliveries (succeeded or failed for good) are deleted this many days after they were created; pending ones never. See [Retention](operations.md#retention)." },
  EVENT_RETENTION_DAYS: { section: "Retention", default: "`90`", description: "Events are deleted this many days after they happened, once no delivery of theirs remains and their payment, payout or refund is no longer pending. See [Retention](operations.md#retention)." },
  MAIL_RETENTION_DAYS: { section: "Retention", default: "`90`", description: "E-mails (and the test inbox's copies) are deleted this many days after they were written, once sent, kept, skipped or failed." },
  // E-mail
  SMTP_URL: { section: "E-mail", default: "unset", description: "The mail server: `smtp://user:pass@host:587` (STARTTLS required) or `smtps://user:pass@host:465`; `?tls=off` only for a relay on the same machine or network. Unset: nothing is sent, and test-mode messages are kept in the dashboard's test inbox. See [E-mail](email.md)." },
  MAIL_FROM: { section: "E-mail", default: "`Payments <no-reply@<PUBLIC_BASE_URL's host>>`", description: "The sender of every message, e.g. `\"Duka <receipts@duka.co.ke>\"`." },
  MAIL_DKIM_DOMAIN: { section: "E-mail", default: "unset", description: "DKIM signing domain. DKIM needs all three `MAIL_DKIM_*` variables or none. See [Deliverability](email.md#deliverability)." },
  MAIL_DKIM_SELECTOR: { section: "E-mail", default: "unset", description: "DKIM selector (published as `<selector>._domainkey.<domain>`)." },
  MAIL_DKIM_PRIVATE_KEY_FILE: { section: "E-mail", default: "unset", description: "Path of the DKIM private key, PEM (RSA)." },
  MAIL_RETRY_SCHEDULE: { section: "E-mail", default: "`30s,2m,10m,30m,1h,2h,4h,8h`", description: "Waits before each retry of a message the mail server refused for now (4xx, unreachable, login refused, no STARTTLS); then it is failed." },
  // Metrics and backups
  METRICS_TOKEN: { section: "Metrics and backups", default: "unset", description: "At least 16 printable ASCII characters, no spaces (e.g. `openssl rand -hex 32`): `/metrics` then requires `Authorization: Bearer <token>` (compared in constant time; otherwise 401), on whichever port serves it." },
  METRICS_PORT: { section: "Metrics and backups", default: "unset", description: "Serve `/metrics` on a listener of its own on this port (same `HOST`; must differ from `PORT`), and not on the API port. With neither this nor `METRICS_TOKEN` set, `/metrics` is open on the API port in development and test, and not served at all in production (404), so an instance on the internet never shows its volumes by accident. See [Metrics](operations.md#metrics)." },
  PGBACKREST_STANZA: { section: "Metrics and backups", default: "unset", description: "pgBackRest stanza whose last backup's age `/metrics` exports as `gateway_backup_age_seconds` (needs pgBackRest and its configuration on the gateway's machine). WAL archive gauges are exported on PostgreSQL regardless. See [Backups](operations.md#backups)." },
};

/** The schema's variables with their documentation, in the schema's order. */
export function configVariables(): ({ name: string } & VariableDoc)[] {
  return (Object.keys(envSchema.shape) as (keyof typeof envSchema.shape)[]).map((name) => ({ name, ...CONFIG_DOCS[name] }));
}

/** The value the schema gives a variable left unset (before loadConfig's own defaults, which depend on others). */
export function schemaDefault(name: string): unknown {
  const shape = envSchema.shape as Record<string, z.ZodType>;
  const parsed = shape[name]!.safeParse(undefined);
  return parsed.success ? parsed.data : undefined;
}

/** SMTP_URL's parts; null when it is not an smtp(s) URL with a host. The password stays in here (never logged). */
export function smtpSettings(value: string): MailConfig["smtp"] | null {
  if (!URL.canParse(value)) return null;
  const url = new URL(value);
  if ((url.protocol !== "smtp:" && url.protocol !== "smtps:") || !url.hostname) return null;
  const secure = url.protocol === "smtps:";
  const tls = url.searchParams.get("tls");
  if (tls !== null && tls !== "off") return null;
  return {
    host: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    requireTls: !secure && tls !== "off",
    user: url.username ? decodeURIComponent(url.username) : undefined,
    pass: url.password ? decodeURIComponent(url.password) : undefined,
  };
}

/** CORS_ORIGINS's origins, each exactly as a browser sends it in Origin; null when one is not an origin. */
function corsOrigins(value: string): string[] | null {
  const origins = value.split(",").map((o) => o.trim()).filter(Boolean);
  const valid = origins.every((o) => URL.canParse(o) && /^https?:$/.test(new URL(o).protocol) && new URL(o).origin === o);
  return valid ? origins : null;
}

/** DATABASE_READ_URL's URLs; null when one is not a postgres URL or one is named twice. */
function readUrls(value: string): string[] | null {
  const urls = value.split(",").map((u) => u.trim()).filter(Boolean);
  const valid = urls.length > 0 && new Set(urls).size === urls.length && urls.every((u) => /^postgres(ql)?:\/\/[^/\s]/.test(u) && URL.canParse(u));
  return valid ? urls : null;
}

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "0,5s,5m,2h" -> milliseconds; a bare number is milliseconds. Null when any part is not a duration. */
export function parseDurations(value: string): number[] | null {
  const parts = value.split(",").map((p) => p.trim());
  const out: number[] = [];
  for (const part of parts) {
    const match = /^(\d{1,9})(ms|s|m|h|d)?$/.exec(part);
    if (!match) return null;
    out.push(Number(match[1]) * durationUnits[match[2] ?? "ms"]!);
  }
  return out.length ? out : null;
}

/**
 * Delays before each delivery attempt (the first is immediate). Live mode retries for more than 3 days,
 * test mode makes 8 attempts in about 1.7 days, as Stripe and Svix do.
 */
const liveRetrySchedule = parseDurations("0,5s,5m,30m,2h,5h,10h,10h,24h,24h")!;
const testRetrySchedule = parseDurations("0,5s,5m,30m,2h,5h,10h,24h")!;

function isProxyAddress(value: string): boolean {
  if (["loopback", "linklocal", "uniquelocal"].includes(value)) return true;
  const [address = "", bits, ...rest] = value.split("/");
  const family = isIP(address);
  if (!family || rest.length) return false;
  return bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}

function parseTrustProxy(value: string | undefined): boolean | string[] {
  if (value === undefined || value === "false") return false;
  if (value === "true") return true;
  return value.split(",").map((v) => v.trim()).filter(Boolean);
}

export interface Config {
  nodeEnv: "development" | "production" | "test";
  port: number;
  host: string;
  /** Base of every URL the gateway hands out (checkout pages, provider callbacks); no trailing slash. */
  publicBaseUrl: string;
  /** Cross-origin callers of /graphql (CORS); empty: none (the dashboard is served from the gateway's own origin). */
  corsOrigins: string[];
  databaseUrl: string | undefined;
  /** Connections to the primary (and to each replica) at most, per instance. */
  databasePoolSize: number;
  /** Replicas for reads that may lag (src/db/replicas.ts): none without DATABASE_READ_URL. */
  readReplicas: { urls: string[]; maxLagMs: number };
  dataDir: string;
  redisUrl: string | undefined;
  /** Redis Cluster seed nodes (REDIS_CLUSTER_NODES); exclusive with redisUrl. */
  redisClusterNodes: { host: string; port: number }[] | undefined;
  logLevel: (typeof logLevels)[number];
  /** 32-byte key for provider credentials; when unset the embedded default keeps one in DATA_DIR. */
  encryptionKey: Buffer | undefined;
  /** Which proxies may set X-Forwarded-For; without it, every client behind a proxy shares one IP budget. */
  trustProxy: boolean | string[];
  rateLimit: {
    /** Off only where something in front of the gateway limits already (and for benchmarks). */
    enabled: boolean;
    /** Requests per minute per API key, across REST, GraphQL and subscriptions. */
    perKeyPerMinute: number;
    /** Requests per minute per client IP without a valid key (key guessing). */
    perIpPerMinute: number;
  };
  /** Concurrent full CSV exports, counted per instance (src/rest/export-slots.ts). */
  exports: {
    /** EXPORTS_PER_MERCHANT: one merchant's (both modes) at once. */
    perMerchant: number;
    /** EXPORTS_PER_INSTANCE: everyone's at once. */
    perInstance: number;
  };
  graphql: {
    maxDepth: number;
    maxCost: number;
    maxAliases: number;
    maxTokens: number;
    maxDirectives: number;
    /** Introspection and "Did you mean ...?" suggestions both reveal the schema; off in production by default. */
    introspection: boolean;
    /** Interval of WebSocket pings, so idle subscriptions survive proxies and dead peers are noticed. */
    wsKeepAliveMs: number;
  };
  momo: MomoConfig;
  paystack: PaystackConfig;
  refunds: {
    /** How long after it was made a sandbox refund settles. */
    sandboxDelayMs: number;
    /** How long after a Paystack refund is sent the reconciler first asks about it. */
    paystackCheckAfterMs: number;
    /** How long after an M-Pesa reversal or refund B2C request Transaction Status is first asked about it. */
    reversalResultOverdueMs: number;
  };
  disputes: {
    /** How often each open dispute is asked about. */
    checkEveryMs: number;
    sandboxDelayMs: number;
    sandboxDueMs: number;
  };
  billing: {
    /** Delays before each retry of an invoice's failed charge, each after the previous attempt. */
    retryScheduleMs: number[];
    /** After the last retry fails: cancel the subscription (true) or leave it unpaid. */
    cancelUnpaid: boolean;
  };
  jobs: {
    /** False for API-only instances: another instance works the queue. */
    enabled: boolean;
    pollIntervalMs: number;
    leaseMs: number;
  };
  webhooks: WebhookConfig;
  /** Test mode only: let merchant URLs (webhook endpoints, C2B URLs) be on loopback and private networks (local development). */
  allowPrivateUrls: boolean;
  /** How long a request holds its Idempotency-Key before a retry may take it over (its instance died). */
  idempotencyLeaseMs: number;
  /** How long a verified API key is trusted without a database lookup (0: look it up every time); revocations reach every instance at once through Redis. */
  apiKeyCacheTtlMs: number;
  /** Prometheus /metrics: a bearer token it requires, and/or a port of its own; the pgBackRest stanza whose last backup's age it exports (unset: none). */
  metrics: { token: string | undefined; port: number | undefined; backupStanza: string | undefined };
  /** How long a checkout card charge holds its transaction before another attempt may take it over (its instance died). */
  checkoutChargeLeaseMs: number;
  /** The hosted checkout's retries and expiry (issue 25). */
  checkout: { maxAttempts: number; expiryMs: number };
  /** M-Pesa prompts from the payer pages, per phone, link and merchant in a window (src/rate-limit/pushes.ts); always on. */
  pushLimits: { perPhone: number; perLink: number; perMerchant: number; windowSeconds: number };
  /** Gateway processes on this machine sharing the port (1: this process serves). */
  workers: number;
  /** SIGTERM: serve on with /ready at 503 for drainDelayMs, then finish in-flight work; exit within timeoutMs. */
  shutdown: { timeoutMs: number; drainDelayMs: number };
  auth: AuthConfig;
  /** How long finished rows are kept before the hourly retention job deletes them (src/modules/retention). */
  retention: { failedJobsMs: number; webhookDeliveriesMs: number; eventsMs: number; mailMessagesMs: number };
  mail: MailConfig;
}

/** E-mail: the SMTP server (none: nothing is sent; test-mode messages are kept in the test inbox), the sender, DKIM. */
export interface MailConfig {
  smtp: { host: string; port: number; secure: boolean; requireTls: boolean; user: string | undefined; pass: string | undefined } | undefined;
  from: string;
  dkim: { domain: string; selector: string; privateKeyFile: string } | undefined;
  retryScheduleMs: number[];
}

/** Users' sign-in: token lifetimes, the token signing secret, and password-guessing limits. */
export interface AuthConfig {
  jwtSecret: string | undefined;
  accessTokenTtlSeconds: number;
  refreshTokenTtlMs: number;
  loginFailuresPerEmail: number;
  loginFailuresPerIp: number;
  loginFailureWindowSeconds: number;
  /** log2 of scrypt's N for new password hashes (15 in production). */
  passwordHashCost: number;
}

export interface WebhookConfig {
  /** Delay before each attempt, per mode; its length is the number of attempts. */
  retrySchedule: { test: number[]; live: number[] };
  /** A 2xx within this long is a success. */
  timeoutMs: number;
}

/** M-Pesa timing knobs (milliseconds) and the Daraja base URL override. */
export interface MomoConfig {
  mpesaBaseUrl: string | undefined;
  mpesaCertPath: string | undefined;
  /** A payout with no result after this long is asked about (Transaction Status), then with backoff. */
  payoutResultOverdueMs: number;
  /** How long the sandbox connector waits before "the customer answers" an STK push. */
  sandboxStkDelayMs: number;
  /** A pending STK push with no callback after this long is queried. */
  stkCallbackOverdueMs: number;
  /** First wait between two queries of one push; doubles each time, capped at 60 s. */
  stkQueryBackoffMs: number;
  /** After this long with no answer an STK push is failed as expired (1019). */
  stkLifetimeMs: number;
  /** How long a merchant's C2B validation URL has to answer. */
  c2bValidationTimeoutMs: number;
}

/** Paystack: the API base override and the timing of verification for payments whose webhook never came. */
export interface PaystackConfig {
  baseUrl: string | undefined;
  verifyAfterMs: number;
  abandonAfterMs: number;
  timeoutMs: number;
}

/** `host:port,host:port` (IPv6 hosts in brackets) as Redis Cluster seed nodes; null when malformed. */
function parseClusterNodes(value: string): { host: string; port: number }[] | null {
  const nodes = value.split(",").map((entry) => /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(entry.trim()));
  if (nodes.some((m) => !m || Number(m[3]) < 1 || Number(m[3]) > 65535)) return null;
  return nodes.map((m) => ({ host: m![1] ?? m![2]!, port: Number(m![3]) }));
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  const e = parsed.data;
  if (e.DATABASE_URL && !e.ENCRYPTION_KEY) {
    // Instances sharing one PostgreSQL must share the key; a per-machine key file would split them.
    throw new ConfigError(
      "Invalid configuration: ENCRYPTION_KEY is required with DATABASE_URL (generate one with: openssl rand -hex 32)",
    );
  }
  if (e.DATABASE_READ_URL && !e.DATABASE_URL) {
    throw new ConfigError("Invalid configuration: DATABASE_READ_URL needs DATABASE_URL: read replicas are of a PostgreSQL primary (the embedded PGlite has none)");
  }
  if (e.PASSWORD_HASH_COST < 15 && e.NODE_ENV !== "test") {
    throw new ConfigError("Invalid configuration: PASSWORD_HASH_COST below 15 is allowed only with NODE_ENV=test");
  }
  const workers = e.WORKERS === undefined ? 1 : e.WORKERS === "auto" ? availableParallelism() : Number(e.WORKERS);
  if (workers > 1 && !e.DATABASE_URL) {
    throw new ConfigError(
      `Invalid configuration: WORKERS=${e.WORKERS} needs DATABASE_URL: the embedded PGlite database belongs to one process and cannot be shared between workers (run one worker, or use PostgreSQL)`,
    );
  }
  if (e.REDIS_URL && e.REDIS_CLUSTER_NODES) {
    throw new ConfigError("Invalid configuration: set REDIS_URL (one Redis server) or REDIS_CLUSTER_NODES (a Redis Cluster), not both");
  }
  if (workers > 1 && !e.REDIS_URL && !e.REDIS_CLUSTER_NODES) {
    // Rate limits, live events, key revocations and provider tokens are per process without Redis.
    throw new ConfigError(
      `Invalid configuration: WORKERS=${e.WORKERS} needs REDIS_URL or REDIS_CLUSTER_NODES: workers share rate limits, subscription events and API key revocations through Redis`,
    );
  }
  if (e.SHUTDOWN_DRAIN_DELAY_MS >= e.SHUTDOWN_TIMEOUT_MS) {
    throw new ConfigError("Invalid configuration: SHUTDOWN_DRAIN_DELAY_MS must be shorter than SHUTDOWN_TIMEOUT_MS (the drain delay is part of it)");
  }
  const dkimParts = [e.MAIL_DKIM_DOMAIN, e.MAIL_DKIM_SELECTOR, e.MAIL_DKIM_PRIVATE_KEY_FILE].filter((v) => v !== undefined).length;
  if (dkimParts !== 0 && dkimParts !== 3) {
    throw new ConfigError("Invalid configuration: MAIL_DKIM_DOMAIN, MAIL_DKIM_SELECTOR and MAIL_DKIM_PRIVATE_KEY_FILE go together (set all three, or none)");
  }
  if (e.METRICS_PORT !== undefined && e.METRICS_PORT === e.PORT) {
    throw new ConfigError("Invalid configuration: METRICS_PORT must differ from PORT (unset it to serve /metrics on the API port)");
  }
  return {
    nodeEnv: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
    corsOrigins: e.CORS_ORIGINS === undefined ? [] : corsOrigins(e.CORS_ORIGINS)!,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    readReplicas: { urls: e.DATABASE_READ_URL ? readUrls(e.DATABASE_READ_URL)! : [], maxLagMs: e.DATABASE_READ_MAX_LAG_MS },
    dataDir: e.DATA_DIR,
    redisUrl: e.REDIS_URL,
    redisClusterNodes: e.REDIS_CLUSTER_NODES === undefined ? undefined : parseClusterNodes(e.REDIS_CLUSTER_NODES)!,
    logLevel: e.LOG_LEVEL ?? (e.NODE_ENV === "test" ? "warn" : "info"),
    encryptionKey: e.ENCRYPTION_KEY ? Buffer.from(e.ENCRYPTION_KEY, "hex") : undefined,
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    rateLimit: {
      enabled: e.RATE_LIMIT_ENABLED ?? true,
      perKeyPerMinute: e.RATE_LIMIT_PER_MINUTE,
      perIpPerMinute: e.RATE_LIMIT_IP_PER_MINUTE,
    },
    exports: { perMerchant: e.EXPORTS_PER_MERCHANT, perInstance: e.EXPORTS_PER_INSTANCE },
    graphql: {
      maxDepth: e.GRAPHQL_MAX_DEPTH,
      maxCost: e.GRAPHQL_MAX_COST,
      maxAliases: e.GRAPHQL_MAX_ALIASES,
      maxTokens: e.GRAPHQL_MAX_TOKENS,
      maxDirectives: e.GRAPHQL_MAX_DIRECTIVES,
      introspection: e.GRAPHQL_INTROSPECTION ?? e.NODE_ENV !== "production",
      wsKeepAliveMs: e.GRAPHQL_WS_KEEPALIVE_MS,
    },
    momo: {
      mpesaBaseUrl: e.MPESA_BASE_URL?.replace(/\/+$/, ""),
      mpesaCertPath: e.MPESA_CERT_PATH,
      payoutResultOverdueMs: e.PAYOUT_RESULT_OVERDUE_MS,
      sandboxStkDelayMs: e.SANDBOX_STK_DELAY_MS,
      stkCallbackOverdueMs: e.STK_CALLBACK_OVERDUE_MS,
      stkQueryBackoffMs: e.STK_QUERY_BACKOFF_MS,
      stkLifetimeMs: e.STK_LIFETIME_MS,
      c2bValidationTimeoutMs: e.C2B_VALIDATION_TIMEOUT_MS,
    },
    paystack: {
      baseUrl: e.PAYSTACK_BASE_URL?.replace(/\/+$/, ""),
      verifyAfterMs: e.PAYSTACK_VERIFY_AFTER_MS,
      abandonAfterMs: e.PAYSTACK_ABANDON_AFTER_MS,
      timeoutMs: e.PAYSTACK_TIMEOUT_MS,
    },
    refunds: { sandboxDelayMs: e.SANDBOX_REFUND_DELAY_MS, paystackCheckAfterMs: e.PAYSTACK_REFUND_CHECK_AFTER_MS, reversalResultOverdueMs: e.REVERSAL_RESULT_OVERDUE_MS },
    disputes: { checkEveryMs: e.DISPUTE_CHECK_EVERY_MS, sandboxDelayMs: e.SANDBOX_DISPUTE_DELAY_MS, sandboxDueMs: e.SANDBOX_DISPUTE_DUE_MS },
    billing: { retryScheduleMs: parseDurations(e.SUBSCRIPTION_RETRY_SCHEDULE ?? "1d,3d,5d")!, cancelUnpaid: e.SUBSCRIPTION_CANCEL_UNPAID ?? false },
    jobs: {
      enabled: e.JOBS_ENABLED ?? true,
      pollIntervalMs: e.JOB_POLL_INTERVAL_MS,
      leaseMs: Math.max(e.JOB_LEASE_MS, e.WEBHOOK_TIMEOUT_MS + 5000),
    },
    webhooks: {
      retrySchedule: e.WEBHOOK_RETRY_SCHEDULE
        ? { test: parseDurations(e.WEBHOOK_RETRY_SCHEDULE)!, live: parseDurations(e.WEBHOOK_RETRY_SCHEDULE)! }
        : { test: testRetrySchedule, live: liveRetrySchedule },
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
    },
    allowPrivateUrls: e.ALLOW_PRIVATE_URLS ?? e.WEBHOOK_ALLOW_PRIVATE_URLS ?? false,
    idempotencyLeaseMs: e.IDEMPOTENCY_LEASE_MS,
    apiKeyCacheTtlMs: e.API_KEY_CACHE_TTL_MS,
    metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, backupStanza: e.PGBACKREST_STANZA },
    checkoutChargeLeaseMs: e.CHECKOUT_CHARGE_LEASE_MS,
    checkout: { maxAttempts: e.CHECKOUT_MAX_ATTEMPTS, expiryMs: e.CHECKOUT_EXPIRY_MS },
    pushLimits: { perPhone: e.PUSH_LIMIT_PER_PHONE, perLink: e.PUSH_LIMIT_PER_LINK, perMerchant: e.PUSH_LIMIT_PER_MERCHANT, windowSeconds: e.PUSH_LIMIT_WINDOW_SECONDS },
    workers,
    shutdown: { timeoutMs: e.SHUTDOWN_TIMEOUT_MS, drainDelayMs: e.SHUTDOWN_DRAIN_DELAY_MS },
    auth: {
      jwtSecret: e.JWT_SECRET,
      accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL_SECONDS,
      refreshTokenTtlMs: e.REFRESH_TOKEN_TTL_DAYS * 86_400_000,
      loginFailuresPerEmail: e.LOGIN_FAILURES_PER_EMAIL,
      loginFailuresPerIp: e.LOGIN_FAILURES_PER_IP,
      loginFailureWindowSeconds: e.LOGIN_FAILURE_WINDOW_SECONDS,
      passwordHashCost: e.PASSWORD_HASH_COST,
    },
    retention: { failedJobsMs: e.JOB_RETENTION_DAYS * 86_400_000, webhookDeliveriesMs: e.WEBHOOK_DELIVERY_RETENTION_DAYS * 86_400_000, eventsMs: e.EVENT_RETENTION_DAYS * 86_400_000, mailMessagesMs: e.MAIL_RETENTION_DAYS * 86_400_000 },
    mail: {
      smtp: e.SMTP_URL === undefined ? undefined : smtpSettings(e.SMTP_URL)!,
      from: e.MAIL_FROM ?? `Payments <no-reply@${new URL(e.PUBLIC_BASE_URL ?? "http://localhost").hostname}>`,
      dkim: e.MAIL_DKIM_DOMAIN && e.MAIL_DKIM_SELECTOR && e.MAIL_DKIM_PRIVATE_KEY_FILE
        ? { domain: e.MAIL_DKIM_DOMAIN, selector: e.MAIL_DKIM_SELECTOR, privateKeyFile: e.MAIL_DKIM_PRIVATE_KEY_FILE }
        : undefined,
      retryScheduleMs: parseDurations(e.MAIL_RETRY_SCHEDULE ?? "30s,2m,10m,30m,1h,2h,4h,8h")!,
    },
  };
}
