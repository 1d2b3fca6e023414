import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { withGateways } from "../support/fixture.ts";
import { expectOneSharedBudget, memoryLogger, remaining } from "../support/shared-budget.ts";
import { apiClient, type TestGateway } from "../support/gateway.ts";
import type { RedisServer } from "../support/redis.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";

const BUDGET = 10;

const unreachable = /Redis is unreachable/;
const reachableAgain = /Redis is reachable again/;

const waitFor = (condition: () => boolean, what: string) => waitUntil(condition, what, 15_000);


describe("rate limiting shared by two instances through Redis", () => {
  let redis: RedisServer;
  let a: TestGateway;
  let b: TestGateway;
  const logsA = memoryLogger();
  const logsB = memoryLogger();

  // Same PostgreSQL database, same Redis.
  withGateways({ redis: true, env: { RATE_LIMIT_PER_MINUTE: String(BUDGET) }, each: [{ logger: logsA.logger }, { logger: logsB.logger }] }, (started) => {
    [a, b] = started.gateways as [TestGateway, TestGateway];
    redis = started.redis!;
  });

  it("runs both instances on one PostgreSQL database with Redis counters", async () => {
    expect(a.gateway.db.backend).toBe("postgres");
    expect(b.database.databaseUrl).toBe(a.database.databaseUrl);
    expect([a.gateway.rateLimiter?.store, b.gateway.rateLimiter?.store]).toEqual(["redis", "redis"]);
  });

  it("counts one budget per key across both instances", async () => {
    // Created through A, authenticated by B as well: one database.
    const { testKey } = await a.createMerchant();
    await expectOneSharedBudget([a, b], testKey, BUDGET);
  });

  it("keeps serving on in-memory counters while Redis is down, with one warning per instance, and returns to Redis", async () => {
    const { testKey } = await a.createMerchant();
    await redis.pause();
    try {
      // Every request is still answered and still limited, per instance, by the insurance limiter.
      for (const gw of [a, b]) {
        for (let i = 0; i < BUDGET; i++) {
          const res = await apiClient(gw.url, testKey).get("/v1/status");
          expect(res.status).toBe(200);
          expect(remaining(res)).toBe(BUDGET - 1 - i);
        }
        expect((await apiClient(gw.url, testKey).get("/v1/status")).status).toBe(429);
      }
      await waitFor(() => logsA.count("warn", unreachable) > 0 && logsB.count("warn", unreachable) > 0, "the warnings");
      // Let ioredis fail a few reconnects: still one warning each, not one per request or per retry.
      await expectNothingMoreWithin(1500, () => [logsA.count("warn", unreachable), logsB.count("warn", unreachable)], "no second warning while ioredis reconnects");
      expect([logsA.count("warn", unreachable), logsB.count("warn", unreachable)]).toEqual([1, 1]);
    } finally {
      await redis.resume();
    }

    await waitFor(() => logsA.count("info", reachableAgain) === 1 && logsB.count("info", reachableAgain) === 1, "the recovery notices");
    const { testKey: afterRecovery } = await a.createMerchant();
    await expectOneSharedBudget([a, b], afterRecovery, BUDGET);

    // The counters are in Redis again, under a hash of the key, never the key itself.
    const inspect = new Redis(redis.url);
    try {
      const keys = await inspect.keys("gw:rl:*");
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.join(" ")).not.toContain(afterRecovery);
      expect(keys.join(" ")).not.toMatch(/sk_(test|live)_/);
    } finally {
      inspect.disconnect();
    }
    expect([logsA.count("warn", unreachable), logsB.count("warn", unreachable)]).toEqual([1, 1]);
  });
});
