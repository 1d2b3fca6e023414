import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";
import { until } from "../support/wait.ts";

/**
 * PostgreSQL goes away (every connection dropped, new ones refused) and comes back, under two gateway
 * instances: meanwhile every request that needs it is a 503 in the envelope with Retry-After, never a
 * 500 or a masked GraphQL internal error, and both serve again by themselves once the database returns.
 */
describe("PostgreSQL outage", () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let gw: TestGateway;
  let second: TestGateway;
  let merchant: TestMerchant;
  let reference: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    const direct = new URL(database.databaseUrl!);
    proxy = await startTcpProxy(Number(direct.port));
    const viaProxy = new URL(direct);
    viaProxy.port = String(proxy.port);
    const proxied = { ...database, env: { ...database.env, DATABASE_URL: viaProxy.toString() } };
    gw = await startTestGateway({ database: proxied, env: { RATE_LIMIT_ENABLED: "false" } });
    second = await startTestGateway({ database: proxied, env: { RATE_LIMIT_ENABLED: "false" } });
    merchant = await gw.createMerchant();
    const api = apiClient(gw.url, merchant.testKey);
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" })).status).toBe(201);
    const created = await api.post("/api/transactions/initialize", { amount: 1000, email: "outage@payers.test" });
    expect(created.status, created.text).toBe(200);
    reference = created.body.reference;
  });

  afterAll(async () => {
    await second?.close();
    await gw?.close();
    await proxy?.close();
    await database?.drop();
  });

  it("answers 503 with Retry-After while the database is down, and recovers when it returns", async () => {
    const api = apiClient(gw.url, merchant.testKey);
    await proxy.cut();

    const requests = {
      verify: () => api.get(`/api/transactions/verify/${reference}`),
      initialize: () => api.post("/api/transactions/initialize", { amount: 1000, email: "outage@payers.test" }),
      payout: () => api.get("/v1/payouts/po_missing"),
      checkout: () => apiClient(gw.url).get(`/payment/checkout/${reference}`),
      ready: () => apiClient(gw.url).get("/ready"),
    };
    for (const [name, send] of Object.entries(requests)) {
      const res = await send();
      expect(res.status, `${name}: ${res.text}`).toBe(503);
      expect(res.headers.get("retry-after"), name).toMatch(/^\d+$/);
      if (name !== "checkout") expect(res.body, name).toMatchObject({ status: "error", code: "service_unavailable" });
    }

    // GraphQL reports it as the typed availability code, not a masked internal error.
    const graphql = await api.post("/graphql", { query: `{ transaction(reference: "${reference}") { __typename } }` });
    expect(graphql.text).not.toMatch(/INTERNAL_SERVER_ERROR|Unexpected error/);
    expect(graphql.status === 503 || graphql.body.errors?.[0]?.extensions?.code === "service_unavailable", graphql.text).toBe(true);

    // The other instance, with its own pool and key cache, says the same.
    const onSecond = await apiClient(second.url, merchant.testKey).get(`/api/transactions/verify/${reference}`);
    expect(onSecond.status, onSecond.text).toBe(503);
    expect(onSecond.headers.get("retry-after")).toMatch(/^\d+$/);

    await proxy.restore();
    const back = await until(() => requests.verify(), (r) => r.status === 200, 20_000);
    expect(back.body.transaction.reference).toBe(reference);
    expect((await requests.ready()).status).toBe(200);
    expect((await requests.initialize()).status).toBe(200);
    const secondBack = await until(() => apiClient(second.url, merchant.testKey).get(`/api/transactions/verify/${reference}`), (r) => r.status === 200, 20_000);
    expect(secondBack.body.transaction.reference).toBe(reference);
  });
});
