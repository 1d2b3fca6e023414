import { createHash } from "node:crypto";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { GatewayError } from "../errors.ts";
import { groupCommit } from "../infra/group-commit.ts";
import type { RedisClient, RedisConnections } from "../infra/redis.ts";
import type { Logger } from "../logger.ts";

/**
 * Request budgets, counted before any database work (see hook.ts for the order of checks):
 * - per API key (and per merchant for users' access tokens): RATE_LIMIT_PER_MINUTE, counted under a hash
 *   of the presented key string, so no lookup
 *   is needed and no key ever reaches Redis or a log in plaintext;
 * - per client IP: RATE_LIMIT_IP_PER_MINUTE, spent only by requests without a valid key (key guessing).
 *
 * Windows are fixed, 60 s from a budget's first request. With Redis every instance shares the counters;
 * if Redis becomes unreachable an in-memory insurance limiter (per instance) takes over until it is back.
 */
const WINDOW_SECONDS = 60;

/**
 * hook.ts's steps 1 and 2 for requests presenting a credential, one Redis command for a batch of them (instead of two
 * round trips each: a MULTI reading the IP's counter, then the script spending the credential's). KEYS are pairs, an
 * IP's counter then the credential's, one pair per request in arrival order. For each: if the IP's counter has reached
 * ARGV[1], answer {0, its count, its ttl} and spend nothing; otherwise spend one of the credential's budget exactly as
 * rate-limiter-flexible's own script does (a fixed window of ARGV[2] seconds from the first request) and answer {1, its
 * count, its ttl}. Same keys and values as the library's, so both paths share counters; one script runs atomically, so
 * a batch decides exactly what its requests would have one after another.
 */
const ADMIT_CREDENTIALS_LUA = `local out = {}
for i = 1, #KEYS, 2 do
  local ip = redis.call('get', KEYS[i])
  if ip and tonumber(ip) >= tonumber(ARGV[1]) then
    out[#out + 1] = 0
    out[#out + 1] = tonumber(ip)
    out[#out + 1] = redis.call('pttl', KEYS[i])
  else
    redis.call('set', KEYS[i + 1], 0, 'EX', ARGV[2], 'NX')
    local consumed = redis.call('incrby', KEYS[i + 1], 1)
    local ttl = redis.call('pttl', KEYS[i + 1])
    if ttl == -1 then
      redis.call('expire', KEYS[i + 1], ARGV[2])
      ttl = 1000 * ARGV[2]
    end
    out[#out + 1] = 1
    out[#out + 1] = consumed
    out[#out + 1] = ttl
  end
end
return out`;

/** At most this many requests' admissions in one script call. */
const ADMIT_BATCH_MAX = 100;

const KEY_PREFIX = "gw:rl:key";
const IP_PREFIX = "gw:rl:ip";

/** The script's call: the number of keys, the keys (pairs), the IP limit and the window; three numbers per pair back. */
type AdmitClient = RedisClient & { gwAdmitCredentials(...args: (string | number)[]): Promise<number[]> };

/** The budgets that refuse requests (a metrics label: a fixed set). */
export type LimiterName = "api_key" | "ip" | "login_email" | "login_ip" | "push_phone" | "push_link" | "push_merchant";

export interface RateLimitState {
  /** Which budget this is. */
  limiter: LimiterName;
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets (0 when nothing is counted yet). */
  resetSeconds: number;
}

export interface RateLimiterOptions {
  perKeyPerMinute: number;
  perIpPerMinute: number;
  /** Shared counters; without it each instance counts in memory. */
  redis?: RedisConnections;
  logger: Logger;
  /** Told of each refusal (metrics). */
  onRefused?: (limiter: LimiterName) => void;
}

/** How long startup waits for Redis before serving on the insurance limiter (which it then leaves once Redis is up). */
const STARTUP_WAIT_MS = 3000;

/**
 * The gateway's limiter, with Redis connected when configured: until the connection is ready, requests
 * would be counted by the per-instance insurance limiter, so startup waits for it (boundedly).
 */
export async function createRateLimiter(options: RateLimiterOptions): Promise<GatewayRateLimiter> {
  const limiter = new GatewayRateLimiter(options);
  const client = options.redis?.client("rate-limit");
  if (client && client.status !== "ready") {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, STARTUP_WAIT_MS);
      client.once("ready", done);
      function done() {
        clearTimeout(timer);
        client!.off("ready", done);
        resolve();
      }
    });
  }
  return limiter;
}

export class GatewayRateLimiter {
  readonly store: "memory" | "redis";
  readonly #perKey: RateLimiterAbstract;
  readonly #perIp: RateLimiterAbstract;
  /** The insurance limiters inside the Redis ones: what answers while Redis does not. */
  readonly #perKeyMemory: RateLimiterMemory;
  readonly #perIpMemory: RateLimiterMemory;
  /** A single Redis server's connection with the admission script; undefined in memory or on a Cluster. */
  readonly #admitClient: AdmitClient | undefined;
  /** One request's admission on that script, batched with the others in flight (src/infra/group-commit.ts): [allowed, count, ttl ms]. */
  readonly #admitOnRedis: ((keys: { ip: string; key: string }) => Promise<[number, number, number]>) | undefined;
  readonly #keyLimit: number;
  readonly #ipLimit: number;
  readonly #onRefused: ((limiter: LimiterName) => void) | undefined;

  constructor(options: RateLimiterOptions) {
    this.#onRefused = options.onRefused;
    this.#keyLimit = options.perKeyPerMinute;
    this.#ipLimit = options.perIpPerMinute;
    this.store = options.redis ? "redis" : "memory";
    const client = options.redis ? rateLimitClient(options.redis, options.logger) : undefined;
    const limiter = (memory: RateLimiterMemory): RateLimiterAbstract => {
      const { keyPrefix, points } = memory;
      return new RateLimiterRedis({
        storeClient: client,
        keyPrefix,
        points,
        duration: WINDOW_SECONDS,
        // Fail over at once while disconnected instead of waiting on a dead socket.
        rejectIfRedisNotReady: true,
        insuranceLimiter: memory,
      });
    };
    this.#perKeyMemory = new RateLimiterMemory({ keyPrefix: KEY_PREFIX, points: this.#keyLimit, duration: WINDOW_SECONDS });
    this.#perIpMemory = new RateLimiterMemory({ keyPrefix: IP_PREFIX, points: this.#ipLimit, duration: WINDOW_SECONDS });
    this.#perKey = client ? limiter(this.#perKeyMemory) : this.#perKeyMemory;
    this.#perIp = client ? limiter(this.#perIpMemory) : this.#perIpMemory;
    // A Cluster would refuse the script: its two keys live in different slots. It keeps the two round trips.
    if (client && !client.isCluster) {
      // No numberOfKeys: each call passes its own (two per request of the batch).
      client.defineCommand("gwAdmitCredentials", { lua: ADMIT_CREDENTIALS_LUA });
      const admitClient = client as AdmitClient;
      this.#admitClient = admitClient;
      this.#admitOnRedis = groupCommit(
        async (batch: { ip: string; key: string }[]) => {
          const flat = await admitClient.gwAdmitCredentials(batch.length * 2, ...batch.flatMap(({ ip, key }) => [ip, key]), this.#ipLimit, WINDOW_SECONDS);
          return batch.map((_, i) => [flat[3 * i]!, flat[3 * i + 1]!, flat[3 * i + 2]!] as [number, number, number]);
        },
        { max: ADMIT_BATCH_MAX },
      );
    }
  }

  /**
   * Steps 1 and 2 of hook.ts for a request presenting a credential: refused on the IP's state when its failed
   * requests used up its budget (nothing spent), otherwise one request of the credential's budget spent.
   */
  async admitCredential(ip: string, budget: string): Promise<RateLimitState> {
    if (this.#admitOnRedis && this.#admitClient?.status === "ready") {
      try {
        const [allowed, consumed, ttlMs] = await this.#admitOnRedis({ ip: `${IP_PREFIX}:${ip}`, key: `${KEY_PREFIX}:${keyBucket(budget)}` });
        if (allowed === 0) return stateOf("ip", this.#ipLimit, false, consumed, ttlMs);
        // Over the budget once the count passes it, as the library's consume() rejects.
        return stateOf("api_key", this.#keyLimit, consumed <= this.#keyLimit, consumed, ttlMs);
      } catch {
        // As the library does when Redis fails a command: the per-instance insurance counters answer.
        return this.#admitFrom(this.#perIpMemory, this.#perKeyMemory, ip, budget);
      }
    }
    return this.#admitFrom(this.#perIp, this.#perKey, ip, budget);
  }

  async #admitFrom(perIp: RateLimiterAbstract, perKey: RateLimiterAbstract, ip: string, budget: string): Promise<RateLimitState> {
    const ipState = await peek(perIp, this.#ipLimit, ip);
    if (!ipState.allowed) return ipState;
    return consume(perKey, "api_key", this.#keyLimit, keyBucket(budget));
  }

  /**
   * Spends one request of a credential's budget: named by the presented API key, or "merchant:<id>" for
   * users' access tokens (Authenticator.budget). The name is only hashed, never looked up, so this also
   * serves paths that authenticate elsewhere (a WebSocket/SSE subscribe counts one operation per call).
   */
  consumeApiKey(budget: string): Promise<RateLimitState> {
    return consume(this.#perKey, "api_key", this.#keyLimit, keyBucket(budget));
  }

  /** Spends one request of an IP's budget for requests without a valid key. */
  consumeIp(ip: string): Promise<RateLimitState> {
    return consume(this.#perIp, "ip", this.#ipLimit, ip);
  }

  /** An IP's budget without spending it: not allowed once its failed requests used up the budget. */
  peekIp(ip: string): Promise<RateLimitState> {
    return peek(this.#perIp, this.#ipLimit, ip);
  }

  /** The 429 for a request (or WebSocket operation) refused on `state`: every refusal goes through here, and is counted. */
  refusal(state: RateLimitState): GatewayError {
    this.#onRefused?.(state.limiter);
    return rateLimitError(state);
  }
}

/** Domain-separated hash, so the bucket name is not the API key's stored hash either. */
function keyBucket(presentedKey: string): string {
  return createHash("sha256").update(`rate-limit:${presentedKey}`, "utf8").digest("base64url");
}

async function consume(limiter: RateLimiterAbstract, name: LimiterName, limit: number, bucket: string): Promise<RateLimitState> {
  try {
    return toState(await limiter.consume(bucket), name, limit, true);
  } catch (rejection) {
    // Over the limit rejects with the counter's state; anything else is a store failure the insurance
    // limiter did not absorb (it always does for Redis), so it surfaces as a 500.
    if (rejection instanceof RateLimiterRes) return toState(rejection, name, limit, false);
    throw rejection;
  }
}

async function peek(limiter: RateLimiterAbstract, limit: number, ip: string): Promise<RateLimitState> {
  const res = await limiter.get(ip);
  if (!res) return { limiter: "ip", allowed: true, limit, remaining: limit, resetSeconds: 0 };
  return toState(res, "ip", limit, res.consumedPoints < limit);
}

function toState(res: RateLimiterRes, limiter: LimiterName, limit: number, allowed: boolean): RateLimitState {
  return stateOf(limiter, limit, allowed, res.consumedPoints, res.msBeforeNext);
}

function stateOf(limiter: LimiterName, limit: number, allowed: boolean, consumed: number, msBeforeNext: number): RateLimitState {
  return {
    limiter,
    allowed,
    limit,
    remaining: allowed ? Math.max(0, limit - consumed) : 0,
    resetSeconds: Math.max(0, Math.ceil(msBeforeNext / 1000)),
  };
}

function rateLimitClient(redis: RedisConnections, logger: Logger): RedisClient {
  // No offline queue: while Redis is away a command fails at once and the insurance limiter answers.
  // The command timeout covers a server that accepts connections but does not answer.
  const client = redis.client("rate-limit", { enableOfflineQueue: false, commandTimeout: 1000 });
  redis.onAvailabilityChange(client, (available) => {
    if (available) logger.info("Redis is reachable again: rate limiting is back on shared Redis counters");
    else logger.warn("Redis is unreachable: rate limiting falls back to per-instance in-memory counters until it is back");
  });
  return client;
}

/**
 * For transports with no HTTP request per operation (a WebSocket subscribe): spends one request of the
 * key's budget and resolves to the 429 error when over it (undefined when allowed or limiting is off).
 * HTTP requests, SSE included, are already counted by the onRequest hook.
 */
export async function chargeOperation(limiter: GatewayRateLimiter | undefined, budget: string): Promise<GatewayError | undefined> {
  if (!limiter) return undefined;
  const state = await limiter.consumeApiKey(budget);
  return state.allowed ? undefined : limiter.refusal(state);
}

/** The catalogue's 429, with the wait in the message. */
export function rateLimitError(state: RateLimitState): GatewayError {
  const seconds = retryAfterSeconds(state);
  return new GatewayError("rate_limited", `Rate limit exceeded, retry in ${seconds} seconds`, { retryAfterSeconds: seconds });
}

export function retryAfterSeconds(state: RateLimitState): number {
  return Math.max(1, state.resetSeconds);
}

/**
 * X-RateLimit-Reset is the number of seconds until the window resets (as in the IETF RateLimit header
 * draft), not a unix time: it needs no clock agreement between client and server.
 */
export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    "x-ratelimit-limit": String(state.limit),
    "x-ratelimit-remaining": String(state.remaining),
    "x-ratelimit-reset": String(state.resetSeconds),
  };
}
