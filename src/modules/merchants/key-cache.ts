import type { Principal } from "../../auth.ts";
import type { RedisConnections } from "../../infra/redis.ts";
import type { Logger } from "../../logger.ts";

/**
 * Verified API keys, kept in process so a request does not look its key up in the database every time.
 * Revocation must still take effect at once everywhere: a revoke publishes the key's id (through Redis
 * when REDIS_URL is set, so every instance and the CLI reach each other; in process otherwise) and
 * every instance drops it. The TTL bounds what a missed message could cost, e.g. a revoke made by the
 * CLI against a PostgreSQL shared by instances that have no Redis.
 *
 * Only valid keys are cached: unknown keys would let a key guesser fill memory (the per-IP budget
 * limits those lookups instead), and a new key is a new hash, so it works at once.
 */
export interface ApiKeyCache {
  get(hash: string): Principal | undefined;
  set(hash: string, principal: Principal): void;
  /** Drops a revoked key here and tells every other instance to. */
  revoked(keyId: number): Promise<void>;
  /** Called with a key's id on every revocation seen here (this instance's or another's): its connections close. */
  onRevoked(listener: (keyId: number) => void): () => void;
  close(): Promise<void>;
}

const CHANNEL = "payment-gateway:api-key-revoked";
const MAX_ENTRIES = 10_000;

export function createApiKeyCache(options: { ttlMs: number; redis?: RedisConnections | undefined; logger?: Logger }): ApiKeyCache {
  const { ttlMs, redis, logger } = options;
  const entries = new Map<string, { principal: Principal; expiresAt: number }>();

  const listeners = new Set<(keyId: number) => void>();
  const drop = (keyId: number) => {
    for (const [hash, entry] of entries) if (entry.principal.keyId === keyId) entries.delete(hash);
    for (const listener of listeners) listener(keyId);
  };

  let subscriber: ReturnType<RedisConnections["client"]> | undefined;
  // Subscribed even with the cache off (ttlMs 0): open connections of a revoked key close on every instance.
  if (redis) {
    subscriber = redis.client("api-key-revocations");
    subscriber.subscribe(CHANNEL).catch((error: Error) => logger?.warn({ err: error.message }, "could not subscribe to API key revocations"));
    subscriber.on("message", (channel: string, message: string) => {
      if (channel === CHANNEL) drop(Number(message));
    });
    // Messages sent while the connection was down are lost: start over rather than trust the cache.
    redis.onSubscriberReady(subscriber, () => entries.clear());
  }

  return {
    get(hash) {
      const entry = entries.get(hash);
      if (!entry) return undefined;
      if (entry.expiresAt <= Date.now()) {
        entries.delete(hash);
        return undefined;
      }
      return entry.principal;
    },
    set(hash, principal) {
      if (ttlMs <= 0) return;
      if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
      entries.set(hash, { principal, expiresAt: Date.now() + ttlMs });
    },
    async revoked(keyId) {
      drop(keyId);
      if (redis) await redis.client("pubsub-publish").publish(CHANNEL, String(keyId));
    },
    onRevoked(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      entries.clear();
      listeners.clear();
    },
  };
}
