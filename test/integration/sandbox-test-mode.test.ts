import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDemoMerchantIfEmpty } from "../../src/demo.ts";
import { validationError } from "../support/documents.ts";
import { apiClient, bearerClient, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/** The sandbox provider simulates payments in test mode only: no live sandbox channel, and none used. */

describe("sandbox channels are test-mode only", () => {
  let gw: TestGateway;
  let demoKey: string | null;
  let m: TestMerchant;

  const liveSandboxRows = () => gw.gateway.db.prisma.paymentChannel.count({ where: { mode: "live", provider: "sandbox" } });

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    // Before any other merchant: the database is empty, as on a first start.
    demoKey = (await createDemoMerchantIfEmpty(gw.gateway.services))?.testKey ?? null;
    m = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  it("the demo merchant still gets its (test-mode) sandbox channel", async () => {
    expect(demoKey).toMatch(/^sk_test_/);
    const list = await apiClient(gw.url, demoKey!).get("/api/payment-channels/list");
    expect(list.body.channels).toMatchObject([{ provider: "sandbox", is_default: true, is_active: true }]);
  });

  it("live mode cannot create one: a live key is refused (403), a signed-in live owner gets the 400 naming provider, over REST and GraphQL, and nothing written", async () => {
    // Issue 35: live channels' credentials are a signed-in owner's, never an API key's, whatever the provider.
    const rest = await apiClient(gw.url, m.liveKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(rest.status, rest.text).toBe(403);
    expect(rest.body).toMatchObject({ status: "error", code: "forbidden" });
    const mutation = `mutation { createPaymentChannel(input: { name: "Sandbox", provider: "sandbox" }) { __typename ... on ValidationError { field code message } } }`;
    const byKey = await apiClient(gw.url, m.liveKey).post("/graphql", { query: mutation });
    expect(byKey.body.errors?.[0]?.extensions?.code, byKey.text).toBe("forbidden");
    // The one who may create live channels is still told sandbox is for test mode only.
    const gql = await bearerClient(gw.url, await gw.signIn(m.id, "owner", "live")).post("/graphql", { query: mutation });
    expect(gql.body.data.createPaymentChannel, gql.text).toEqual(validationError("provider", "sandbox is for test mode only; in live mode use one of mpesa, paystack"));
    expect(await liveSandboxRows()).toBe(0);
  });

  it("a test key still can, and a signed-in live owner can still create a real provider's channel", async () => {
    const test = await apiClient(gw.url, m.testKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(test.status, test.text).toBe(201);
    const live = await gw.createLiveChannel(m, { name: "Paystack", provider: "paystack", config: { public_key: "pk_live_abc", secret_key: "sk_live_abc" } });
    expect(live).toMatchObject({ provider: "paystack", is_default: true, is_active: true });
  });

  it("a live sandbox row from before the rule is never used: 400 naming payment_channel_id, no payment, no payout", async () => {
    const merchant = await gw.createMerchant();
    const live = apiClient(gw.url, merchant.liveKey);
    // Such a row can no longer be created through the service: make a test-mode one and move it to live mode.
    const created = await apiClient(gw.url, merchant.testKey).post("/api/payment-channels/create", { name: "Legacy sandbox", provider: "sandbox", config: {} });
    const legacy = await gw.gateway.db.prisma.paymentChannel.update({ where: { id: created.body.channel.id }, data: { mode: "live" } });
    expect(legacy).toMatchObject({ mode: "live", provider: "sandbox", isActive: true, isDefault: true });
    const refused = (res: HttpResult) => {
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message).toMatch(/^payment_channel_id: payment channel \d+ is a sandbox channel, which is for test mode only/);
    };
    // Named, and as the default.
    refused(await live.post("/api/transactions/initialize", { amount: 5000, email: "live@example.com", payment_channel_id: legacy.id }));
    refused(await live.post("/api/transactions/initialize", { amount: 5000, email: "live@example.com" }));
    refused(await live.post("/api/momo/stk-push", { amount: 100, phone_number: "254708374149", payment_channel_id: legacy.id }));
    refused(await live.post("/v1/payouts", { amount: 150000, phone_number: "254708374149", payment_channel_id: legacy.id }));
    // No channel named: the payout fallback skips it, so there is no channel that can pay out.
    const fallback = await live.post("/v1/payouts", { amount: 150000, phone_number: "254708374149" });
    expect(fallback.status, fallback.text).toBe(400);
    expect(fallback.body.message).toBe("payment_channel_id: is required: the merchant has no active channel that can pay out");
    const db = gw.gateway.db.prisma;
    expect(await db.transaction.count({ where: { merchantId: merchant.id } })).toBe(0);
    expect(await db.payout.count({ where: { merchantId: merchant.id } })).toBe(0);
    // The same merchant's test-mode sandbox is unaffected.
    const test = apiClient(gw.url, merchant.testKey);
    expect((await test.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
    expect((await test.post("/api/transactions/initialize", { amount: 5000, email: "test@example.com" })).status).toBe(200);
  });
});
