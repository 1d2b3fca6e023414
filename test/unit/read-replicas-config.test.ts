import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { parseLsn, replicaName } from "../../src/db/replicas.ts";

const PRIMARY = { DATABASE_URL: "postgres://gw@db:5432/gw", ENCRYPTION_KEY: "a".repeat(64) };

describe("read replica settings", () => {
  it("reads DATABASE_READ_URL as one or more URLs, with a 5 s lag limit by default", () => {
    expect(loadConfig({}).readReplicas).toEqual({ urls: [], maxLagMs: 5000 });
    const config = loadConfig({ ...PRIMARY, DATABASE_READ_URL: " postgres://gw@r1:5432/gw , postgresql://gw@r2/gw ", DATABASE_READ_MAX_LAG_MS: "2500" });
    expect(config.readReplicas).toEqual({ urls: ["postgres://gw@r1:5432/gw", "postgresql://gw@r2/gw"], maxLagMs: 2500 });
  });

  it("refuses replicas without a PostgreSQL primary, URLs that are not postgres URLs or are named twice, and a lag limit under 100 ms", () => {
    expect(() => loadConfig({ DATABASE_READ_URL: "postgres://gw@r1/gw" })).toThrow(/DATABASE_READ_URL needs DATABASE_URL/);
    for (const bad of ["mysql://r1/gw", "postgres://gw@r1/gw,redis://r2", "postgres://gw@r1/gw,postgres://gw@r1/gw", ",", "postgres://"]) {
      expect(() => loadConfig({ ...PRIMARY, DATABASE_READ_URL: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ ...PRIMARY, DATABASE_READ_URL: bad }), bad).toThrow(/DATABASE_READ_URL: must be one or more comma-separated postgres/);
    }
    expect(() => loadConfig({ ...PRIMARY, DATABASE_READ_URL: "postgres://gw@r1/gw", DATABASE_READ_MAX_LAG_MS: "50" })).toThrow(/DATABASE_READ_MAX_LAG_MS: must be at least 100/);
  });

  it("names a replica by host and port only (no credentials in logs or metrics), and compares WAL positions as numbers", () => {
    expect(replicaName("postgres://gw:s3cret@replica-1.internal:6432/gw?sslmode=require")).toBe("replica-1.internal:6432");
    expect(replicaName("postgres://gw:s3cret@replica-2/gw")).toBe("replica-2:5432");
    expect(parseLsn("0/16B3748")).toBe(0x16b3748n);
    expect(parseLsn("16/B374D848")).toBe((0x16n << 32n) | 0xb374d848n);
    // Text order would put 9/0 after 10/0.
    expect(parseLsn("9/FFFFFFFF") < parseLsn("10/0")).toBe(true);
  });
});
