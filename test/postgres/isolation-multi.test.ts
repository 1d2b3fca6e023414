import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * Tenant and mode isolation with two instances on one PostgreSQL: what merchant A creates on one
 * instance is invisible to merchant B, and to A's own live key, on either instance, by every route
 * that looks objects up (reference, id, global id, lists, events).
 */
describe("isolation across two instances", () => {
  let one: TestGateway;
  let two: TestGateway;
  let a: TestMerchant;
  let b: TestMerchant;
  let transactionRef: string;
  let transactionGlobalId: string;
  let payoutRef: string;
  let payoutId: number;

  beforeAll(async () => {
    const env = { RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "50", WEBHOOK_ALLOW_PRIVATE_URLS: "true" };
    one = await startTestGateway({ env });
    two = await startTestGateway({ env, database: one.database });
    a = await one.createMerchant("A");
    b = await two.createMerchant("B");
    const api = apiClient(one.url, a.testKey);
    const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    expect(channel.status, channel.text).toBe(201);
    const init = await api.post("/api/transactions/initialize", { amount: 5000, email: "isolated@payers.test" });
    expect(init.status, init.text).toBe(200);
    transactionRef = init.body.reference;
    const node = await api.post("/graphql", { query: `{ transaction(reference: "${transactionRef}") { ... on Transaction { id } } }` });
    transactionGlobalId = node.body.data.transaction.id;
    const payout = await api.post("/v1/payouts", { amount: 10000, phone_number: "254708374149" });
    expect(payout.status, payout.text).toBe(201);
    payoutRef = payout.body.data.reference;
    payoutId = payout.body.data.id;
    const hook = await api.post("/v1/webhooks", { url: "http://127.0.0.1:9/hooks" });
    expect(hook.status, hook.text).toBe(201);
  });

  afterAll(async () => {
    await two?.close();
    await one?.close();
  });

  it("the owner sees its objects on both instances", async () => {
    for (const gw of [one, two]) {
      const api = apiClient(gw.url, a.testKey);
      expect((await api.get(`/api/transactions/verify/${transactionRef}`)).status).toBe(200);
      expect((await api.get(`/v1/payouts/${payoutRef}`)).status).toBe(200);
      expect((await api.get("/v1/webhooks")).body.data).toHaveLength(1);
    }
  });

  it("another merchant, and the owner's live key, find nothing on either instance", async () => {
    for (const gw of [one, two]) {
      for (const key of [b.testKey, b.liveKey, a.liveKey]) {
        const api = apiClient(gw.url, key);
        const verify = await api.get(`/api/transactions/verify/${transactionRef}`);
        expect(verify.status).toBe(404);
        expect(verify.body).toMatchObject({ status: "error", code: "not_found" });
        for (const id of [payoutRef, String(payoutId)]) {
          const payout = await api.get(`/v1/payouts/${id}`);
          expect(payout.status).toBe(404);
          expect(payout.body).toMatchObject({ status: "error", code: "not_found" });
        }
        expect((await api.get("/v1/webhooks")).body).toEqual({ status: "success", data: [] });
        const list = await api.get("/api/transactions/list");
        expect(list.status).toBe(200);
        expect(JSON.stringify(list.body)).not.toContain(transactionRef);
        const graph = await api.post("/graphql", {
          query: `query($id: ID!) {
            node(id: $id) { id }
            transactions(first: 50) { edges { node { reference } } }
            payouts(first: 50) { edges { node { reference } } }
            webhookEndpoints { id }
          }`,
          variables: { id: transactionGlobalId },
        });
        expect(graph.body.errors, graph.text).toBeUndefined();
        expect(graph.body.data.node).toBeNull();
        expect(graph.body.data.transactions.edges).toEqual([]);
        expect(graph.body.data.payouts.edges).toEqual([]);
        expect(graph.body.data.webhookEndpoints).toEqual([]);
      }
    }
  });
});
