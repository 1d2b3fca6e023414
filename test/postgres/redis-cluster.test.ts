import { Cluster } from "ioredis";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { createRedisTokenStore } from "../../src/providers/mpesa/token-store.ts";
import { graphql } from "../gql/index.ts";
import { withGateways } from "../support/fixture.ts";
import { expectOneSharedBudget, memoryLogger, remaining } from "../support/shared-budget.ts";
import { apiClient, createSandboxMerchant, SANDBOX_CARD, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { runCli } from "../support/process.ts";
import type { RedisCluster } from "../support/redis-cluster.ts";
import { collect, wsClient } from "../support/subscriptions.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { until, waitUntil } from "../support/wait.ts";

/**
 * Two gateway instances on one PostgreSQL and one Redis Cluster (three masters, no replicas, REDIS_CLUSTER_NODES):
 * rate limits, live events and key revocations cross instances as with one Redis server, and the gateway rides out
 * a master going down and coming back without being restarted.
 */
const BUDGET = 10;

/**
 * The instances keep verified keys this long (API_KEY_CACHE_TTL_MS): far beyond any wait of the test, so a revoked
 * key refused within EVENTUALLY_MS was dropped by the revocation message, however busy the machine.
 */
const KEY_CACHE_TTL_MS = 10 * 60_000;

/**
 * The rate limiter's Redis commands time out after 1 s (commandTimeout in src/rate-limit/limiter.ts): a request that
 * waited for a refused command takes at least that. A single request may take as long on a busy machine, so the
 * typical (median) one must stay below it.
 */
const RATE_LIMIT_COMMAND_TIMEOUT_MS = 1000;

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

// The same document as subscriptions-multi.test.ts (so the generated types need no new entry).
const Everything = graphql(`
  subscription EverythingAcrossInstances {
    transactionEvents(ready: true) {
      transaction {
        reference
        status
      }
    }
  }
`);

const unreachable = /Redis is unreachable/;
const reachableAgain = /Redis is reachable again/;


describe("REDIS_CLUSTER_NODES", () => {
  it("takes host:port pairs, IPv6 in brackets", () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: " 10.0.0.1:6379, redis-b.internal:7001,[::1]:7002 " }).redisClusterNodes).toEqual([
      { host: "10.0.0.1", port: 6379 },
      { host: "redis-b.internal", port: 7001 },
      { host: "::1", port: 7002 },
    ]);
    expect(loadConfig({}).redisClusterNodes).toBeUndefined();
  });

  it.each(["10.0.0.1", "10.0.0.1:6379,", "redis://10.0.0.1:6379", "10.0.0.1:0", "10.0.0.1:70000", "::1:6379"])("refuses %j at start", (value) => {
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: value })).toThrow(/REDIS_CLUSTER_NODES: must be comma-separated host:port pairs/);
  });

  it("refuses REDIS_URL and REDIS_CLUSTER_NODES together, and counts as Redis for WORKERS", () => {
    expect(() => loadConfig({ REDIS_URL: "redis://x:6379", REDIS_CLUSTER_NODES: "x:7000" })).toThrow(ConfigError);
    expect(() => loadConfig({ REDIS_URL: "redis://x:6379", REDIS_CLUSTER_NODES: "x:7000" })).toThrow(/REDIS_URL .* or REDIS_CLUSTER_NODES .*, not both/);
    const scaled = { WORKERS: "2", DATABASE_URL: "postgres://db/gw", ENCRYPTION_KEY: "a".repeat(64) };
    expect(() => loadConfig(scaled)).toThrow(/needs REDIS_URL or REDIS_CLUSTER_NODES/);
    expect(loadConfig({ ...scaled, REDIS_CLUSTER_NODES: "x:7000" }).redisClusterNodes).toEqual([{ host: "x", port: 7000 }]);
  });
});

describe("Redis Cluster shared by two instances", () => {
  let cluster: RedisCluster;
  let a: TestGateway;
  let b: TestGateway;
  let merchant: TestMerchant;
  const logsA = memoryLogger();
  const logsB = memoryLogger();

  const env = { RATE_LIMIT_PER_MINUTE: String(BUDGET), API_KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS) };
  withGateways({ redis: "cluster", env, each: [{ logger: logsA.logger }, { logger: logsB.logger }] }, async (started) => {
    [a, b] = started.gateways as [TestGateway, TestGateway];
    cluster = started.cluster!;
    merchant = await createSandboxMerchant(a, "Clustered");
  });

  const status = async (gw: TestGateway, key: string) => (await apiClient(gw.url, key).get("/v1/status")).status;
  const redisReadiness = async () => Promise.all([a, b].map(async (gw) => (await apiClient(gw.url).get("/ready")).body.redis as string));

  async function payOnA(m: TestMerchant): Promise<string> {
    const init = await apiClient(a.url, m.testKey).post("/api/transactions/initialize", { amount: 990, email: "c@example.com" });
    expect(init.status).toBe(200);
    const reference = init.body.reference as string;
    expect((await apiClient(a.url).post(`/payment/checkout/${reference}/pay`, SANDBOX_CARD)).status).toBe(200);
    return reference;
  }

  it("runs both instances on the cluster client, and /ready reports the cluster whole", async () => {
    expect(a.gateway.redis?.client("rate-limit")).toBeInstanceOf(Cluster);
    expect([a.gateway.rateLimiter?.store, b.gateway.rateLimiter?.store]).toEqual(["redis", "redis"]);
    const ready = await apiClient(a.url).get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ database: "ok", redis: "ok" });
  });

  it("counts one budget per key across both instances, with the counters spread over the masters", async () => {
    const keys = await Promise.all(Array.from({ length: 6 }, () => a.createMerchant().then((m) => m.testKey)));
    for (const key of keys) await expectOneSharedBudget([a, b], key, BUDGET);
    // Six budgets, three masters: no hash tag pins every counter to one slot (odds of all on one node: 1 in 243).
    const holders = await Promise.all(
      cluster.ports.map(async (port) => {
        const node = (a.gateway.redis!.client("rate-limit") as Cluster).nodes("master").find((n) => n.options.port === port)!;
        return (await node.keys("gw:rl:key:*")).length;
      }),
    );
    expect(holders.reduce((x, y) => x + y)).toBeGreaterThanOrEqual(keys.length);
    expect(holders.filter((n) => n > 0).length).toBeGreaterThan(1);
  });

  it("a subscriber on B receives a status change made through A", async () => {
    const client = wsClient(b.url, merchant.testKey);
    const sub = collect(client, Everything);
    await sub.ready();
    const reference = await payOnA(merchant);
    await sub.waitFor(2);
    expect(sub.results.map((r) => r.data?.transactionEvents.transaction)).toEqual([
      { reference, status: "pending" },
      { reference, status: "completed" },
    ]);
    sub.dispose();
    await client.dispose();
  });

  it("an API key revoked on A is refused by B at once", async () => {
    const issued = await a.gateway.services.merchants.createKey(merchant.id, "test");
    expect(await status(a, issued.plaintext)).toBe(200);
    expect(await status(b, issued.plaintext)).toBe(200); // now in B's cache (KEY_CACHE_TTL_MS)
    await a.gateway.services.merchants.revokeKey(issued.prefix);
    await until(() => status(b, issued.plaintext), (s) => s === 401, EVENTUALLY_MS);
  });

  it("a key revoked with the CLI, through the cluster, is refused by both at once", async () => {
    const issued = await a.gateway.services.merchants.createKey(merchant.id, "test");
    expect([await status(a, issued.plaintext), await status(b, issued.plaintext)]).toEqual([200, 200]);
    const env = { ...a.database.env, ENCRYPTION_KEY: a.database.encryptionKeyHex, REDIS_CLUSTER_NODES: cluster.nodes };
    const { code, output } = await runCli(["key", "revoke", issued.prefix], env);
    expect(code, output).toBe(0);
    // Well within the cache's lifetime (KEY_CACHE_TTL_MS): only the revocation message can have dropped it.
    await until(() => Promise.all([status(a, issued.plaintext), status(b, issued.plaintext)]), (s) => s.every((x) => x === 401), EVENTUALLY_MS);
  });

  it("shares Daraja tokens through the cluster, its compare-and-delete script included", async () => {
    const [onA, onB] = [createRedisTokenStore(a.gateway.redis!), createRedisTokenStore(b.gateway.redis!)];
    const token = { token: "tok-1", expiresAt: Date.now() + 60_000 };
    await onA.set("app-1", token);
    expect(await onB.get("app-1")).toEqual(token);
    await onB.invalidate("app-1", "tok-other"); // another instance's newer token survives
    expect(await onA.get("app-1")).toEqual(token);
    await onB.invalidate("app-1", "tok-1");
    expect(await onA.get("app-1")).toBeNull();
  });

  it("keeps answering while a master is down, and limits, events and revocations work again once it is back", async () => {
    // The master B's event subscriber listens on: the hardest case for live events (ioredis moves it to another node).
    const subscriberPort = (b.gateway.redis!.client("pubsub-subscribe") as unknown as { subscriber: { getInstance(): { options: { port: number } } } }).subscriber.getInstance().options.port;
    const down = cluster.ports.indexOf(subscriberPort);
    expect(down).toBeGreaterThanOrEqual(0);
    const client = wsClient(b.url, merchant.testKey);
    const before = collect(client, Everything);
    await before.ready();

    // What the key cache relies on to drop what a moving subscriber may have missed (told each time it reconnects).
    let reconnected = 0;
    b.gateway.redis!.onSubscriberReady(b.gateway.redis!.client("pubsub-subscribe"), () => reconnected++);

    await cluster.kill(down);
    try {
      await waitUntil(() => reconnected > 0, "B's subscriber connection to move to a surviving master");
      // Without a replica to promote, the others mark it failed after cluster-node-timeout and the cluster is down.
      await waitUntil(async () => (await cluster.states()).every((s) => s === "fail"), "the cluster to notice");
      expect(await redisReadiness()).toEqual(["degraded", "degraded"]);

      // As with a single Redis outage: every request answered, still limited, per instance, in memory.
      const { testKey } = await a.createMerchant();
      const took: number[] = [];
      for (const gw of [a, b]) {
        for (let i = 0; i < BUDGET; i++) {
          const started = Date.now();
          const res = await apiClient(gw.url, testKey).get("/v1/status");
          took.push(Date.now() - started);
          expect(res.status).toBe(200);
          expect(remaining(res)).toBe(BUDGET - 1 - i);
        }
        expect(await status(gw, testKey)).toBe(429);
      }
      expect(median(took), `a refused cluster command fails over at once, not after its timeout (took ${took.join(", ")} ms)`).toBeLessThan(RATE_LIMIT_COMMAND_TIMEOUT_MS);
      await waitUntil(() => logsA.count("warn", unreachable) > 0 && logsB.count("warn", unreachable) > 0, "the warnings");

      // Plain PUBLISH is not bound to a slot: events still cross instances, through the surviving masters.
      const during = await payOnA(merchant);
      await before.waitFor(2);
      expect(before.results.map((r) => r.data?.transactionEvents.transaction.reference)).toEqual([during, during]);
    } finally {
      await cluster.restart(down);
    }

    // Same gateways, not restarted.
    await until(redisReadiness, (r) => r.every((x) => x === "ok"));
    await waitUntil(() => logsA.count("info", reachableAgain) > 0 && logsB.count("info", reachableAgain) > 0, "the recovery notices");
    expect([logsA.count("warn", unreachable), logsB.count("warn", unreachable)]).toEqual([1, 1]);
    expect([logsA.count("info", reachableAgain), logsB.count("info", reachableAgain)]).toEqual([1, 1]);
    const { testKey: afterRecovery } = await a.createMerchant();
    await expectOneSharedBudget([a, b], afterRecovery, BUDGET);

    const after = await payOnA(merchant);
    await before.waitFor(4);
    expect(before.results.slice(2).map((r) => r.data?.transactionEvents.transaction)).toEqual([
      { reference: after, status: "pending" },
      { reference: after, status: "completed" },
    ]);
    before.dispose();
    await client.dispose();

    const issued = await a.gateway.services.merchants.createKey(merchant.id, "test");
    expect(await status(b, issued.plaintext)).toBe(200);
    await a.gateway.services.merchants.revokeKey(issued.prefix);
    await until(() => status(b, issued.plaintext), (s) => s === 401, EVENTUALLY_MS);
  });
});
