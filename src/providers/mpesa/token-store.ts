import type { RedisConnections } from "../../infra/redis.ts";

/**
 * Where Daraja access tokens are cached. A new token invalidates the previous one, so instances
 * sharing an app must share the cache: Redis when configured, otherwise process memory.
 */
export interface CachedToken {
  token: string;
  /** Epoch milliseconds. */
  expiresAt: number;
}

export interface TokenStore {
  get(key: string): Promise<CachedToken | null>;
  set(key: string, value: CachedToken): Promise<void>;
  /** Drops the entry only while it still holds this token (another instance may have refreshed it). */
  invalidate(key: string, token: string): Promise<void>;
}

export function createMemoryTokenStore(): TokenStore {
  const entries = new Map<string, CachedToken>();
  return {
    async get(key) {
      const entry = entries.get(key);
      return entry && entry.expiresAt > Date.now() ? entry : null;
    },
    async set(key, value) {
      entries.set(key, value);
    },
    async invalidate(key, token) {
      if (entries.get(key)?.token === token) entries.delete(key);
    },
  };
}

const PREFIX = "daraja:token:";

export function createRedisTokenStore(redis: RedisConnections): TokenStore {
  const client = () => redis.client("daraja-tokens");
  return {
    async get(key) {
      const raw = await client().get(PREFIX + key);
      if (!raw) return null;
      const entry = JSON.parse(raw) as CachedToken;
      return entry.expiresAt > Date.now() ? entry : null;
    },
    async set(key, value) {
      const ttl = Math.max(1, value.expiresAt - Date.now());
      await client().set(PREFIX + key, JSON.stringify(value), "PX", ttl);
    },
    async invalidate(key, token) {
      // Compare-and-delete in one step so a token another instance just stored survives.
      await client().eval(
        "local v = redis.call('GET', KEYS[1]); if v and cjson.decode(v).token == ARGV[1] then return redis.call('DEL', KEYS[1]) end; return 0",
        1,
        PREFIX + key,
        token,
      );
    },
  };
}
