import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisConnections } from "../../src/infra/redis.ts";
import { createLogger } from "../../src/logger.ts";
import { createRateLimiter, type GatewayRateLimiter } from "../../src/rate-limit/limiter.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";

// A credential's check on Redis is one script (peek at the IP, spend the credential): it must keep the two-step
// rules and share its counters with the library's own consume/peek.
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
});
