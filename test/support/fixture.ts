import { afterAll, beforeAll } from "vitest";
import { startTestGateway, type StartOptions, type TestGateway } from "./gateway.ts";
import { startRedisCluster, type RedisCluster } from "./redis-cluster.ts";
import { startRedis, type RedisServer } from "./redis.ts";

export interface FixtureOptions extends StartOptions {
  /** Start a Redis of its own for the gateway (REDIS_URL), stopped after it. */
  redis?: boolean;
}

/**
 * The gateway fixture of a describe block (or a file): starts the gateway in beforeAll and hands it to `ready`
 * (assign it, seed merchants), and closes it (and its Redis) in afterAll, so a file does not write those hooks again.
 */
export function useTestGateway(options: FixtureOptions, ready: (gw: TestGateway, redis: RedisServer | undefined) => void | Promise<void>): void {
  let gw: TestGateway | undefined;
  let redis: RedisServer | undefined;
  beforeAll(async () => {
    const { redis: withRedis, ...start } = options;
    if (withRedis) redis = await startRedis();
    gw = await startTestGateway({ ...start, env: { ...start.env, ...(redis ? { REDIS_URL: redis.url } : {}) } });
    await ready(gw, redis);
  });
  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });
}

export interface GatewaysOptions extends Omit<StartOptions, "database"> {
  /** How many instances share the one database (default 2). */
  count?: number;
  /** A Redis of their own for them all (REDIS_URL), or a Redis Cluster (REDIS_CLUSTER_NODES); stopped after them. */
  redis?: boolean | "cluster";
  /** Options of one instance only (its own logger), by position. */
  each?: Partial<StartOptions>[];
}

export interface Gateways {
  /** The instances, the first owning the database. */
  gateways: TestGateway[];
  /** With `redis: true`. */
  redis: RedisServer | undefined;
  /** With `redis: "cluster"`. */
  cluster: RedisCluster | undefined;
}

/**
 * Several instances of the gateway on one database, as a deployment scaled out runs, sharing Redis when asked: starts
 * them in beforeAll and hands them to `ready`, and closes them (the database's owner last) and their Redis in afterAll.
 * Answers the same object, filled in once beforeAll has run.
 */
export function withGateways(options: GatewaysOptions, ready?: (started: Gateways) => void | Promise<void>): Gateways {
  const started: Gateways = { gateways: [], redis: undefined, cluster: undefined };
  beforeAll(async () => {
    const { count = 2, redis, each = [], ...start } = options;
    if (redis === "cluster") started.cluster = await startRedisCluster();
    else if (redis) started.redis = await startRedis();
    const shared: Record<string, string> = started.cluster ? { REDIS_CLUSTER_NODES: started.cluster.nodes } : started.redis ? { REDIS_URL: started.redis.url } : {};
    for (let i = 0; i < count; i++) {
      const first = started.gateways[0];
      started.gateways.push(await startTestGateway({ ...start, ...each[i], ...(first ? { database: first.database } : {}), env: { ...shared, ...start.env } }));
    }
    await ready?.(started);
  });
  afterAll(async () => {
    for (const gw of [...started.gateways].reverse()) await gw.close();
    await started.redis?.stop();
    await started.cluster?.stop();
  });
  return started;
}
