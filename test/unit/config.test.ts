import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";

describe("configuration", () => {
  it("applies the documented defaults on an empty environment", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      host: "0.0.0.0",
      publicBaseUrl: "http://localhost:3000",
      databaseUrl: undefined,
      dataDir: "./data",
      redisUrl: undefined,
      logLevel: "info",
      nodeEnv: "development",
      encryptionKey: undefined,
      trustProxy: false,
      rateLimit: { enabled: true, perKeyPerMinute: 100, perIpPerMinute: 30 },
      graphql: { maxDepth: 8, maxCost: 5000, maxAliases: 15, maxTokens: 1000, maxDirectives: 50, introspection: true },
    });
  });

  it("retries webhooks for more than 3 days in live mode and 8 times in test mode, unless WEBHOOK_RETRY_SCHEDULE says otherwise", () => {
    const { retrySchedule } = loadConfig({}).webhooks;
    const days = (delays: number[]) => delays.reduce((a, b) => a + b, 0) / 86_400_000;
    expect(retrySchedule.live[0]).toBe(0);
    expect(days(retrySchedule.live)).toBeGreaterThan(3);
    expect(retrySchedule.test).toHaveLength(8);
    // Each wait at least as long as the one before: backoff, not a fixed rhythm.
    for (const schedule of [retrySchedule.live, retrySchedule.test]) {
      expect(schedule.every((delay, i) => i === 0 || delay >= schedule[i - 1]!)).toBe(true);
    }
    const custom = loadConfig({ WEBHOOK_RETRY_SCHEDULE: "0, 250ms, 5s, 2m, 1h, 1d" }).webhooks.retrySchedule;
    expect(custom).toEqual({ test: [0, 250, 5000, 120_000, 3_600_000, 86_400_000], live: [0, 250, 5000, 120_000, 3_600_000, 86_400_000] });
    expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: "0,5 minutes" })).toThrow(/WEBHOOK_RETRY_SCHEDULE: must be comma-separated delays/);
    // A job's lease always outlasts one delivery attempt.
    expect(loadConfig({ JOB_LEASE_MS: "1000", WEBHOOK_TIMEOUT_MS: "3000" }).jobs.leaseMs).toBe(8000);
  });

  it("reads the rate limit and GraphQL limits", () => {
    const config = loadConfig({
      RATE_LIMIT_ENABLED: "false",
      RATE_LIMIT_PER_MINUTE: "250",
      RATE_LIMIT_IP_PER_MINUTE: "10",
      GRAPHQL_MAX_DEPTH: "12",
      GRAPHQL_MAX_COST: "20000",
      GRAPHQL_MAX_ALIASES: "5",
      GRAPHQL_MAX_TOKENS: "3000",
      GRAPHQL_MAX_DIRECTIVES: "10",
    });
    expect(config.rateLimit).toEqual({ enabled: false, perKeyPerMinute: 250, perIpPerMinute: 10 });
    expect(config.graphql).toMatchObject({ maxDepth: 12, maxCost: 20000, maxAliases: 5, maxTokens: 3000, maxDirectives: 10 });
    expect(loadConfig({ RATE_LIMIT_PER_MINUTE: "" }).rateLimit.perKeyPerMinute).toBe(100);
  });

  it("reads the payer pages' M-Pesa prompt limits: 3 per phone, 100 per link, 1000 per merchant in 10 minutes by default", () => {
    expect(loadConfig({}).pushLimits).toEqual({ perPhone: 3, perLink: 100, perMerchant: 1000, windowSeconds: 600 });
    const config = loadConfig({ PUSH_LIMIT_PER_PHONE: "5", PUSH_LIMIT_PER_LINK: "20", PUSH_LIMIT_PER_MERCHANT: "200", PUSH_LIMIT_WINDOW_SECONDS: "300", RATE_LIMIT_ENABLED: "false" });
    expect(config.pushLimits).toEqual({ perPhone: 5, perLink: 20, perMerchant: 200, windowSeconds: 300 });
    expect(() => loadConfig({ PUSH_LIMIT_PER_PHONE: "0" })).toThrow(/PUSH_LIMIT_PER_PHONE: must be at least 1/);
  });

  it("turns introspection (and field suggestions) off in production unless GRAPHQL_INTROSPECTION says otherwise", () => {
    expect(loadConfig({ NODE_ENV: "production" }).graphql.introspection).toBe(false);
    expect(loadConfig({ NODE_ENV: "production", GRAPHQL_INTROSPECTION: "true" }).graphql.introspection).toBe(true);
    expect(loadConfig({ GRAPHQL_INTROSPECTION: "false" }).graphql.introspection).toBe(false);
  });

  it("reads ALLOW_PRIVATE_URLS, and its older name WEBHOOK_ALLOW_PRIVATE_URLS; the new name wins; off by default", () => {
    expect(loadConfig({}).allowPrivateUrls).toBe(false);
    expect(loadConfig({ ALLOW_PRIVATE_URLS: "true" }).allowPrivateUrls).toBe(true);
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: "true" }).allowPrivateUrls).toBe(true);
    expect(loadConfig({ ALLOW_PRIVATE_URLS: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true" }).allowPrivateUrls).toBe(false);
    expect(loadConfig({ ALLOW_PRIVATE_URLS: "", WEBHOOK_ALLOW_PRIVATE_URLS: "yes" }).allowPrivateUrls).toBe(true);
    expect(() => loadConfig({ ALLOW_PRIVATE_URLS: "maybe" })).toThrow(/ALLOW_PRIVATE_URLS: must be true or false/);
  });

  it("reads TRUST_PROXY as true, false or a list of proxy addresses", () => {
    expect(loadConfig({ TRUST_PROXY: "true" }).trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: "false" }).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: "10.0.0.0/8, loopback, ::1" }).trustProxy).toEqual(["10.0.0.0/8", "loopback", "::1"]);
  });

  it("reads METRICS_TOKEN and METRICS_PORT, both unset by default", () => {
    expect(loadConfig({}).metrics).toEqual({ token: undefined, port: undefined });
    expect(loadConfig({ METRICS_TOKEN: " 0123456789abcdef0123 ", METRICS_PORT: "9464" }).metrics).toEqual({ token: "0123456789abcdef0123", port: 9464 });
    expect(loadConfig({ METRICS_TOKEN: "", METRICS_PORT: "" }).metrics).toEqual({ token: undefined, port: undefined });
    // The API port chosen by the system (0) never clashes with a metrics port.
    expect(loadConfig({ PORT: "0", METRICS_PORT: "9464" }).metrics.port).toBe(9464);
  });

  it("derives PUBLIC_BASE_URL from PORT and strips a trailing slash from an explicit one", () => {
    expect(loadConfig({ PORT: "8080" }).publicBaseUrl).toBe("http://localhost:8080");
    expect(loadConfig({ PUBLIC_BASE_URL: "https://pay.example.com/" }).publicBaseUrl).toBe("https://pay.example.com");
  });

  it.each([
    [{ PORT: "seventy" }, /PORT/],
    [{ PORT: "70000" }, /PORT/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL: must be a postgres/],
    [{ REDIS_URL: "http://x" }, /REDIS_URL: must be a redis/],
    [{ LOG_LEVEL: "loud" }, /LOG_LEVEL/],
    [{ NODE_ENV: "staging" }, /NODE_ENV/],
    [{ ENCRYPTION_KEY: "abc" }, /ENCRYPTION_KEY: must be 64 hexadecimal/],
    [{ PUBLIC_BASE_URL: "ftp://x" }, /PUBLIC_BASE_URL/],
    [{ RATE_LIMIT_PER_MINUTE: "0" }, /RATE_LIMIT_PER_MINUTE: must be at least 1/],
    [{ RATE_LIMIT_PER_MINUTE: "lots" }, /RATE_LIMIT_PER_MINUTE/],
    [{ RATE_LIMIT_IP_PER_MINUTE: "2.5" }, /RATE_LIMIT_IP_PER_MINUTE: must be a whole number/],
    [{ RATE_LIMIT_ENABLED: "maybe" }, /RATE_LIMIT_ENABLED: must be true or false/],
    [{ GRAPHQL_MAX_DEPTH: "-1" }, /GRAPHQL_MAX_DEPTH/],
    [{ GRAPHQL_MAX_COST: "x" }, /GRAPHQL_MAX_COST/],
    [{ GRAPHQL_MAX_ALIASES: "0" }, /GRAPHQL_MAX_ALIASES/],
    [{ GRAPHQL_MAX_TOKENS: "1e9x" }, /GRAPHQL_MAX_TOKENS/],
    [{ GRAPHQL_MAX_DIRECTIVES: "0" }, /GRAPHQL_MAX_DIRECTIVES/],
    [{ GRAPHQL_INTROSPECTION: "on" }, /GRAPHQL_INTROSPECTION: must be true or false/],
    [{ TRUST_PROXY: "proxy.example.com" }, /TRUST_PROXY/],
    [{ METRICS_TOKEN: "short" }, /METRICS_TOKEN: must be at least 16 characters/],
    [{ METRICS_TOKEN: "sixteen chars and a space" }, /METRICS_TOKEN: must be printable ASCII without spaces/],
    [{ METRICS_TOKEN: "0123456789abcdef\u00e9" }, /METRICS_TOKEN: must be printable ASCII/],
    [{ METRICS_PORT: "0" }, /METRICS_PORT: must be a port from 1 to 65535/],
    [{ METRICS_PORT: "65536" }, /METRICS_PORT: must be a port from 1 to 65535/],
    [{ METRICS_PORT: "9464.5" }, /METRICS_PORT: must be a whole number/],
    [{ METRICS_PORT: "metrics" }, /METRICS_PORT/],
    [{ PORT: "9464", METRICS_PORT: "9464" }, /METRICS_PORT must differ from PORT/],
    [{ METRICS_PORT: "3000" }, /METRICS_PORT must differ from PORT/],
    [{ PASSWORD_HASH_COST: "12" }, /PASSWORD_HASH_COST below 15 is allowed only with NODE_ENV=test/],
    [{ PASSWORD_HASH_COST: "12", NODE_ENV: "production" }, /PASSWORD_HASH_COST below 15/],
    [{ PASSWORD_HASH_COST: "9", NODE_ENV: "test" }, /PASSWORD_HASH_COST: must be from 10 to 20/],
  ])("rejects %j with a message naming the variable", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it("requires ENCRYPTION_KEY with DATABASE_URL, since instances must share it", () => {
    expect(() => loadConfig({ DATABASE_URL: "postgres://localhost/db" })).toThrow(/ENCRYPTION_KEY is required/);
    const key = "ab".repeat(32);
    const config = loadConfig({ DATABASE_URL: "postgres://localhost/db", ENCRYPTION_KEY: key });
    expect(config.encryptionKey?.toString("hex")).toBe(key);
  });

  it("hashes passwords at scrypt cost 15 unless told otherwise; a cheaper cost only in tests", () => {
    expect(loadConfig({}).auth.passwordHashCost).toBe(15);
    expect(loadConfig({ NODE_ENV: "test", PASSWORD_HASH_COST: "10" }).auth.passwordHashCost).toBe(10);
    expect(loadConfig({ NODE_ENV: "production", PASSWORD_HASH_COST: "17" }).auth.passwordHashCost).toBe(17);
  });

  it("treats empty strings as unset", () => {
    expect(loadConfig({ DATABASE_URL: "", REDIS_URL: " " }).databaseUrl).toBeUndefined();
  });
});
