import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { runCli } from "../support/process.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * How long the instances keep a verified key (API_KEY_CACHE_TTL_MS) where a revocation must reach them by message:
 * far beyond any wait of the test, so a key refused within EVENTUALLY_MS was dropped by the message.
 */
const KEY_CACHE_TTL_MS = 10 * 60_000;
/** The lifetime of the instance without Redis: short, so it expires within the test. */
const SHORT_KEY_CACHE_TTL_MS = 500;
/** Half the default lifetime (30 s): a revocation seen by then came from the short one, not the default. */
const EXPIRED_WITHIN_MS = 15_000;

/**
 * Verified API keys are cached in each instance, so a request does not look its key up every time,
 * and a revocation still takes effect at once on every instance: the CLI publishes it through Redis.
 */
describe("API key cache", () => {
  let database: TestDatabase;
  let redis: RedisServer;
  let one: TestGateway;
  let two: TestGateway;
  let merchant: TestMerchant;
  let statements: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    redis = await startRedis();
    const env = { REDIS_URL: redis.url, RATE_LIMIT_ENABLED: "false", API_KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS) };
    one = await startTestGateway({ database, env, onQuery: (sql) => statements.push(sql) });
    two = await startTestGateway({ database, env });
    merchant = await one.createMerchant();
  });

  afterAll(async () => {
    await two?.close();
    await one?.close();
    await redis?.stop();
    await database?.drop();
  });

  const status = async (gw: TestGateway, key: string) => (await apiClient(gw.url, key).get("/v1/status")).status;

  it("looks a key up once, then serves it from memory", async () => {
    const api = apiClient(one.url, merchant.testKey);
    // Statements on api_keys only: the gateway's job poller runs its own now and then, more of them on a busy machine.
    const keyLookups = () => statements.filter((sql) => /"api_keys"/.test(sql));
    statements = [];
    expect((await api.get("/v1/status")).status).toBe(200);
    expect(keyLookups(), statements.join("\n---\n")).toHaveLength(1);
    statements = [];
    expect((await api.get("/v1/status")).status).toBe(200);
    expect(keyLookups(), statements.join("\n---\n")).toEqual([]);
  });

  it("a key revoked with the CLI is refused at once by every instance that had it cached", async () => {
    const issued = await one.gateway.services.merchants.createKey(merchant.id, "test");
    expect(await status(one, issued.plaintext)).toBe(200);
    expect(await status(two, issued.plaintext)).toBe(200);

    const { code, output } = await runCli(["key", "revoke", issued.prefix], { ...database.env, ENCRYPTION_KEY: database.encryptionKeyHex, REDIS_URL: redis.url });
    expect(code, output).toBe(0);
    // Well within the cache's lifetime (KEY_CACHE_TTL_MS): only the revocation message can have dropped it.
    await until(() => Promise.all([status(one, issued.plaintext), status(two, issued.plaintext)]), (s) => s.every((x) => x === 401), EVENTUALLY_MS);
    expect(await status(one, merchant.testKey)).toBe(200);
  });

  it("without Redis, a revocation made elsewhere takes effect within API_KEY_CACHE_TTL_MS", async () => {
    const alone = await startTestGateway({ database, env: { RATE_LIMIT_ENABLED: "false", API_KEY_CACHE_TTL_MS: String(SHORT_KEY_CACHE_TTL_MS) } });
    try {
      const issued = await alone.gateway.services.merchants.createKey(merchant.id, "test");
      expect(await status(alone, issued.plaintext)).toBe(200);
      const { code, output } = await runCli(["key", "revoke", issued.prefix], { ...database.env, ENCRYPTION_KEY: database.encryptionKeyHex });
      expect(code, output).toBe(0);
      await until(() => status(alone, issued.plaintext), (s) => s === 401, EXPIRED_WITHIN_MS);
    } finally {
      await alone.close();
    }
  });
});
