import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { errorEnvelope } from "../errors.ts";
import { looksLikeApiKey } from "../security/api-keys.ts";
import { rateLimitError, rateLimitHeaders, retryAfterSeconds, type GatewayRateLimiter, type RateLimitState } from "./limiter.ts";

/**
 * Rate limiting as the first onRequest hook, before authentication and so before any database work.
 * Key lookups hit the database, so this works like brute-force protection:
 *
 *  1. no key, or one that cannot be a key: spend the IP budget (the key check then fails without the DB);
 *  2. a well-formed key: if the IP has used up its budget on failed requests, refuse (429) without
 *     looking the key up; otherwise spend the key's budget (counted by a hash of the presented string);
 *  3. the key turns out unknown or revoked: authenticationFailed() spends the IP budget as well.
 *
 * So a blocked IP is refused even with a valid key until its window resets: telling a valid key from
 * a guess would take the very lookup the block is there to save. Behind a proxy set TRUST_PROXY, or all
 * clients share the proxy's address and one guesser blocks everyone.
 */
export interface RateLimitHooks {
  /** Call when the presented key did not authenticate (before sending the 401). */
  authenticationFailed(request: FastifyRequest, reply: FastifyReply): Promise<void>;
}

const noRateLimit: RateLimitHooks = { authenticationFailed: async () => {} };

export function registerRateLimit(
  app: FastifyInstance,
  limiter: GatewayRateLimiter | undefined,
  isLimited: (request: FastifyRequest) => boolean,
): RateLimitHooks {
  if (!limiter) return noRateLimit;
  /** Requests that already spent the IP budget in step 1, so a failed key check does not spend it twice. */
  const ipCharged = new WeakSet<FastifyRequest>();

  app.addHook("onRequest", async (request, reply) => {
    if (!isLimited(request)) return;
    const key = presentedKey(request);
    let state: RateLimitState;
    if (key && looksLikeApiKey(key)) {
      const ip = await limiter.peekIp(request.ip);
      if (!ip.allowed) return refuse(reply, ip);
      state = await limiter.consumeApiKey(key);
    } else {
      ipCharged.add(request);
      state = await limiter.consumeIp(request.ip);
    }
    if (!state.allowed) return refuse(reply, state);
    reply.headers(rateLimitHeaders(state));
  });

  return {
    async authenticationFailed(request, reply) {
      if (ipCharged.has(request)) return;
      // The 401 reports the budget that now matters to this caller: its IP's.
      reply.headers(rateLimitHeaders(await limiter.consumeIp(request.ip)));
    },
  };
}

function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers["x-api-key"];
  return Array.isArray(header) ? header[0] : header;
}

function refuse(reply: FastifyReply, state: RateLimitState) {
  const error = rateLimitError(state);
  return reply
    .headers({ ...rateLimitHeaders(state), "retry-after": String(retryAfterSeconds(state)) })
    .code(error.status)
    .type("application/json; charset=utf-8")
    .send(errorEnvelope(error));
}
