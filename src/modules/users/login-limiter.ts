import { createHash } from "node:crypto";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { RedisConnections } from "../../infra/redis.ts";
import type { LimiterName, RateLimitState } from "../../rate-limit/limiter.ts";

/**
 * Password guessing protection for /v1/auth/login, shared through Redis when configured (in memory otherwise),
 * on even when RATE_LIMIT_ENABLED is false (that switch is about request budgets, this about passwords):
 * - failures per e-mail (5 in 15 minutes by default): only a wrong password counts, and nothing gives a failure
 *   back, not even another user of the same address signing in;
 * - sign-ins of one e-mail in flight at once (SIGN_INS_IN_FLIGHT): a burst of parallel guesses cannot all be
 *   checked before the first failure is counted, yet a team signing in at once is never locked out;
 * - attempts per client IP (20 in 15 minutes): every attempt, a success too.
 */
export interface LoginLimiterOptions {
  failuresPerEmail: number;
  failuresPerIp: number;
  windowSeconds: number;
  redis: RedisConnections | undefined;
  /** Told of each refused attempt (metrics). */
  onRefused?: (limiter: LimiterName) => void;
}

/** How many sign-ins of one address may have their password checked at once (across instances). */
const SIGN_INS_IN_FLIGHT = 10;
/** An in-flight mark outlives a crashed instance by this much at most. */
const IN_FLIGHT_SECONDS = 60;

/** `done(wrongPassword)`: only a wrong password (or unknown e-mail) counts as a failure. */
export type LoginAttempt = { refused: RateLimitState } | { done(wrongPassword: boolean): Promise<void> };

export function createLoginLimiter(options: LoginLimiterOptions) {
  const make = (keyPrefix: string, points: number, duration: number): RateLimiterAbstract => {
    const memory = new RateLimiterMemory({ keyPrefix, points, duration });
    if (!options.redis) return memory;
    return new RateLimiterRedis({
      storeClient: options.redis.client("login-limit", { enableOfflineQueue: false, commandTimeout: 1000 }),
      keyPrefix,
      points,
      duration,
      rejectIfRedisNotReady: true,
      insuranceLimiter: memory,
    });
  };
  const failures = make("gw:login:email", options.failuresPerEmail, options.windowSeconds);
  const inFlight = make("gw:login:inflight", SIGN_INS_IN_FLIGHT, IN_FLIGHT_SECONDS);
  const perIp = make("gw:login:ip", options.failuresPerIp, options.windowSeconds);
  // E-mail addresses never reach Redis keys in plaintext.
  const emailBucket = (email: string) => createHash("sha256").update(`login:${email}`, "utf8").digest("base64url");

  const refusal = (name: LimiterName, limit: number, msBeforeNext: number): RateLimitState => {
    options.onRefused?.(name);
    return { limiter: name, allowed: false, limit, remaining: 0, resetSeconds: Math.max(1, Math.ceil(msBeforeNext / 1000)) };
  };

  async function take(limiter: RateLimiterAbstract, bucket: string): Promise<RateLimiterRes | null> {
    try {
      await limiter.consume(bucket);
      return null;
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return rejection;
    }
  }

  return {
    /**
     * Counts one attempt against the IP, refuses an e-mail already over its failures or with too many sign-ins in
     * flight, and otherwise hands back `done`, to be called once with the outcome.
     */
    async attempt(email: string, ip: string): Promise<LoginAttempt> {
      const ipRefused = await take(perIp, ip);
      if (ipRefused) return { refused: refusal("login_ip", options.failuresPerIp, ipRefused.msBeforeNext) };
      const bucket = emailBucket(email);
      const failed = await failures.get(bucket);
      if (failed && failed.consumedPoints >= options.failuresPerEmail) {
        return { refused: refusal("login_email", options.failuresPerEmail, failed.msBeforeNext) };
      }
      const busy = await take(inFlight, bucket);
      if (busy) {
        // Not a failure: the mark taken by the refused consume is given back.
        await inFlight.reward(bucket, 1);
        return { refused: refusal("login_email", options.failuresPerEmail, 1000) };
      }
      let settled = false;
      return {
        async done(wrongPassword) {
          if (settled) return;
          settled = true;
          await Promise.all([inFlight.reward(bucket, 1), wrongPassword ? take(failures, bucket) : undefined]);
        },
      };
    },
  };
}

export type LoginLimiter = ReturnType<typeof createLoginLimiter>;
