import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { chargeOperation, createRateLimiter, rateLimitHeaders } from "../../src/rate-limit/limiter.ts";

describe("rate limiter (memory store)", () => {
  it("charges subscribe operations against the key's budget", async () => {
    const limiter = await createRateLimiter({ perKeyPerMinute: 2, perIpPerMinute: 1, logger: createLogger("silent") });
    const key = "sk_test_subscriberAAAAAAAAAAAA";
    expect(await chargeOperation(limiter, key)).toBeUndefined();
    expect(await chargeOperation(limiter, key)).toBeUndefined();
    const refused = await chargeOperation(limiter, key);
    expect(refused).toMatchObject({ code: "rate_limited", status: 429 });
    expect(refused?.message).toMatch(/^Rate limit exceeded, retry in \d+ seconds$/);
    // The same budget as HTTP requests with that key; other keys are separate.
    expect((await limiter.consumeApiKey(key)).allowed).toBe(false);
    expect((await limiter.consumeApiKey(`${key}B`)).remaining).toBe(1);
    expect(await chargeOperation(undefined, key)).toBeUndefined();
  });

  it("peeks at an IP's budget without spending it", async () => {
    const limiter = await createRateLimiter({ perKeyPerMinute: 5, perIpPerMinute: 2, logger: createLogger("silent") });
    expect(await limiter.peekIp("192.0.2.1")).toMatchObject({ allowed: true, remaining: 2 });
    await limiter.consumeIp("192.0.2.1");
    expect(await limiter.peekIp("192.0.2.1")).toMatchObject({ allowed: true, remaining: 1 });
    expect(await limiter.peekIp("192.0.2.1")).toMatchObject({ allowed: true, remaining: 1 });
    await limiter.consumeIp("192.0.2.1");
    const blocked = await limiter.peekIp("192.0.2.1");
    expect(blocked).toMatchObject({ allowed: false, remaining: 0, limit: 2 });
    expect(Number(rateLimitHeaders(blocked)["x-ratelimit-reset"])).toBeGreaterThan(0);
  });
});
