import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";

/**
 * The gateway's Redis connections: one ioredis client per purpose (rate limiting, pub/sub publisher,
 * pub/sub subscriber, ...), created on first use and closed with the gateway. A subscriber connection
 * cannot run ordinary commands, and a slow consumer must not delay rate-limit checks, hence one per purpose.
 *
 * One Redis server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES): only this file knows which. Callers get
 * a RedisClient, the commands ioredis' Redis and Cluster share. What keeps them cluster-safe:
 * - every command touches one key (rate-limiter-flexible's script and MULTI work on one key; the Daraja token
 *   store's compare-and-delete script too), so no hash tags are needed; a future operation on several keys must
 *   put the shared part of their names in braces (`gw:{merchant:42}:a`, `gw:{merchant:42}:b`) to keep one slot;
 * - pub/sub is plain PUBLISH/SUBSCRIBE, which the cluster bus broadcasts to every node and which works while a
 *   master is down (SSUBSCRIBE channels would live on one shard each, and go silent with it).
 */
export type RedisPurpose = "rate-limit" | "pubsub-publish" | "pubsub-subscribe" | (string & {});

export type RedisClient = Redis | Cluster;

/** What /ready reports: the cluster (or server) answers and serves every slot; answers but some slots are down; does not answer. */
export type RedisHealth = "ok" | "degraded" | "unreachable";

type Target = { url: string } | { nodes: { host: string; port: number }[] };

/** A Redis Cluster has 16384 hash slots; CLUSTER INFO counts those served by a node not marked failing. */
const CLUSTER_SLOTS = 16384;
const HEALTH_TIMEOUT_MS = 1000;

export class RedisConnections {
  readonly #target: Target;
  readonly #logger: Logger;
  readonly #clients = new Map<RedisPurpose, RedisClient>();
  #closed = false;

  /** Connections for the configured Redis (REDIS_URL or REDIS_CLUSTER_NODES), or undefined without one. */
  static fromConfig(config: Pick<Config, "redisUrl" | "redisClusterNodes">, logger: Logger): RedisConnections | undefined {
    if (config.redisClusterNodes) return new RedisConnections({ nodes: config.redisClusterNodes }, logger);
    return config.redisUrl ? new RedisConnections(config.redisUrl, logger) : undefined;
  }

  constructor(target: string | Target, logger: Logger) {
    this.#target = typeof target === "string" ? { url: target } : target;
    this.#logger = logger;
  }

  /** The client for one purpose; options apply only when it is created. */
  client(purpose: RedisPurpose, options: RedisOptions = {}): RedisClient {
    if (this.#closed) throw new Error("Redis connections are closed");
    let client = this.#clients.get(purpose);
    if (!client) {
      client = this.#create(purpose, options);
      // Without a listener ioredis prints every failed reconnect to stderr; availability is reported
      // once per outage through onAvailabilityChange instead.
      client.on("error", (err: Error) => this.#logger.debug({ purpose, err: err.message }, "redis connection error"));
      this.#clients.set(purpose, client);
    }
    return client;
  }

  #create(purpose: RedisPurpose, options: RedisOptions): RedisClient {
    const connectionName = `payment-gateway:${purpose}`;
    if ("url" in this.#target) return new Redis(this.#target.url, { connectionName, ...options });
    const { enableOfflineQueue, ...redisOptions } = options;
    const failFast = enableOfflineQueue === false;
    return new Cluster(this.#target.nodes, {
      redisOptions: { connectionName, ...redisOptions },
      // ioredis' ready check waits for cluster_state:ok, reconnecting until then; but a cluster missing a master
      // still carries pub/sub and the other masters' slots, and failed commands fall back one by one.
      enableReadyCheck: false,
      ...(failFast
        ? {
            // Like a single server without an offline queue: a command for a master that is down (or a cluster
            // that says CLUSTERDOWN) fails at once, so the caller's fallback answers, instead of being retried
            // for up to a second. MOVED and ASK are still followed.
            enableOfflineQueue: false,
            retryDelayOnFailover: 0,
            retryDelayOnClusterDown: 0,
          }
        : {}),
    });
  }

  /**
   * Calls back once per change between reachable and unreachable (not once per failed reconnect or per
   * command), so callers can log one warning per outage and one notice per recovery. Silent after close().
   * On a cluster "unreachable" means not every slot is served (a master down, or the cluster down): a server
   * that is up does not say so, so each sign of trouble (a node's connection lost or failing) and each
   * periodic slots refresh of ioredis (every 5 s) asks the cluster how it is, until it is whole again.
   */
  onAvailabilityChange(client: RedisClient, callback: (available: boolean) => void): void {
    let available: boolean | undefined;
    const set = (next: boolean) => {
      if (this.#closed || available === next) return;
      const first = available === undefined;
      available = next;
      // A first successful connection is the normal case, not a recovery.
      if (!(first && next)) callback(next);
    };
    client.on("error", () => set(false));
    client.on("close", () => set(false));
    if (!(client instanceof Cluster)) {
      client.on("ready", () => set(true));
      return;
    }
    let checking = false;
    const check = () => {
      if (checking || this.#closed) return;
      checking = true;
      void clusterHealth(client)
        .then((health) => set(health === "ok"))
        .finally(() => (checking = false));
    };
    for (const event of ["ready", "refresh", "-node", "node error"]) client.on(event, check);
  }

  /**
   * Calls back each time a subscribing client's subscriber connection is (re)established, after which messages
   * published while it was away are lost: the caller discards what it may have missed. ioredis' Cluster keeps
   * its one subscriber connection private and, when that connection's node goes away, opens a new one on another
   * node (re-subscribing its channels); without the shape this relies on, a warning says revocations may be late.
   */
  onSubscriberReady(client: RedisClient, callback: () => void): void {
    if (!(client instanceof Cluster)) {
      client.on("ready", callback);
      return;
    }
    const holder = (client as unknown as { subscriber?: { selectSubscriber?: () => void; getInstance?: () => Redis | null } }).subscriber;
    if (typeof holder?.selectSubscriber !== "function" || typeof holder.getInstance !== "function") {
      this.#logger.warn("this ioredis version hides its cluster subscriber: messages missed during a failover are not detected");
      client.on("ready", callback);
      return;
    }
    const select = holder.selectSubscriber.bind(holder);
    const getInstance = holder.getInstance.bind(holder);
    holder.selectSubscriber = () => {
      select();
      getInstance()?.once("ready", () => {
        if (!this.#closed) callback();
      });
    };
    getInstance()?.once("ready", callback);
  }

  /** For /ready: whether Redis answers and (on a cluster) serves every slot. Never waits more than a second. */
  async health(): Promise<RedisHealth> {
    // Its own connection, failing fast, so a check never queues behind (or in front of) real work.
    const client = this.client("health", { enableOfflineQueue: false, commandTimeout: HEALTH_TIMEOUT_MS, maxRetriesPerRequest: 0 });
    const started = Date.now();
    if (!(await readyWithin(client, HEALTH_TIMEOUT_MS))) return "unreachable"; // created by the first check
    if (client instanceof Cluster) return clusterHealth(client);
    return withTimeout(client.ping().then(() => "ok" as const), HEALTH_TIMEOUT_MS - (Date.now() - started));
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

/**
 * Every master's own view (gossip makes them agree within the cluster's node timeout): "ok" when each answers
 * and sees every slot served, "unreachable" when none answers, "degraded" in between.
 */
async function clusterHealth(client: Cluster): Promise<RedisHealth> {
  const masters = client.status === "ready" ? client.nodes("master") : [];
  if (masters.length === 0) return "unreachable";
  const views = await Promise.all(
    masters.map((node) =>
      withTimeout(
        node.cluster("INFO").then((info) => {
          const field = (name: string) => new RegExp(`^${name}:(\\w+)`, "m").exec(String(info))?.[1];
          return field("cluster_state") === "ok" && Number(field("cluster_slots_ok")) === CLUSTER_SLOTS ? "ok" : "degraded";
        }),
      ),
    ),
  );
  if (views.every((view) => view === "ok")) return "ok";
  return views.every((view) => view === "unreachable") ? "unreachable" : "degraded";
}

function withTimeout(check: Promise<RedisHealth>, ms = HEALTH_TIMEOUT_MS): Promise<RedisHealth> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<RedisHealth>((resolve) => (timer = setTimeout(() => resolve("unreachable"), ms)));
  return Promise.race([check.catch((): RedisHealth => "unreachable"), timeout]).finally(() => clearTimeout(timer));
}

/** Whether the client is (or becomes, within `ms`) ready for commands. */
function readyWithin(client: RedisClient, ms: number): Promise<boolean> {
  if (client.status === "ready") return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      client.off("ready", onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), ms);
    client.once("ready", onReady);
  });
}
