import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";

/**
 * Disputes on the sandbox, over real HTTP: the disputing test card opens one after SANDBOX_DISPUTE_DELAY_MS, holding
 * its amount; evidence that says winning_evidence wins (the hold comes back), other evidence and accepting lose (the
 * hold is taken); refunds wait for the dispute; every step is one event, one signed webhook and one ledger entry.
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const DISPUTE_CARD = "4000000000000259";
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" });

let gw: TestGateway;
let receiver: WebhookReceiver;
let api: ReturnType<typeof apiClient>;
let webhookSecret: string;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  gw = await startTestGateway({
    env: { SANDBOX_DISPUTE_DELAY_MS: "400", JOB_POLL_INTERVAL_MS: "100", WEBHOOK_ALLOW_PRIVATE_URLS: "true", RATE_LIMIT_ENABLED: "false", SANDBOX_REFUND_DELAY_MS: "200" },
  });
  const merchant = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
  await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/disputes`, events: ["dispute.created", "dispute.updated", "dispute.closed"] });
  expect(hook.status, hook.text).toBe(201);
  webhookSecret = hook.body.data.secret;
});
afterAll(async () => {
  await gw?.close();
  await receiver?.close();
});
afterAll(() => expectCleanLedger(gw));

async function paid(amount: number, number = DISPUTE_CARD): Promise<string> {
  const init = await api.post("/api/transactions/initialize", { amount, email: "payer@example.com", currency: "KES" });
  expect(init.status, init.text).toBe(200);
  const pay = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card(number));
  expect(pay.status, pay.text).toBe(200);
  return init.body.reference;
}

const disputeOf = (reference: string) =>
  until(() => api.get(`/v1/disputes?transaction=${reference}`), (r) => r.body?.data?.length === 1).then((r) => r.body.data[0]);

describe("sandbox disputes", () => {
  it("the disputing card opens a dispute that holds the amount; winning evidence releases it", async () => {
    const reference = await paid(5_000);
    const dispute = await disputeOf(reference);
    expect(dispute).toMatchObject({ transaction_reference: reference, amount: 5_000, currency: "KES", status: "needs_response", reason: "fraudulent" });
    expect(dispute.id).toMatch(/^dp_/);
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "completed", disputed: true, dispute_status: "needs_response" });
    const balance = await api.get("/v1/balance");
    expect(balance.body.data[0]).toMatchObject({ disputed: 5_000 });

    const refund = await api.post("/v1/refunds", { transaction: reference });
    expect(refund.status, refund.text).toBe(409);
    expect(refund.body.code).toBe("transaction_disputed");

    const submitted = await api.post(`/v1/disputes/${dispute.id}/evidence`, {
      customer_name: "Jane Payer", customer_email: "payer@example.com", customer_phone: "254712345678", service_details: "Delivered; winning_evidence", submit: true,
    });
    expect(submitted.status, submitted.text).toBe(200);
    expect(submitted.body.data.status).toBe("under_review");
    const closed = await until(() => api.get(`/v1/disputes/${dispute.id}`), (r) => r.body?.data?.status === "won");
    expect(closed.body.data.closed_at).not.toBeNull();
    const after = await api.get("/v1/balance");
    expect(after.body.data[0]).toMatchObject({ disputed: 0, charged_back: 0 });
    const types = (await api.get("/v1/balance/transactions")).body.data.map((e: { type: string }) => e.type);
    expect(types).toContain("dispute_hold");
    expect(types).toContain("dispute_release");

    const hooks = await until(() => Promise.resolve(receiver.received.filter((r) => JSON.parse(r.body).data?.id === dispute.id)), (list) => list.length >= 3);
    const wh = new Webhook(webhookSecret);
    expect(hooks.map((h) => (wh.verify(h.body, h.headers as Record<string, string>) as { type: string }).type)).toEqual(["dispute.created", "dispute.updated", "dispute.closed"]);
  });

  it("accepting loses it: the hold is taken, and a later refund can give back only what is left", async () => {
    const reference = await paid(8_000);
    const dispute = await disputeOf(reference);
    const accepted = await api.post(`/v1/disputes/${dispute.id}/accept`, {});
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.body.data.status).toBe("lost");
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "completed", disputed: true, dispute_status: "lost" });
    const refund = await api.post("/v1/refunds", { transaction: reference });
    expect(refund.status, refund.text).toBe(409);
    expect(refund.body.code).toBe("amount_exceeds_refundable");
    const again = await api.post(`/v1/disputes/${dispute.id}/evidence`, { submit: false, customer_name: "x" });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe("dispute_closed");
  });
});
