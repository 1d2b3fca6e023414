import { createHash } from "node:crypto";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { RedisConnections } from "../../infra/redis.ts";
import type { LimiterName, RateLimitState } from "../../rate-limit/limiter.ts";

/**
 * Password guessing protection for /v1/auth/login: failures per e-mail and per client IP in a window
 * (5 and 20 in 15 minutes by default), shared through Redis when configured, in memory otherwise. It is
 * on even when RATE_LIMIT_ENABLED is false: that switch is about request budgets, this about passwords.
 *
 * Each attempt is counted before the password is checked, so a burst of parallel guesses cannot all
 * slip through before the first failure is recorded; a successful sign-in gives its points back.
 */
export interface LoginLimiterOptions {
  failuresPerEmail: number;
  failuresPerIp: number;
  windowSeconds: number;
  redis: RedisConnections | undefined;
  /** Told of each refused attempt (metrics). */
  onRefused?: (limiter: LimiterName) => void;
}

export function createLoginLimiter(options: LoginLimiterOptions) {
  const make = (keyPrefix: string, points: number): RateLimiterAbstract => {
    const memory = new RateLimiterMemory({ keyPrefix, points, duration: options.windowSeconds });
    if (!options.redis) return memory;
    return new RateLimiterRedis({
      storeClient: options.redis.client("login-limit", { enableOfflineQueue: false, commandTimeout: 1000 }),
      keyPrefix,
      points,
      duration: options.windowSeconds,
      rejectIfRedisNotReady: true,
      insuranceLimiter: memory,
    });
  };
  const perEmail = make("gw:login:email", options.failuresPerEmail);
  const perIp = make("gw:login:ip", options.failuresPerIp);
  // E-mail addresses never reach Redis keys in plaintext.
  const emailBucket = (email: string) => createHash("sha256").update(`login:${email}`, "utf8").digest("base64url");

  async function take(limiter: RateLimiterAbstract, name: LimiterName, limit: number, bucket: string): Promise<RateLimitState | null> {
    try {
      await limiter.consume(bucket);
      return null;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      options.onRefused?.(name);
      return { limiter: name, allowed: false, limit, remaining: 0, resetSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
    }
  }

  return {
    /** Counts one attempt; resolves to the refusal when the e-mail or the IP is over its budget. */
    async attempt(email: string, ip: string): Promise<RateLimitState | null> {
      return (await take(perIp, "login_ip", options.failuresPerIp, ip)) ?? (await take(perEmail, "login_email", options.failuresPerEmail, emailBucket(email)));
    },
    /** A correct password: the e-mail starts over and the IP gets its attempt back. */
    async succeeded(email: string, ip: string): Promise<void> {
      await Promise.all([perEmail.delete(emailBucket(email)), perIp.reward(ip, 1)]);
    },
  };
}

export type LoginLimiter = ReturnType<typeof createLoginLimiter>;
