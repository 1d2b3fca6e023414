import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisConnections } from "../../src/infra/redis.ts";
import { createLogger } from "../../src/logger.ts";
import { createRateLimiter, type GatewayRateLimiter } from "../../src/rate-limit/limiter.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";

// A credential's check on Redis is one script (peek at the IP, spend the credential): it must keep the two-step
// rules and share its counters with the library's own consume/peek. Requests arriving while a call is in flight are
// admitted together by the next call (src/infra/group-commit.ts), deciding what they would have one by one.
describe("rate limiter on Redis: a credential's admission in one round trip", () => {
  let redis: RedisServer;
  let connections: RedisConnections;
  let limiter: GatewayRateLimiter;
  const logger = createLogger("silent");

  beforeAll(async () => {
    redis = await startRedis();
    connections = new RedisConnections(redis.url, logger);
    limiter = await createRateLimiter({ perKeyPerMinute: 3, perIpPerMinute: 2, redis: connections, logger });
  });
  afterAll(async () => {
    await connections.close();
    await redis.stop();
  });

  it("spends the credential's budget, counted with consumeApiKey, and refuses past it", async () => {
    const key = "sk_test_admitAAAAAAAAAAAAAAAAAA";
    expect(await limiter.admitCredential("192.0.2.10", key)).toMatchObject({ limiter: "api_key", allowed: true, limit: 3, remaining: 2 });
    expect(await limiter.consumeApiKey(key)).toMatchObject({ allowed: true, remaining: 1 });
    const last = await limiter.admitCredential("192.0.2.10", key);
    expect(last).toMatchObject({ allowed: true, remaining: 0 });
    expect(last.resetSeconds).toBeGreaterThan(0);
    expect(last.resetSeconds).toBeLessThanOrEqual(60);
    expect(await limiter.admitCredential("192.0.2.10", key)).toMatchObject({ limiter: "api_key", allowed: false, remaining: 0 });
    // Nothing of the IP's budget was spent.
    expect(await limiter.peekIp("192.0.2.10")).toMatchObject({ allowed: true, remaining: 2 });
  });

  it("refuses a blocked IP on its own state without spending the credential's budget", async () => {
    const key = "sk_test_admitBBBBBBBBBBBBBBBBBB";
    await limiter.consumeIp("192.0.2.11");
    expect(await limiter.admitCredential("192.0.2.11", key)).toMatchObject({ limiter: "api_key", allowed: true, remaining: 2 });
    await limiter.consumeIp("192.0.2.11");
    const refused = await limiter.admitCredential("192.0.2.11", key);
    expect(refused).toMatchObject({ limiter: "ip", allowed: false, limit: 2, remaining: 0 });
    expect(refused.resetSeconds).toBeGreaterThan(0);
    // The key's count is where the allowed request left it.
    expect(await limiter.consumeApiKey(key)).toMatchObject({ allowed: true, remaining: 1 });
  });

  /** How many script calls Redis ran (EVAL and EVALSHA), from INFO commandstats. */
  async function scriptCalls(): Promise<number> {
    const info = (await connections.client("test-stats").info("commandstats")) as string;
    return [...info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  }

  it("admits concurrent requests in fewer script calls, exactly the budget, and a blocked IP's requests among them refused", async () => {
    const manyLimiter = await createRateLimiter({ perKeyPerMinute: 25, perIpPerMinute: 1, redis: connections, logger });
    const key = "sk_test_admitCCCCCCCCCCCCCCCCCC";
    await manyLimiter.consumeIp("192.0.2.13"); // this IP has used up its budget of failed requests
    const callsBefore = await scriptCalls();
    const ips = Array.from({ length: 40 }, (_, i) => (i % 4 === 3 ? "192.0.2.13" : "192.0.2.12"));
    const states = await Promise.all(ips.map((ip) => manyLimiter.admitCredential(ip, key)));
    const calls = (await scriptCalls()) - callsBefore;
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(calls).toBeLessThan(40);
    // The blocked IP's ten are refused on its state and spend nothing; the other thirty spend the key's 25, in order.
    expect(states.filter((s, i) => ips[i] === "192.0.2.13").every((s) => s.limiter === "ip" && !s.allowed)).toBe(true);
    const spent = states.filter((s, i) => ips[i] === "192.0.2.12");
    expect(spent.map((s) => s.allowed)).toEqual([...Array(25).fill(true), ...Array(5).fill(false)]);
    expect(spent.slice(0, 25).map((s) => s.remaining)).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));
    expect(await manyLimiter.peekIp("192.0.2.12")).toMatchObject({ allowed: true, remaining: 1 });
  });
});
