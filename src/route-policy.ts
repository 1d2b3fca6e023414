import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions, onRequestAsyncHookHandler } from "fastify";
import { credentialFrom, type Authenticator, type Credential } from "./auth.ts";
import { GatewayError } from "./errors.ts";
import type { RequestBudgets } from "./rate-limit/hook.ts";

/**
 * Who may call a route, declared where the route is registered (its Fastify `config`), not guessed
 * from its URL:
 * - "api-key": an X-API-Key (the documented /api routes; a bearer token there is not looked at);
 * - "api-key-or-user": an X-API-Key or a signed-in user's `Authorization: Bearer` (/v1, GraphQL);
 * - "none": no credential (health, docs, dashboard, sign-in, the payer's checkout, provider callbacks,
 *   which carry their own token in the path).
 */
export type RouteAuth = "api-key" | "api-key-or-user" | "none";

/**
 * Whose budget a request spends, before authentication and so before any database work:
 * - "caller": the presented credential's when it could be valid (a well-formed key, a user's valid
 *   token: its merchant's), otherwise the client IP's; see rate-limit/hook.ts;
 * - "none": not rate limited.
 */
export type RouteRateLimit = "caller" | "none";

export interface RoutePolicy {
  auth: RouteAuth;
  rateLimit: RouteRateLimit;
  /**
   * Requests the route serves without a credential although it has one (GraphiQL's page on GET
   * /graphql, outside production); they still spend the budget. Called on that route only.
   */
  authExemptWhen?: (request: FastifyRequest) => boolean;
}

declare module "fastify" {
  interface FastifyContextConfig extends Partial<RoutePolicy> {}
}

const AUTH: ReadonlySet<unknown> = new Set<RouteAuth>(["api-key", "api-key-or-user", "none"]);
const RATE_LIMIT: ReadonlySet<unknown> = new Set<RouteRateLimit>(["caller", "none"]);

/**
 * Why a route's declared policy cannot be served, or undefined when it can. A route that declares none
 * is refused rather than given a default: a forgotten policy then stops the gateway at startup, where
 * every test run sees it, instead of silently demanding a key from a provider callback (lost payments)
 * or, the other way, serving data to anyone.
 */
export function policyProblem(config: Partial<RoutePolicy> | undefined): string | undefined {
  if (config?.auth === undefined || config.rateLimit === undefined) {
    return 'declares no policy: give it config: { auth: "api-key" | "api-key-or-user" | "none", rateLimit: "caller" | "none" } (src/route-policy.ts)';
  }
  if (!AUTH.has(config.auth)) return `has an unknown auth policy ${JSON.stringify(config.auth)}`;
  if (!RATE_LIMIT.has(config.rateLimit)) return `has an unknown rateLimit policy ${JSON.stringify(config.rateLimit)}`;
  // The failed-key budget (rate-limit/hook.ts step 3) is what stops key guessing: no credential check without it.
  if (config.auth !== "none" && config.rateLimit !== "caller") return `checks a credential (auth "${config.auth}") so it must be rate limited per caller`;
  return undefined;
}

/** Refuses, when it is registered, a route whose policy is missing or invalid (see policyProblem). */
export function requireRoutePolicies(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    const problem = policyProblem(route.config);
    if (problem) throw new Error(`Route ${[route.method].flat().join(",")} ${route.url} ${problem}`);
  });
}

/**
 * An unknown URL has no route to declare a policy, so it gets the policy of the family its path is in:
 * a 404 under /api or /v1 needs a credential first (no route discovery without a key), and a payer's
 * POST under /payment/checkout spends a budget as the card payment does. Everything else is open.
 */
export function unknownUrlPolicy(method: string, url: string): RoutePolicy {
  if (url.startsWith("/api/")) return API_KEY;
  if (url.startsWith("/v1/auth/")) return OPEN;
  if (url.startsWith("/v1/") || url === "/graphql" || url.startsWith("/graphql?")) return API_KEY_OR_USER;
  if (url.startsWith("/payment/checkout/") && (method === "POST" || /^\/payment\/checkout\/[^/?]+\/return(?:[?]|$)/.test(url))) return PAYER;
  return OPEN;
}

const API_KEY: RoutePolicy = { auth: "api-key", rateLimit: "caller" };
const API_KEY_OR_USER: RoutePolicy = { auth: "api-key-or-user", rateLimit: "caller" };
const PAYER: RoutePolicy = { auth: "none", rateLimit: "caller" };
const OPEN: RoutePolicy = { auth: "none", rateLimit: "none" };

/**
 * A WebSocket upgrade authenticates (and is budgeted) in graphql-ws's connection_init, then per operation. Node
 * hands a request to the upgrade path only with both headers; one that merely claims `Upgrade: websocket` is an
 * ordinary request and is checked as one (and only a route that serves WebSockets exempts upgrades at all).
 */
function isWebSocketUpgrade(request: FastifyRequest): boolean {
  const { upgrade, connection } = request.headers;
  return (upgrade ?? "").toLowerCase() === "websocket" && /(?:^|,)\s*upgrade\s*(?:,|$)/i.test(connection ?? "");
}

/** The 401's message for a key sent as `Authorization: Bearer` where only X-API-Key is read (the /api routes). */
export const API_KEY_HEADER_HINT = "Invalid API key: the /api routes read the secret key from the X-API-Key header, not Authorization: Bearer (send X-API-Key: sk_...)";

function credentialOf(request: FastifyRequest, bearerAllowed: boolean): Credential {
  const { "x-api-key": apiKey, authorization } = request.headers;
  return credentialFrom(Array.isArray(apiKey) ? apiKey[0] : apiKey, authorization, bearerAllowed);
}

export interface PolicyEnforcement {
  authenticator: Authenticator;
  /** Undefined when rate limiting is disabled. */
  budgets: RequestBudgets | undefined;
  refuse(reply: FastifyReply, error: GatewayError): FastifyReply;
}

/**
 * The one onRequest hook a policy needs (rate limit, then authentication), or undefined for a route
 * that needs neither. Built once per route at startup, so a request pays for its own route's checks
 * only and reads no configuration.
 */
export function policyGuard(
  policy: RoutePolicy,
  { authenticator, budgets, refuse }: PolicyEnforcement,
  servesWebSockets = false,
): onRequestAsyncHookHandler | undefined {
  const limited = budgets !== undefined && policy.rateLimit === "caller";
  if (policy.auth === "none") {
    if (!limited) return undefined;
    // A payer: keyless, so its IP's budget (which throttles card testing). A request that presents a key or
    // a user token spends that credential's budget only if it is valid: a made-up key each time must not buy
    // a fresh budget each time, so one that does not authenticate spends the IP's too (as on the API).
    return async (request, reply) => {
      const credential = credentialOf(request, true);
      const charged = await budgets.charge(request, reply, await authenticator.budget(credential));
      if (charged === "credential" && !(await authenticator.authenticate(credential))) await budgets.authenticationFailed(request, reply, charged);
    };
  }
  // A key everywhere; a user's bearer token only where the policy says (the documented /api routes take keys).
  const bearerAllowed = policy.auth === "api-key-or-user";
  const exempt = policy.authExemptWhen;
  return async (request, reply) => {
    if (servesWebSockets && isWebSocketUpgrade(request)) return;
    const credential = credentialOf(request, bearerAllowed);
    const charged = limited ? await budgets.charge(request, reply, await authenticator.budget(credential)) : undefined;
    if (charged === "refused") return reply;
    if (exempt?.(request)) return;
    const principal = await authenticator.authenticate(credential);
    if (!principal) {
      if (charged) await budgets!.authenticationFailed(request, reply, charged);
      if (credential && "bearer" in credential) return refuse(reply, new GatewayError("invalid_token"));
      // Paystack's clients send their secret key as a bearer token: say where this gateway's /api reads it.
      if (!credential && !bearerAllowed && /^Bearer\s/i.test(request.headers.authorization ?? "")) return refuse(reply, new GatewayError("invalid_api_key", API_KEY_HEADER_HINT));
      return refuse(reply, new GatewayError("invalid_api_key"));
    }
    request.principal = principal;
  };
}

/**
 * Enforces every route's declared policy: each route gets its guard as its own onRequest hook (after the
 * global ones, which only set headers), and a request that matches no route is guarded by
 * unknownUrlPolicy. Call before any route is registered.
 */
export function enforceRoutePolicies(app: FastifyInstance, enforcement: PolicyEnforcement): void {
  requireRoutePolicies(app);
  app.addHook("onRoute", (route: RouteOptions) => {
    // Runs before @fastify/websocket's own onRoute hook, so the route's options still carry its wsHandler.
    const guard = policyGuard(route.config as RoutePolicy, enforcement, typeof (route as { wsHandler?: unknown }).wsHandler === "function");
    if (guard) route.onRequest = [...[route.onRequest ?? []].flat(), guard];
  });
  const unknownUrlGuards = new Map<RoutePolicy, onRequestAsyncHookHandler | undefined>(
    [API_KEY, API_KEY_OR_USER, PAYER, OPEN].map((policy) => [policy, policyGuard(policy, enforcement)]),
  );
  // Callback style: a request that matched a route (all but 404s) leaves after one property read, with no promise.
  app.addHook("onRequest", function unknownUrl(request, reply, done) {
    if (!request.is404) return done();
    const guard = unknownUrlGuards.get(unknownUrlPolicy(request.method, request.url));
    if (!guard) return done();
    // As Fastify runs an async hook: on to the next step either way (it stops there when a reply was sent).
    guard.call(this, request, reply).then(() => done(), done);
  });
}
