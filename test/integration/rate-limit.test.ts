import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { apiClient, startTestGateway, type HttpResult, type TestGateway } from "../support/gateway.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";

const RateLimitViewer = graphql(`
  query RateLimitViewer {
    viewer {
      name
    }
  }
`);

const IP_BUDGET = 5;

function rateHeaders(res: HttpResult) {
  return {
    limit: Number(res.headers.get("x-ratelimit-limit")),
    remaining: Number(res.headers.get("x-ratelimit-remaining")),
    reset: Number(res.headers.get("x-ratelimit-reset")),
  };
}

/** Each test speaks from its own client address (the gateway trusts X-Forwarded-For from loopback here). */
let nextIp = 1;
const freshIp = () => `203.0.113.${nextIp++}`;

/** A 429 as documented: envelope, Retry-After equal to the wait in the message, and the budget headers. */
function expectRateLimited(res: HttpResult, limit: number) {
  expect(res.status).toBe(429);
  const retryAfter = Number(res.headers.get("retry-after"));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(res.body).toEqual({ status: "error", message: `Rate limit exceeded, retry in ${retryAfter} seconds`, code: "rate_limited" });
  expect(rateHeaders(res)).toEqual({ limit, remaining: 0, reset: retryAfter });
}

describe.each(["memory", "redis"] as const)("rate limiting (%s counters)", (store) => {
  let gw: TestGateway;
  let redis: RedisServer | undefined;
  let sql: string[] = [];

  beforeAll(async () => {
    if (store === "redis") redis = await startRedis();
    gw = await startTestGateway({
      env: {
        RATE_LIMIT_IP_PER_MINUTE: String(IP_BUDGET),
        TRUST_PROXY: "127.0.0.1",
        ...(redis ? { REDIS_URL: redis.url } : {}),
        // No background work: the statements recorded are the requests' own (a scheduled job ran amid them once).
        JOBS_ENABLED: "false",
      },
      onQuery: (statement) => sql.push(statement),
    });
  });
  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });

  const client = (key: string | undefined, ip = freshIp()) => {
    const api = apiClient(gw.url, key);
    const headers = { "x-forwarded-for": ip };
    return {
      get: (path: string) => api.get(path, headers),
      graphql: () => api.graphql(RateLimitViewer, undefined, headers),
    };
  };

  it("uses the configured store", () => {
    expect(gw.gateway.rateLimiter?.store).toBe(store);
  });

  it("reports the budget on ordinary responses, decreasing with each request", async () => {
    const { testKey } = await gw.createMerchant();
    const api = client(testKey);
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const res = await api.get("/v1/status");
      expect(res.status).toBe(200);
      seen.push(rateHeaders(res));
    }
    expect(seen.map((h) => h.limit)).toEqual([100, 100, 100]);
    expect(seen.map((h) => h.remaining)).toEqual([99, 98, 97]);
    for (const { reset } of seen) {
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
  });

  it("answers the 101st request in a minute with 429, Retry-After and the X-RateLimit headers", async () => {
    const { testKey } = await gw.createMerchant();
    const api = client(testKey);
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const results = await Promise.all(Array.from({ length: 10 }, () => api.get("/v1/status")));
      statuses.push(...results.map((r) => r.status));
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expectRateLimited(await api.get("/v1/status"), 100);
    // The key's budget is spent on every API path, GraphQL included.
    expectRateLimited(await api.graphql(), 100);
  });

  it("counts REST and GraphQL against one budget per key, and each key separately", async () => {
    const merchant = await gw.createMerchant();
    const api = client(merchant.testKey);
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const rest = await api.get("/v1/status");
      const gql = await api.graphql();
      expect([rest.status, gql.status]).toEqual([200, 200]);
      expect(gql.body.data?.viewer.name).toBe(merchant.name);
      remaining.push(rateHeaders(rest).remaining, rateHeaders(gql).remaining);
    }
    expect(remaining).toEqual([99, 98, 97, 96, 95, 94]);
    // The live key of the same merchant has its own budget.
    expect(rateHeaders(await client(merchant.liveKey).get("/v1/status")).remaining).toBe(99);
  });

  it("limits requests with unknown keys per IP, then refuses even a valid key from that IP without a lookup", async () => {
    const { testKey } = await gw.createMerchant();
    const guesser = freshIp();
    const remaining: number[] = [];
    for (let i = 0; i < IP_BUDGET; i++) {
      const res = await client(`sk_test_guess${String(i).padStart(12, "0")}xyz`, guesser).get("/v1/status");
      expect(res.status).toBe(401);
      expect(rateHeaders(res).limit).toBe(IP_BUDGET);
      remaining.push(rateHeaders(res).remaining);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    expectRateLimited(await client("sk_test_anotherguessAAAAAAAAAA", guesser).get("/v1/status"), IP_BUDGET);

    // Policy: a blocked IP is refused before the key is looked up, so a valid key from it waits too.
    sql = [];
    expectRateLimited(await client(testKey, guesser).get("/v1/status"), IP_BUDGET);
    expectRateLimited(await client(testKey, guesser).graphql(), IP_BUDGET);
    expect(sql).toEqual([]);

    // Another address is not affected (and its request does reach the database, so the check above means something).
    expect((await client(testKey).get("/v1/status")).status).toBe(200);
    expect(sql.length).toBeGreaterThan(0);
    // /health and /ready are never limited.
    const health = await apiClient(gw.url).get("/health", { "x-forwarded-for": guesser });
    expect(health.status).toBe(200);
    expect(health.headers.get("x-ratelimit-limit")).toBeNull();
    expect((await apiClient(gw.url).get("/ready", { "x-forwarded-for": guesser })).status).toBe(200);
  });

  it("spends the IP budget on requests without a key or with a malformed one, on REST and GraphQL", async () => {
    const ip = freshIp();
    const results = [
      await client(undefined, ip).get("/v1/status"),
      await client("not-a-key", ip).get("/api/transactions/list"),
      await client(undefined, ip).graphql(),
      await client("sk_live_short", ip).graphql(),
      await client(undefined, ip).get("/api/unknown-route"),
    ];
    expect(results.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    expect(results.map((r) => rateHeaders(r).remaining)).toEqual([4, 3, 2, 1, 0]);
    expectRateLimited(await client(undefined, ip).get("/v1/status"), IP_BUDGET);
  });

  it("does not spend the IP budget on requests with a valid key", async () => {
    const { testKey } = await gw.createMerchant();
    const ip = freshIp();
    for (let i = 0; i < IP_BUDGET + 2; i++) expect((await client(testKey, ip).get("/v1/status")).status).toBe(200);
    expect(rateHeaders(await client(undefined, ip).get("/v1/status")).remaining).toBe(IP_BUDGET - 1);
  });
});

describe("rate limiting without TRUST_PROXY", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_IP_PER_MINUTE: "2" } });
  });
  afterAll(() => gw?.close());

  it("ignores X-Forwarded-For, so a client cannot pick a fresh address per guess", async () => {
    const guess = (ip: string) => apiClient(gw.url).get("/v1/status", { "x-forwarded-for": ip });
    expect((await guess("198.51.100.1")).status).toBe(401);
    expect((await guess("198.51.100.2")).status).toBe(401);
    expectRateLimited(await guess("198.51.100.3"), 2);
  });

  it("can be switched off (RATE_LIMIT_ENABLED=false): no budget and no headers", async () => {
    const off = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", RATE_LIMIT_IP_PER_MINUTE: "1" } });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await apiClient(off.url).get("/v1/status");
        expect(res.status).toBe(401);
        expect(res.headers.get("x-ratelimit-limit")).toBeNull();
      }
    } finally {
      await off.close();
    }
  });
});
