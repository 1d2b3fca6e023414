import type { FastifyReply, FastifyRequest } from "fastify";
import { errorEnvelope, type GatewayError } from "../errors.ts";
import { rateLimitHeaders, retryAfterSeconds, type GatewayRateLimiter, type RateLimitState } from "./limiter.ts";

/**
 * Rate limiting as the first thing a route's policy guard does (src/route-policy.ts), before authentication and
 * so before any database work.
 * Key lookups hit the database, so this works like brute-force protection:
 *
 *  1. no credential, or one that cannot be valid: spend the IP budget (the check then fails without the DB);
 *  2. a well-formed key or a valid access token (Authenticator.budget in auth.ts): if the IP has used up
 *     its budget on failed requests, refuse (429) without looking anything up; otherwise spend the key's
 *     budget (counted by a hash of the presented string), or the token's merchant's;
 *  3. the key turns out unknown or revoked: authenticationFailed() spends the IP budget as well.
 *
 * So a blocked IP is refused even with a valid key until its window resets: telling a valid key from
 * a guess would take the very lookup the block is there to save. Behind a proxy set TRUST_PROXY, or all
 * clients share the proxy's address and one guesser blocks everyone.
 *
 * A WebSocket's connection_init is one such request too (budgetedAuthentication below): the upgrade
 * itself carries no key, so it is counted there rather than here.
 */
export interface RequestBudgets {
  /**
   * Steps 1 and 2 for one request whose credential spends `budget` (undefined: its IP's): "refused" when
   * the 429 was sent, otherwise which budget was spent (its X-RateLimit headers are set on the reply).
   */
  charge(request: FastifyRequest, reply: FastifyReply, budget: string | undefined): Promise<Charge>;
  /** Step 3: call when the presented credential did not authenticate (before sending the 401), with what charge() said. */
  authenticationFailed(request: FastifyRequest, reply: FastifyReply, charged: Exclude<Charge, "refused">): Promise<void>;
}

export type Charge = "refused" | "ip" | "credential";

/** The budgets a route's policy spends (src/route-policy.ts); undefined when rate limiting is disabled. */
export function requestBudgets(limiter: GatewayRateLimiter | undefined): RequestBudgets | undefined {
  if (!limiter) return undefined;
  return {
    async charge(request, reply, budget) {
      const { state, spentIp } = await admit(limiter, request.ip, budget);
      if (!state.allowed) {
        refuse(reply, state, limiter.refusal(state));
        return "refused";
      }
      reply.headers(rateLimitHeaders(state));
      return spentIp ? "ip" : "credential";
    },
    async authenticationFailed(request, reply, charged) {
      // Already spent in step 1, so a failed key check does not spend it twice.
      if (charged === "ip") return;
      // The 401 reports the budget that now matters to this caller: its IP's.
      reply.headers(rateLimitHeaders(await limiter.consumeIp(request.ip)));
    },
  };
}

/** Steps 1 and 2 above, for one request (or WebSocket connection_init) from `ip` whose credential spends `budget`. */
async function admit(limiter: GatewayRateLimiter, ip: string, budget: string | undefined): Promise<{ state: RateLimitState; spentIp: boolean }> {
  // One Redis round trip for both (GatewayRateLimiter.admitCredential).
  if (budget) return { state: await limiter.admitCredential(ip, budget), spentIp: false };
  return { state: await limiter.consumeIp(ip), spentIp: true };
}

/**
 * graphql-ws's connection_init, budgeted exactly like an HTTP request (steps 1 to 3): resolves to the
 * principal and the budget its later operations spend, to null when the credential is missing or bad
 * (its IP's budget spent), or to the 429 error, before any lookup, when the IP or the budget is used up.
 */
export function budgetedAuthentication<C, P>(
  limiter: GatewayRateLimiter | undefined,
  authenticator: { budget(credential: C): Promise<string | undefined>; authenticate(credential: C): Promise<P | null> },
): (ip: string, credential: C) => Promise<{ principal: P; budget: string | undefined } | null | GatewayError> {
  return async (ip, credential) => {
    const budget = await authenticator.budget(credential);
    if (limiter) {
      const { state, spentIp } = await admit(limiter, ip, budget);
      if (!state.allowed) return limiter.refusal(state);
      const principal = await authenticator.authenticate(credential);
      if (!principal && !spentIp) await limiter.consumeIp(ip);
      return principal ? { principal, budget } : null;
    }
    const principal = await authenticator.authenticate(credential);
    return principal ? { principal, budget } : null;
  };
}

function refuse(reply: FastifyReply, state: RateLimitState, error: GatewayError) {
  return reply
    .headers({ ...rateLimitHeaders(state), "retry-after": String(retryAfterSeconds(state)) })
    .code(error.status)
    .type("application/json; charset=utf-8")
    .send(errorEnvelope(error));
}
