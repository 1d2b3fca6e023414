import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { solidPng } from "../support/png.ts";
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
let otherApi: ReturnType<typeof apiClient>;
let merchantId: number;
let webhookSecret: string;
let apiHeaders: Record<string, string>;
let otherHeaders: Record<string, string>;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  gw = await startTestGateway({
    env: { SANDBOX_DISPUTE_DELAY_MS: "400", JOB_POLL_INTERVAL_MS: "100", WEBHOOK_ALLOW_PRIVATE_URLS: "true", RATE_LIMIT_ENABLED: "false", SANDBOX_REFUND_DELAY_MS: "200" },
  });
  const merchant = await gw.createMerchant();
  merchantId = merchant.id;
  api = apiClient(gw.url, merchant.testKey);
  const other = await gw.createMerchant();
  otherApi = apiClient(gw.url, other.testKey);
  apiHeaders = { "x-api-key": merchant.testKey };
  otherHeaders = { "x-api-key": other.testKey };
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

  it("losing evidence loses it; a draft is kept without an event; a submission needs the four fields; bad input is a 400", async () => {
    const reference = await paid(3_000);
    const dispute = await disputeOf(reference);
    const draft = await api.post(`/v1/disputes/${dispute.id}/evidence`, { customer_name: "Jane", service_details: "Sent by courier" });
    expect(draft.status, draft.text).toBe(200);
    expect(draft.body.data).toMatchObject({ status: "needs_response", evidence: { customer_name: "Jane", service_details: "Sent by courier", customer_email: null }, evidence_submitted_at: null });
    const missing = await api.post(`/v1/disputes/${dispute.id}/evidence`, { customer_name: "Jane", service_details: "x", submit: true });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe("customer_email: is required to submit");
    for (const bad of [{ customer_name: "Ja\u0000ne" }, { delivery_date: "2026-13-45" }, { uploaded_files: ["df_nope"] }, { uploaded_files: "df_x" }, { submit: "yes" }]) {
      const res = await api.post(`/v1/disputes/${dispute.id}/evidence`, bad);
      expect(res.status, `${JSON.stringify(bad)}: ${res.text}`).toBe(400);
      expect(res.body.status).toBe("error");
    }
    for (const id of ["dp_nope", "x".repeat(300), "%00"]) expect((await api.get(`/v1/disputes/${encodeURIComponent(id)}`)).status).not.toBe(500);
    expect((await api.get("/v1/disputes/dp_nope")).status).toBe(404);
    expect((await api.get("/v1/disputes?status=open")).status).toBe(400);
    // Only the opening so far: a draft sends nothing anywhere.
    const events = await gw.gateway.db.prisma.event.findMany({ where: { dispute: { reference: dispute.id } } });
    expect(events.map((e) => e.type)).toEqual(["dispute.created"]);

    const lost = await api.post(`/v1/disputes/${dispute.id}/evidence`, {
      customer_name: "Jane", customer_email: "payer@example.com", customer_phone: "254712345678", service_details: "Sent by courier", delivery_date: "2026-11-20", submit: true,
    });
    expect(lost.status, lost.text).toBe(200);
    const closed = await until(() => api.get(`/v1/disputes/${dispute.id}`), (r) => r.body?.data?.status === "lost");
    expect(closed.body.data.evidence).toMatchObject({ delivery_date: "2026-11-20", customer_phone: "254712345678" });
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction).toMatchObject({ dispute_status: "lost", disputed: true });
    const entries = (await api.get(`/v1/balance/transactions?limit=100`)).body.data.filter((e: { source_reference: string }) => e.source_reference === dispute.id);
    expect(entries.map((e: { type: string; amount: number; net: number }) => [e.type, e.amount, e.net])).toEqual([["dispute_loss", 0, 0], ["dispute_hold", -3_000, -3_000]]);
  });

  it("evidence files: a PNG by its content is taken and listed; a text file, an empty one, JSON or another merchant's dispute is refused", async () => {
    const reference = await paid(2_000);
    const dispute = await disputeOf(reference);
    const upload = (bytes: Buffer, name: string, key = api) => {
      const form = new FormData();
      form.append("file", new Blob([new Uint8Array(bytes)]), name);
      return fetch(`${gw.url}/v1/disputes/${dispute.id}/files`, { method: "POST", headers: key === api ? apiHeaders : otherHeaders, body: form });
    };
    const png = solidPng(4, 4, [200, 10, 10]);
    const taken = await upload(png, "receipt.png");
    expect(taken.status).toBe(201);
    const file = ((await taken.json()) as { data: { id: string; name: string; size: number; content_type: string } }).data;
    expect(file).toMatchObject({ name: "receipt.png", size: png.length, content_type: "image/png" });
    expect(file.id).toMatch(/^df_/);
    const named = await upload(Buffer.from("just text"), "invoice.pdf");
    expect(named.status).toBe(400);
    expect(((await named.json()) as { message: string }).message).toMatch(/^file: must be a PDF, PNG or JPEG/);
    expect((await upload(Buffer.alloc(0), "empty.png")).status).toBe(400);
    expect((await upload(png, "receipt.png", otherApi)).status).toBe(404);
    const json = await api.post(`/v1/disputes/${dispute.id}/files`, { file: "x" });
    expect(json.status).toBe(415);
    const shown = await api.get(`/v1/disputes/${dispute.id}`);
    expect(shown.body.data.files).toEqual([file]);
    const submitted = await api.post(`/v1/disputes/${dispute.id}/evidence`, {
      customer_name: "Jane", customer_email: "payer@example.com", customer_phone: "254712345678", service_details: "winning_evidence", uploaded_files: [file.id], submit: true,
    });
    expect(submitted.status, submitted.text).toBe(200);
    expect(submitted.body.data.evidence.uploaded_files).toEqual([file.id]);
    await until(() => api.get(`/v1/disputes/${dispute.id}`), (r) => r.body?.data?.status === "won");
  });

  it("tenants and roles: another merchant sees nothing; a viewer reads but cannot answer; GraphQL shows the transaction's disputes", async () => {
    const reference = await paid(1_500);
    const dispute = await disputeOf(reference);
    expect((await otherApi.get(`/v1/disputes/${dispute.id}`)).status).toBe(404);
    expect((await otherApi.get("/v1/disputes")).body.data).toEqual([]);
    const viewer = bearerClient(gw.url, await gw.signIn(merchantId, "viewer"));
    expect((await viewer.get(`/v1/disputes/${dispute.id}`)).status).toBe(200);
    expect((await viewer.post(`/v1/disputes/${dispute.id}/accept`, {})).status).toBe(403);
    expect((await viewer.post(`/v1/disputes/${dispute.id}/evidence`, { customer_name: "x" })).status).toBe(403);
    const gql = await api.post("/graphql", {
      query: `query($r: String!) { transaction(reference: $r) { ... on Transaction { disputed disputeStatus amountChargedBack disputes { reference status amount dueBy } } } }`,
      variables: { r: reference },
    });
    expect(gql.body.data.transaction).toMatchObject({ disputed: true, disputeStatus: "needs_response", amountChargedBack: 0, disputes: [{ reference: dispute.id, status: "needs_response", amount: 1_500 }] });
  });
});

describe("a sandbox dispute left unanswered past its deadline", () => {
  let late: TestGateway;
  let lateApi: ReturnType<typeof apiClient>;
  beforeAll(async () => {
    late = await startTestGateway({
      env: { SANDBOX_DISPUTE_DELAY_MS: "200", SANDBOX_DISPUTE_DUE_MS: "1500", DISPUTE_CHECK_EVERY_MS: "300", JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_ENABLED: "false" },
    });
    lateApi = apiClient(late.url, (await late.createMerchant()).testKey);
    await lateApi.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  });
  afterAll(async () => {
    await expectCleanLedger(late);
    await late?.close();
  });

  it("is lost when the provider says so, and can no longer be answered (409 dispute_closed)", async () => {
    const init = await lateApi.post("/api/transactions/initialize", { amount: 4_000, email: "payer@example.com" });
    expect((await apiClient(late.url).post(`/payment/checkout/${init.body.reference}/pay`, card(DISPUTE_CARD))).status).toBe(200);
    const dispute = (await until(() => lateApi.get("/v1/disputes"), (r) => r.body?.data?.length === 1)).body.data[0];
    expect(new Date(dispute.due_by).getTime() - new Date(dispute.created_at).getTime()).toBeLessThan(5_000);
    const lost = await until(() => lateApi.get(`/v1/disputes/${dispute.id}`), (r) => r.body?.data?.status === "lost", 20_000);
    expect(lost.body.data.closed_at).not.toBeNull();
    const answer = await lateApi.post(`/v1/disputes/${dispute.id}/accept`, {});
    expect(answer.status).toBe(409);
    expect(answer.body.code).toBe("dispute_closed");
    expect((await lateApi.get("/v1/balance")).body.data[0]).toMatchObject({ disputed: 0, charged_back: 4_000, available: 0 });
  });
});
