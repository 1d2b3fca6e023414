import { Webhook } from "standardwebhooks";
import { afterAll, describe, expect, it } from "vitest";
import type { FakeDispute } from "../fakes/paystack-api.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { graphql } from "../gql/index.ts";
import { withPaystack, type PaystackBench } from "../support/benches.ts";
import { apiClient } from "../support/gateway.ts";
import { assertNoSecrets } from "../support/provider-call-secrets.ts";
import { collect, wsClient } from "../support/subscriptions.ts";
import { until } from "../support/wait.ts";

/**
 * Paystack chargebacks end to end, over real HTTP against the loopback Paystack: charge.dispute.* webhooks signed by
 * the fake are notices the gateway checks with GET /dispute/:id; opening holds the amount, winning releases it,
 * losing (accepted, or auto-accepted with no webhook at all, found by the reconciler) takes it. Evidence files go to
 * Paystack's signed upload URL byte for byte; roles, tenants and the deadline refuse answers. Every outcome is read
 * through the gateway's own API, its signed webhooks and the disputeEvents subscription. Jobs run on their own here
 * (the reconciler asks every DISPUTE_CHECK_EVERY_MS), so every assertion on them waits for its outcome.
 */
const EMAIL = "payer@example.com";
const CURRENCY = "KES";
const DISPUTE_EVENTS = ["dispute.created", "dispute.updated", "dispute.closed"];
/** What Paystack requires of evidence (providers.md, Disputes), as a merchant fills it in. */
const EVIDENCE = {
  customer_name: "Wanjiru Kamau",
  customer_email: EMAIL,
  customer_phone: "254712345678",
  service_details: "Two books delivered to the customer's office",
  delivery_address: "Moi Avenue 12, Nairobi",
  delivery_date: "2024-05-02",
};

/** Bound when the bench is up (beforeAll). */
let { fake, gw, api, merchant, channelId, webhookUrl } = {} as PaystackBench;
let receiver: WebhookReceiver;
let webhookSecret: string;
const prisma = () => gw.gateway.db.prisma;

withPaystack(
  {
    merchant: "Nairobi Books",
    cleanLedger: true,
    // Jobs on: webhooks are delivered, and every open dispute is asked about every 300 ms.
    env: { RATE_LIMIT_ENABLED: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true", JOB_POLL_INTERVAL_MS: "100", DISPUTE_CHECK_EVERY_MS: "300" },
  },
  async (bench) => {
    ({ fake, gw, api, merchant, channelId, webhookUrl } = bench);
    receiver = await startWebhookReceiver();
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/disputes`, events: DISPUTE_EVENTS });
    expect(hook.status, hook.text).toBe(201);
    webhookSecret = hook.body.data.secret;
  },
);
afterAll(() => receiver?.close());

/** A Paystack payment of `amount` KES subunits, paid on the fake's hosted page and completed. */
async function paidPayment(amount: number): Promise<string> {
  const init = await api.post("/api/transactions/initialize", { amount, email: EMAIL, currency: CURRENCY, payment_channel_id: channelId });
  expect(init.status, init.text).toBe(200);
  const reference = init.body.reference as string;
  await fake.pay(reference);
  await until(() => prisma().transaction.findUniqueOrThrow({ where: { reference } }), (t) => t.status === "completed");
  return reference;
}

type Notice = "charge.dispute.create" | "charge.dispute.remind" | "charge.dispute.resolve";

/** Paystack posts a dispute webhook (signed with the secret key) to the channel's webhook URL; the gateway answers 200. */
async function notify(d: FakeDispute, event: Notice, times = 1) {
  const answers = await Promise.all(Array.from({ length: times }, () => fake.sendDisputeWebhook(d.id, event, webhookUrl)));
  expect(answers.map((a) => a.status)).toEqual(Array(times).fill(200));
}

/** The dispute as GET /v1/disputes?transaction= lists it (the payment's only one). */
async function disputeOf(reference: string) {
  const res = await api.get(`/v1/disputes?transaction=${reference}`);
  expect(res.status, res.text).toBe(200);
  expect(res.body.data).toHaveLength(1);
  return res.body.data[0];
}

/** A paid payment, disputed at Paystack and notified once: answers the fake's dispute and the gateway's. */
async function openedDispute(amount: number, opts: Parameters<typeof fake.openDispute>[1] = {}) {
  const reference = await paidPayment(amount);
  const d = fake.openDispute(reference, opts);
  await notify(d, "charge.dispute.create");
  return { reference, d, dispute: await disputeOf(reference) };
}

const getDispute = async (id: string) => (await api.get(`/v1/disputes/${id}`)).body.data;
const balance = async () => {
  const res = await api.get(`/v1/balance?payment_channel_id=${channelId}`);
  expect(res.status, res.text).toBe(200);
  return res.body.data.find((b: { currency: string }) => b.currency === CURRENCY) as { available: number; disputed: number; charged_back: number };
};
/** The balance transactions one dispute caused, oldest first, as [type, amount]. */
async function ledgerOf(disputeId: string): Promise<[string, number][]> {
  const res = await api.get("/v1/balance/transactions?limit=100");
  expect(res.status, res.text).toBe(200);
  return res.body.data
    .filter((e: { source_reference: string }) => e.source_reference === disputeId)
    .reverse()
    .map((e: { type: string; amount: number }) => [e.type, e.amount]);
}
const verify = async (reference: string) => (await api.get(`/api/transactions/verify/${reference}`)).body.transaction;

/** The dispute's events as the gateway recorded them (the API shows none by dispute), oldest first. */
async function eventsOf(disputeId: string) {
  const row = await prisma().dispute.findUniqueOrThrow({ where: { reference: disputeId } });
  return prisma().event.findMany({ where: { disputeId: row.id }, orderBy: { id: "asc" } });
}

/**
 * The signed webhooks the merchant received about one dispute, once `count` events were recorded and delivered: each
 * verified with the endpoint's secret, as a merchant's standardwebhooks library does, in the order of the events
 * (their webhook-id; deliveries run concurrently, so they may arrive in another order). Every event is queued once
 * per endpoint (one here), so waiting until each recorded event was delivered makes the count exact.
 */
async function webhooksOf(disputeId: string, count: number) {
  const events = await until(() => eventsOf(disputeId), (list) => list.length >= count);
  const ids = events.map((e) => e.id);
  await until(() => prisma().webhookDelivery.findMany({ where: { eventId: { in: ids } } }), (ds) => ds.length === ids.length && ds.every((d) => d.status === "succeeded"));
  const order = ids.map(String);
  const mine = receiver.received.filter((r) => r.json?.data?.id === disputeId).sort((a, b) => order.indexOf(a.headers["webhook-id"]!) - order.indexOf(b.headers["webhook-id"]!));
  const wh = new Webhook(webhookSecret);
  return mine.map((r) => wh.verify(r.body, r.headers) as { type: string; data: Record<string, unknown> });
}

/** One file posted as multipart/form-data in the field `file`, with the key given. */
function uploadFile(disputeId: string, name: string, bytes: Uint8Array, key = merchant.testKey) {
  const form = new FormData();
  form.append("file", new Blob([new Uint8Array(bytes)], { type: "application/octet-stream" }), name);
  return apiClient(gw.url, key).raw(`/v1/disputes/${disputeId}/files`, { method: "POST", body: form });
}

/** A small but real PDF (one blank page), with a binary comment line so the bytes are not all text. */
function tinyPdf(): Buffer {
  const objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>", "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"];
  const parts: Buffer[] = [Buffer.from("%PDF-1.4\n"), Buffer.from([0x25, 0xe2, 0xe3, 0xcf, 0xd3, 0x0a])];
  const offsets: number[] = [];
  const length = () => parts.reduce((sum, p) => sum + p.length, 0);
  objects.forEach((body, i) => {
    offsets.push(length());
    parts.push(Buffer.from(`${i + 1} 0 obj\n${body}\nendobj\n`));
  });
  const xref = length();
  const rows = offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("");
  parts.push(Buffer.from(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${rows}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`));
  return Buffer.concat(parts);
}

const DisputeEvents = graphql(`
  subscription PaystackDisputeEvents {
    disputeEvents(ready: true) { id type dispute { reference status amount transactionReference } }
  }
`);

describe("paystack disputes", () => {
  it("charge.dispute.create: the gateway asks GET /dispute/:id, opens the dispute with Paystack's deadline, holds the amount, and tells the merchant", async () => {
    const reference = await paidPayment(120_000);
    const before = await balance();
    const d = fake.openDispute(reference);
    const asked = fake.requests.length;
    await notify(d, "charge.dispute.create");
    // The notice only names the dispute: Paystack is asked first (the reconciler may ask again later).
    expect(fake.requests.slice(asked).find((r) => r.path.startsWith(`/dispute/${d.id}`))).toMatchObject({ method: "GET", path: `/dispute/${d.id}` });

    const dispute = await disputeOf(reference);
    expect(dispute).toMatchObject({
      transaction_reference: reference,
      amount: 120_000,
      currency: CURRENCY,
      // Paystack's category "chargeback" names no reason the gateway knows.
      reason: "general",
      status: "needs_response",
      due_by: new Date(d.dueAt!).toISOString(),
      provider_reference: String(d.id),
      evidence: null,
      closed_at: null,
      fee: 0,
    });
    expect(dispute.id).toMatch(/^dp_/);
    expect(dispute.messages).toEqual([{ sender: "disputes@paystack.test", body: d.messages[0]!.body, created_at: d.messages[0]!.at }]);
    expect(await getDispute(dispute.id)).toEqual(dispute);

    const after = await balance();
    expect(after.disputed - before.disputed).toBe(120_000);
    expect(after.available - before.available).toBe(-120_000);
    expect(await ledgerOf(dispute.id)).toEqual([["dispute_hold", -120_000]]);
    expect(await verify(reference)).toMatchObject({ status: "completed", disputed: true, dispute_status: "needs_response" });

    const hooks = await webhooksOf(dispute.id, 1);
    expect(hooks.map((h) => h.type)).toEqual(["dispute.created"]);
    expect(hooks[0]!.data).toMatchObject({ id: dispute.id, status: "needs_response", amount: 120_000, transaction_reference: reference, due_by: dispute.due_by });
  });

  it("the same create webhook 50 times at once: one dispute, one dispute.created, one hold", async () => {
    const reference = await paidPayment(64_000);
    const before = await balance();
    const d = fake.openDispute(reference);
    await notify(d, "charge.dispute.create", 50);
    const dispute = await disputeOf(reference);
    expect((await api.get(`/v1/disputes?transaction=${reference}`)).body.total).toBe(1);
    expect((await eventsOf(dispute.id)).map((e) => e.type)).toEqual(["dispute.created"]);
    expect((await webhooksOf(dispute.id, 1)).map((h) => h.type)).toEqual(["dispute.created"]);
    expect(await ledgerOf(dispute.id)).toEqual([["dispute_hold", -64_000]]);
    expect((await balance()).disputed - before.disputed).toBe(64_000);
  });

  it("charge.dispute.remind: one dispute.updated per reminder, not one per delivery; a new deadline or message at Paystack is an update too", async () => {
    const { d, dispute } = await openedDispute(30_000);
    expect((await webhooksOf(dispute.id, 1)).map((h) => h.type)).toEqual(["dispute.created"]);
    // Four hours pass before Paystack reminds (the service records a reminder at most every 30 minutes).
    await prisma().dispute.update({ where: { reference: dispute.id }, data: { updatedAt: new Date(Date.now() - 4 * 3_600_000) } });
    await notify(d, "charge.dispute.remind", 50);
    expect((await eventsOf(dispute.id)).map((e) => e.type)).toEqual(["dispute.created", "dispute.updated"]);
    // Delivered again, the same reminder records nothing (the dispute was updated just now).
    await notify(d, "charge.dispute.remind", 5);
    expect((await eventsOf(dispute.id)).map((e) => e.type)).toEqual(["dispute.created", "dispute.updated"]);

    // Paystack moves the deadline and the bank writes again: its next reminder carries both (the reconciler may see it first).
    const dueAt = new Date(Date.now() + 72 * 3_600_000).toISOString();
    const at = new Date().toISOString();
    d.dueAt = dueAt;
    d.messages.push({ sender: "bank@issuer.test", body: "Please send proof of delivery", at });
    await notify(d, "charge.dispute.remind", 50);
    expect((await eventsOf(dispute.id)).map((e) => e.type)).toEqual(["dispute.created", "dispute.updated", "dispute.updated"]);
    const updated = await getDispute(dispute.id);
    expect(updated).toMatchObject({ status: "needs_response", due_by: dueAt, amount: 30_000 });
    expect(updated.messages.at(-1)).toEqual({ sender: "bank@issuer.test", body: "Please send proof of delivery", created_at: at });
    const hooks = await webhooksOf(dispute.id, 3);
    expect(hooks.map((h) => h.type)).toEqual(["dispute.created", "dispute.updated", "dispute.updated"]);
    expect(hooks[2]!.data).toMatchObject({ status: "needs_response", due_by: dueAt });
  });

  it("evidence: a real PDF reaches Paystack's signed URL byte for byte, a text file named .pdf and a file over 5 MB are refused; submitting contests at Paystack; declined by the bank: won, the hold released", async () => {
    const { reference, d, dispute } = await openedDispute(90_000);
    const before = await balance();

    const pdf = tinyPdf();
    const uploaded = await uploadFile(dispute.id, "delivery-note.pdf", pdf);
    expect(uploaded.status, uploaded.text).toBe(201);
    expect(uploaded.body).toEqual({ status: "success", data: { id: expect.stringMatching(/^df_/), name: "delivery-note.pdf", size: pdf.length, content_type: "application/pdf" } });
    const atPaystack = [...fake.uploads.entries()].filter(([, u]) => u.disputeId === d.id);
    expect(atPaystack).toHaveLength(1);
    const [paystackFileName, stored] = atPaystack[0]!;
    expect(stored.requestedName).toBe("delivery-note.pdf");
    expect(Buffer.compare(stored.bytes!, pdf)).toBe(0);
    expect(stored.contentType).toBe("application/pdf");
    const put = fake.requests.find((r) => r.method === "PUT" && r.path.startsWith(`/uploads/${paystackFileName}?`))!;
    expect(put.headers.authorization).toBeUndefined(); // the signed URL alone authorizes it: the key never goes there

    const text = await uploadFile(dispute.id, "x.pdf", Buffer.from("I am not a PDF, whatever my name says\n"));
    expect(text.status, text.text).toBe(400);
    expect(text.body).toMatchObject({ status: "error", message: expect.stringMatching(/PDF, PNG or JPEG.*content/) });
    // A PDF just over 5 MB, and one well over the request's limit: 413 saying so, never a 500.
    for (const size of [5 * 1024 * 1024 + 1, 7 * 1024 * 1024]) {
      const big = Buffer.alloc(size, 0x20);
      pdf.copy(big);
      const res = await uploadFile(dispute.id, "scan.pdf", big);
      expect(res.status, res.text).toBe(413);
      expect(res.body).toEqual({ status: "error", code: "payload_too_large", message: "file: the file must be at most 5 MB" });
    }
    expect([...fake.uploads.values()].filter((u) => u.disputeId === d.id)).toHaveLength(1);
    expect((await getDispute(dispute.id)).files).toEqual([uploaded.body.data]);

    const submitted = await api.post(`/v1/disputes/${dispute.id}/evidence`, { ...EVIDENCE, uploaded_files: [uploaded.body.data.id], submit: true });
    expect(submitted.status, submitted.text).toBe(200);
    expect(submitted.body.data).toMatchObject({ status: "under_review", evidence: { ...EVIDENCE, uploaded_files: [uploaded.body.data.id] } });
    expect(submitted.body.data.evidence_submitted_at).not.toBeNull();
    expect(d.status).toBe("awaiting-bank-feedback");
    expect(d.evidence).toMatchObject(EVIDENCE);
    expect(d.resolves).toEqual([{ resolution: "declined", message: expect.any(String), refund_amount: 90_000, uploaded_filename: paystackFileName, evidence: d.evidence!.id }]);
    // Under review, nothing moves yet; and it can be answered only once.
    expect((await balance()).disputed).toBe(before.disputed);
    const again = await api.post(`/v1/disputes/${dispute.id}/evidence`, { ...EVIDENCE, submit: true });
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe("dispute_closed");

    fake.resolveDispute(d.id, "declined");
    await notify(d, "charge.dispute.resolve");
    const won = await getDispute(dispute.id);
    expect(won).toMatchObject({ status: "won", amount: 90_000 });
    expect(won.closed_at).not.toBeNull();
    const after = await balance();
    expect(after.disputed - before.disputed).toBe(-90_000);
    expect(after.charged_back).toBe(before.charged_back);
    expect(await ledgerOf(dispute.id)).toEqual([["dispute_hold", -90_000], ["dispute_release", 90_000]]);
    expect(await verify(reference)).toMatchObject({ status: "completed", disputed: true, dispute_status: "won" });
    // One created, one closed; the submission's update first. Paystack keeps the merchant's resolve message in the
    // dispute's messages: a reconciler pass before the verdict sees one message more and records a second update.
    const hooks = await webhooksOf(dispute.id, 3);
    const types = hooks.map((h) => h.type);
    expect(types.filter((t) => t !== "dispute.updated")).toEqual(["dispute.created", "dispute.closed"]);
    expect(types.at(-1)).toBe("dispute.closed");
    expect(types.length).toBeLessThanOrEqual(4);
    expect(hooks[1]).toMatchObject({ type: "dispute.updated", data: { status: "under_review", evidence_submitted_at: submitted.body.data.evidence_submitted_at } });
    expect(hooks.at(-1)!.data).toMatchObject({ status: "won", closed_at: won.closed_at });
  });

  it("accept: Paystack resolves merchant-accepted with the refund amount; lost, charged back, and no refund is left to make", async () => {
    const { reference, d, dispute } = await openedDispute(45_000);
    const before = await balance();
    const accepted = await api.post(`/v1/disputes/${dispute.id}/accept`, {});
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.body.data).toMatchObject({ status: "lost" });
    expect(accepted.body.data.closed_at).not.toBeNull();
    expect(d).toMatchObject({ status: "resolved", resolution: "merchant-accepted" });
    expect(d.resolves).toEqual([{ resolution: "merchant-accepted", message: expect.any(String), refund_amount: 45_000, uploaded_filename: "" }]);

    const after = await balance();
    expect(after.disputed - before.disputed).toBe(-45_000);
    expect(after.charged_back - before.charged_back).toBe(45_000);
    expect(after.available).toBe(before.available);
    expect(await ledgerOf(dispute.id)).toEqual([["dispute_hold", -45_000], ["dispute_loss", 0]]);
    expect(await verify(reference)).toMatchObject({ status: "completed", disputed: true, dispute_status: "lost" });
    const refund = await api.post("/v1/refunds", { transaction: reference, amount: 1 });
    expect(refund.status, refund.text).toBe(409);
    expect(refund.body.code).toBe("amount_exceeds_refundable");
    // Paystack's resolve webhook afterwards changes nothing.
    await notify(d, "charge.dispute.resolve");
    expect((await webhooksOf(dispute.id, 2)).map((h) => h.type)).toEqual(["dispute.created", "dispute.closed"]);
  });

  it("a lost webhook: Paystack auto-accepts at the deadline and posts nothing; the reconciler finds it lost on its own", async () => {
    const { reference, d, dispute } = await openedDispute(27_000);
    const before = await balance();
    const sent = fake.webhooksSent.length;
    fake.resolveDispute(d.id, "auto-accepted");
    const lost = await until(() => getDispute(dispute.id), (x) => x.status !== "needs_response");
    expect(lost).toMatchObject({ status: "lost", amount: 27_000 });
    expect(fake.webhooksSent.slice(sent)).toEqual([]);
    const after = await balance();
    expect(after.disputed - before.disputed).toBe(-27_000);
    expect(after.charged_back - before.charged_back).toBe(27_000);
    expect(await verify(reference)).toMatchObject({ disputed: true, dispute_status: "lost" });
    expect((await webhooksOf(dispute.id, 2)).map((h) => h.type)).toEqual(["dispute.created", "dispute.closed"]);
  });

  it("a partly refunded payment: the dispute holds only what is left; a refund while it is open is 409 transaction_disputed; once lost, nothing is refundable", async () => {
    const reference = await paidPayment(100_000);
    const refunded = await api.post("/v1/refunds", { transaction: reference, amount: 30_000 });
    expect(refunded.status, refunded.text).toBe(201);
    await until(() => api.get(`/v1/refunds/${refunded.body.data.id}`), (r) => r.body.data.status === "completed");

    const before = await balance();
    const d = fake.openDispute(reference); // for the whole 100_000
    await notify(d, "charge.dispute.create");
    const dispute = await disputeOf(reference);
    expect(dispute).toMatchObject({ amount: 70_000, status: "needs_response" });
    expect((await balance()).disputed - before.disputed).toBe(70_000);
    expect(await ledgerOf(dispute.id)).toEqual([["dispute_hold", -70_000]]);

    const refund = await api.post("/v1/refunds", { transaction: reference, amount: 10_000 });
    expect(refund.status, refund.text).toBe(409);
    expect(refund.body).toMatchObject({ status: "error", code: "transaction_disputed" });

    fake.resolveDispute(d.id, "auto-accepted");
    await notify(d, "charge.dispute.resolve");
    expect(await getDispute(dispute.id)).toMatchObject({ status: "lost", amount: 70_000 });
    expect((await balance()).charged_back - before.charged_back).toBe(70_000);
    const after = await api.post("/v1/refunds", { transaction: reference, amount: 1 });
    expect(after.status, after.text).toBe(409);
    expect(after.body.code).toBe("amount_exceeds_refundable");
  });

  it("roles and tenants: a viewer key reads but cannot answer (403); another merchant sees no such dispute (404); past the deadline, nothing can be submitted (409 dispute_closed)", async () => {
    const { d, dispute } = await openedDispute(15_000);
    const viewerKey = await gw.gateway.services.merchants.createKey(merchant.id, "test", { role: "viewer" });
    const viewer = apiClient(gw.url, viewerKey.plaintext);
    expect((await viewer.get(`/v1/disputes/${dispute.id}`)).body.data).toEqual(await getDispute(dispute.id));
    expect((await viewer.get("/v1/disputes")).body.data.map((x: { id: string }) => x.id)).toContain(dispute.id);
    for (const [path, body] of [[`/v1/disputes/${dispute.id}/evidence`, { ...EVIDENCE, submit: true }], [`/v1/disputes/${dispute.id}/accept`, {}]] as const) {
      const res = await viewer.post(path, body);
      expect(res.status, res.text).toBe(403);
      expect(res.body).toMatchObject({ status: "error", code: "forbidden", message: expect.any(String) });
    }
    const viewerUpload = await uploadFile(dispute.id, "a.pdf", tinyPdf(), viewerKey.plaintext);
    expect(viewerUpload.status, viewerUpload.text).toBe(403);

    const other = apiClient(gw.url, (await gw.createMerchant("Mombasa Spices")).testKey);
    for (const res of [await other.get(`/v1/disputes/${dispute.id}`), await other.post(`/v1/disputes/${dispute.id}/accept`, {}), await other.post(`/v1/disputes/${dispute.id}/evidence`, { ...EVIDENCE, submit: true })]) {
      expect(res.status, res.text).toBe(404);
      expect(res.body).toMatchObject({ status: "error", code: "not_found" });
    }
    expect((await other.get("/v1/disputes")).body).toMatchObject({ data: [], total: 0 });
    // Nothing of it reached Paystack, and it is still open.
    expect(d.resolves).toEqual([]);
    expect(d.evidence).toBeNull();
    expect(await getDispute(dispute.id)).toMatchObject({ status: "needs_response" });

    const late = await openedDispute(12_000, { dueAt: new Date(Date.now() - 60_000).toISOString() });
    for (const [path, body] of [[`/v1/disputes/${late.dispute.id}/evidence`, { ...EVIDENCE, submit: true }], [`/v1/disputes/${late.dispute.id}/accept`, {}]] as const) {
      const res = await api.post(path, body);
      expect(res.status, res.text).toBe(409);
      expect(res.body).toMatchObject({ status: "error", code: "dispute_closed", message: expect.stringContaining("can no longer be answered") });
    }
    expect(late.d.resolves).toEqual([]);
    expect(late.d.evidence).toBeNull();
  });

  it("the disputeEvents subscription sees dispute.created for a new dispute", async () => {
    const client = wsClient(gw.url, merchant.testKey);
    const events = collect(client, DisputeEvents);
    try {
      await events.ready();
      const reference = await paidPayment(8_000);
      const d = fake.openDispute(reference);
      await notify(d, "charge.dispute.create");
      const dispute = await disputeOf(reference);
      const mine = () => events.results.filter((r) => r.data?.disputeEvents.dispute.reference === dispute.id);
      await until(() => mine(), (list) => list.length >= 1);
      expect(mine().map((r) => r.data!.disputeEvents)).toEqual([
        { id: expect.any(String), type: "dispute.created", dispute: { reference: dispute.id, status: "needs_response", amount: 8_000, transactionReference: reference } },
      ]);
      expect(events.error).toBeUndefined();
    } finally {
      events.dispose();
      await client.dispose();
    }
  });

  it("provider calls: every dispute call to Paystack is on record against its payment, and none holds the secret key or an upload URL's signature", async () => {
    await gw.gateway.services.providerCalls.flush();
    const rows = await prisma().providerCall.findMany({ where: { merchantId: merchant.id, operation: { startsWith: "dispute" } }, orderBy: { id: "asc" } });
    expect(new Set(rows.map((r) => r.operation))).toEqual(
      new Set(["dispute_lookup", "dispute_file_upload_url", "dispute_file_upload", "dispute_evidence", "dispute_contest", "dispute_acceptance"]),
    );
    // A notice of a dispute the gateway does not know yet is asked about before its payment is known; every other call names it.
    expect(rows.filter((r) => r.operation !== "dispute_lookup").every((r) => r.transactionId !== null)).toBe(true);
    const signatures = [...fake.uploads.values()].map((u) => u.signature);
    assertNoSecrets(rows, { known: [fake.secretKey, ...signatures] });
  });
});
