import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { inParallel } from "../support/load.ts";

/**
 * DATABASE_POOL_SIZE bounds the connections one instance opens to PostgreSQL (the database's max_connections divided
 * among the instances).
 */
describe("DATABASE_POOL_SIZE", () => {
  let database: TestDatabase;
  let gw: TestGateway;
  let watcher: pg.Pool;

  beforeAll(async () => {
    database = await createTestDatabase();
    gw = await startTestGateway({ database, env: { DATABASE_POOL_SIZE: "2", RATE_LIMIT_ENABLED: "false" } });
    watcher = new pg.Pool({ connectionString: database.databaseUrl!, max: 1 });
  });

  afterAll(async () => {
    await watcher?.end();
    await gw?.close();
    await database?.drop();
  });

  it("is 10 by default; anything but a whole number from 1 is refused by name", () => {
    expect(loadConfig({}).databasePoolSize).toBe(10);
    expect(loadConfig({ DATABASE_POOL_SIZE: "4" }).databasePoolSize).toBe(4);
    for (const bad of ["0", "-1", "2.5", "many"]) {
      expect(() => loadConfig({ DATABASE_POOL_SIZE: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ DATABASE_POOL_SIZE: bad }), bad).toThrow(/DATABASE_POOL_SIZE/);
    }
  });

  it("holds an instance to that many connections however many requests wait on the database at once", async () => {
    const merchant = await gw.createMerchant();
    const api = apiClient(gw.url, merchant.testKey);
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" })).status).toBe(201);
    const connections = async () =>
      (
        await watcher.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
        )
      ).rows[0]!.n;
    let most = 0;
    let loading = true;
    const watching = (async () => {
      while (loading) {
        most = Math.max(most, await connections());
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    // 200 writes, 25 at a time: far more than two connections can serve at once.
    const answers = await inParallel(200, 25, (i) => api.post("/api/transactions/initialize", { amount: 1000 + i, email: `pool-${i}@payers.test` }));
    loading = false;
    await watching;
    expect(answers.filter((r) => r.status !== 200).map((r) => r.text)).toEqual([]);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(2);
  });
});
