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
    });
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

  it("treats empty strings as unset", () => {
    expect(loadConfig({ DATABASE_URL: "", REDIS_URL: " " }).databaseUrl).toBeUndefined();
  });
});
