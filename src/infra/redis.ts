import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "../logger.ts";

/**
 * The gateway's Redis connections: one ioredis client per purpose (rate limiting, pub/sub publisher,
 * pub/sub subscriber, ...), created on first use and closed with the gateway. A subscriber connection
 * cannot run ordinary commands, and a slow consumer must not delay rate-limit checks, hence one per purpose.
 */
export type RedisPurpose = "rate-limit" | "pubsub-publish" | "pubsub-subscribe" | (string & {});

export class RedisConnections {
  readonly #url: string;
  readonly #logger: Logger;
  readonly #clients = new Map<RedisPurpose, Redis>();
  #closed = false;

  constructor(url: string, logger: Logger) {
    this.#url = url;
    this.#logger = logger;
  }

  /** The client for one purpose; options apply only when it is created. */
  client(purpose: RedisPurpose, options: RedisOptions = {}): Redis {
    if (this.#closed) throw new Error("Redis connections are closed");
    let client = this.#clients.get(purpose);
    if (!client) {
      client = new Redis(this.#url, { connectionName: `payment-gateway:${purpose}`, ...options });
      // Without a listener ioredis prints every failed reconnect to stderr; availability is reported
      // once per outage through onAvailabilityChange instead.
      client.on("error", (err: Error) => this.#logger.debug({ purpose, err: err.message }, "redis connection error"));
      this.#clients.set(purpose, client);
    }
    return client;
  }

  /**
   * Calls back once per change between reachable and unreachable (not once per failed reconnect or per
   * command), so callers can log one warning per outage and one notice per recovery. Silent after close().
   */
  onAvailabilityChange(client: Redis, callback: (available: boolean) => void): void {
    let available: boolean | undefined;
    const set = (next: boolean) => {
      if (this.#closed || available === next) return;
      const first = available === undefined;
      available = next;
      // A first successful connection is the normal case, not a recovery.
      if (!(first && next)) callback(next);
    };
    client.on("ready", () => set(true));
    client.on("error", () => set(false));
    client.on("close", () => set(false));
  }

  async close(): Promise<void> {
    this.#closed = true;
    const clients = [...this.#clients.values()];
    this.#clients.clear();
    await Promise.all(
      clients.map(async (client) => {
        // QUIT needs a live connection (and the offline queue may be off); otherwise just drop it.
        if (client.status === "ready") await client.quit().catch(() => client.disconnect());
        else client.disconnect();
      }),
    );
  }
}
