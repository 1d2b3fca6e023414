import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayError } from "../../src/errors.ts";
import type { ProviderCallRecord } from "../../src/providers/call-record.ts";
import { readPaystackDispute } from "../../src/providers/paystack/disputes.ts";
import { createPaystackConnector } from "../../src/providers/paystack/index.ts";
import type { DisputedPayment, DisputeEvidence, DisputeQuery } from "../../src/providers/types.ts";
import { paystackSignature, startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";

/**
 * Paystack's chargebacks: its dispute object (REST and webhook shapes from Paystack's samples, providers.md) read
 * provider-neutrally, dispute webhooks read as notices, and the connector against the loopback Paystack end to end.
 */

/** GET /dispute/:id as Paystack's sample answers it: archived, no resolution, refund_amount and currency null, attachments a string. */
const REST_SAMPLE = {
  id: 2867, refund_amount: null, currency: null, status: "archived", resolution: null, domain: "test",
  transaction: { id: 5991760, domain: "test", status: "success", reference: "asjck8gf76zd1dr", amount: 39100, currency: "NGN", channel: "card", paidAt: "2017-11-09T00:01:56.000Z", createdAt: "2017-11-09T00:01:36.000Z" },
  transaction_reference: null, category: null, customer: { id: 10207, email: "shola@baddest.com" }, bin: null, last4: null,
  dueAt: null, resolvedAt: null, evidence: null, attachments: "[]", note: null,
  history: [{ status: "pending", by: "demo@test.co", createdAt: "2017-11-16T16:12:24.000Z" }],
  messages: [{ sender: "demo@test.co", body: "test this", createdAt: "2017-11-16T16:12:24.000Z" }],
  createdAt: "2017-11-16T16:12:24.000Z", updatedAt: "2019-08-16T08:05:25.000Z",
};

/** charge.dispute.create's data: snake_case created_at, camelCase dueAt, attachments null. */
const WEBHOOK_SAMPLE = {
  id: 358950, refund_amount: 5800, currency: "KES", status: "awaiting-merchant-feedback", resolution: null, domain: "live",
  transaction: { id: 100455, domain: "live", status: "success", reference: "txn_abc123", amount: 5800, currency: "KES", channel: "card" },
  transaction_reference: null, category: "chargeback", customer: { id: 10207, email: "payer@example.com" }, bin: "408408", last4: "4081",
  dueAt: "2024-11-25T18:00:00.000Z", resolvedAt: null, evidence: null, attachments: null, note: null,
  history: [{ status: "pending", by: "bank@example.com", created_at: "2024-11-23T14:33:29.000Z" }],
  messages: [{ sender: "bank@example.com", body: "Customer complained about debit without value", created_at: "2024-11-23T14:33:29.000Z" }],
  created_at: "2024-11-23T14:33:29.000Z", updated_at: "2024-11-23T14:33:29.000Z",
};

const caught = async (promise: Promise<unknown>) => promise.then(() => expect.fail("did not throw"), (error: unknown) => error as GatewayError);

describe("a Paystack dispute, read", () => {
  it("REST sample: the payment's reference and amount from the embedded transaction when refund_amount and currency are null", () => {
    expect(readPaystackDispute(REST_SAMPLE)).toEqual({
      providerReference: "2867",
      paymentReference: "asjck8gf76zd1dr",
      amount: 39100n,
      currency: "NGN",
      reason: "general",
      // Archived with no resolution and the payment not reversed: no verdict to act on.
      state: "under_review",
      dueBy: null,
      resolvedAt: null,
      messages: [{ sender: "demo@test.co", body: "test this", createdAt: "2017-11-16T16:12:24.000Z" }],
      fee: 0n,
    });
  });

  it("webhook sample: snake_case message times, camelCase dueAt, attachments null", () => {
    const dispute = readPaystackDispute(WEBHOOK_SAMPLE);
    expect(dispute).toMatchObject({ providerReference: "358950", paymentReference: "txn_abc123", amount: 5800n, currency: "KES", state: "needs_response", dueBy: new Date("2024-11-25T18:00:00.000Z") });
    expect(dispute.messages).toEqual([{ sender: "bank@example.com", body: "Customer complained about debit without value", createdAt: "2024-11-23T14:33:29.000Z" }]);
  });

  it.each([
    ["awaiting-merchant-feedback", null, "success", "needs_response"],
    ["awaiting-bank-feedback", null, "success", "under_review"],
    ["pending", null, "success", "under_review"],
    ["resolved", "declined", "success", "won"],
    ["archived", "declined", "success", "won"],
    ["resolved", "merchant-accepted", "success", "lost"],
    ["resolved", "auto-accepted", "success", "lost"],
    ["archived", "merchant-accepted", "success", "lost"],
    // The payer got the money back: lost, whatever the resolution says or leaves out.
    ["resolved", null, "reversed", "lost"],
    ["resolved", "declined", "reversed", "lost"],
    ["resolved", null, "success", "under_review"],
    ["a-status-paystack-adds-later", null, "success", "under_review"],
  ])("status %s, resolution %s, transaction %s -> %s", (status, resolution, transactionStatus, state) => {
    const dispute = readPaystackDispute({ ...WEBHOOK_SAMPLE, status, resolution, transaction: { ...WEBHOOK_SAMPLE.transaction, status: transactionStatus } });
    expect(dispute.state).toBe(state);
  });

  it.each([
    [{ category: "fraud" }, "fraudulent"],
    [{ category: "chargeback", reason: "Fraudulent transaction" }, "fraudulent"],
    [{ category: "chargeback", note: "Goods not received" }, "product_not_received"],
    [{ category: "non-receipt" }, "product_not_received"],
    [{ category: "chargeback", reason: "Duplicate debit" }, "duplicate"],
    [{ category: "chargeback" }, "general"],
    [{ category: "general" }, "general"],
    [{ category: 7 }, "general"],
  ])("reason from %j -> %s", (fields, reason) => {
    expect(readPaystackDispute({ ...WEBHOOK_SAMPLE, ...fields }).reason).toBe(reason);
  });

  it("amount: refund_amount when given (a partial claim), else the transaction's; unknown when neither says", () => {
    expect(readPaystackDispute({ ...WEBHOOK_SAMPLE, refund_amount: 2500 }).amount).toBe(2500n);
    expect(readPaystackDispute({ ...WEBHOOK_SAMPLE, refund_amount: null }).amount).toBe(5800n);
    const { refund_amount: _gone, ...missing } = WEBHOOK_SAMPLE;
    expect(readPaystackDispute(missing).amount).toBe(5800n);
    expect(readPaystackDispute({ ...WEBHOOK_SAMPLE, refund_amount: 12.5, transaction: { reference: "txn_abc123" } }).amount).toBeNull();
  });

  it("resolvedAt camelCase; a transaction given only as its id still reads", () => {
    const dispute = readPaystackDispute({ ...REST_SAMPLE, status: "resolved", resolution: "declined", resolvedAt: "2019-08-28T15:23:31.000Z", transaction: 5991760, transaction_reference: "asjck8gf76zd1dr" });
    expect(dispute).toMatchObject({ state: "won", resolvedAt: new Date("2019-08-28T15:23:31.000Z"), paymentReference: "asjck8gf76zd1dr", amount: null });
  });

  it("messages oldest first, each body cut to 2,000 characters; odd entries tolerated", () => {
    const messages = [
      { sender: "merchant@example.com", body: "x".repeat(3000), createdAt: "2024-11-24T10:00:00.000Z" },
      { sender: "bank@example.com", body: "first", created_at: "2024-11-23T10:00:00.000Z" },
    ];
    const read = readPaystackDispute({ ...WEBHOOK_SAMPLE, messages }).messages;
    expect(read.map((m) => m.sender)).toEqual(["bank@example.com", "merchant@example.com"]);
    expect(read[1]!.body).toHaveLength(2000);
    expect(readPaystackDispute({ ...WEBHOOK_SAMPLE, messages: [null, "text", { body: 5 }] }).messages).toEqual([{ sender: "", body: "", createdAt: null }]);
    expect(readPaystackDispute({ ...WEBHOOK_SAMPLE, messages: "[]" }).messages).toEqual([]);
  });

  it("a dispute without a readable id cannot be read (unknown, asked again)", () => {
    for (const id of [undefined, null, "abc", 1.5]) {
      let error: unknown;
      try {
        readPaystackDispute({ ...WEBHOOK_SAMPLE, id });
      } catch (thrown) {
        error = thrown;
      }
      expect(error).toBeInstanceOf(GatewayError);
      expect((error as GatewayError).code).toBe("provider_unavailable");
    }
  });
});

describe("dispute webhooks, read as notices", () => {
  const SECRET = "sk_test_4f1e0c3d2b1a09f8e7d6c5b4a3928170";
  const inbound = createPaystackConnector().inbound!;
  const read = (body: unknown, signature?: string) => {
    const raw = JSON.stringify(body);
    return inbound.read({ path: "", params: {}, rawBody: Buffer.from(raw), contentType: "application/json", headers: { "x-paystack-signature": signature ?? paystackSignature(raw, SECRET) }, config: () => ({ public_key: "pk_test_x", secret_key: SECRET }) });
  };

  it.each(["charge.dispute.create", "charge.dispute.remind", "charge.dispute.resolve"])("%s names the dispute by Paystack's id", (event) => {
    expect(read({ event, data: WEBHOOK_SAMPLE })).toEqual({ kind: "notification", notification: { kind: "dispute", event, providerReference: "358950" } });
    expect(read({ event, data: { ...WEBHOOK_SAMPLE, id: "358950" } })).toEqual({ kind: "notification", notification: { kind: "dispute", event, providerReference: "358950" } });
  });

  it("a bad signature is refused before anything is read", () => {
    const body = { event: "charge.dispute.create", data: WEBHOOK_SAMPLE };
    for (const signature of [paystackSignature(JSON.stringify(body), "sk_test_other"), "a".repeat(128), ""]) {
      let error: unknown;
      try {
        read(body, signature);
      } catch (thrown) {
        error = thrown;
      }
      expect((error as GatewayError).code).toBe("invalid_signature");
    }
  });

  it.each([["abc"], [0], [-4], [1.5], [null], ["12a"]])("an id of %j is nothing to act on", (id) => {
    expect(read({ event: "charge.dispute.create", data: { ...WEBHOOK_SAMPLE, id } })).toEqual({ kind: "notification", notification: { kind: "other", event: "charge.dispute.create" } });
  });
});

describe("the dispute connector against the loopback Paystack", () => {
  let fake: FakePaystack;
  let receiver: WebhookReceiver;
  const records: ProviderCallRecord[] = [];
  let disputes: ReturnType<typeof createPaystackConnector>["disputes"] & {};
  let config: ReturnType<FakePaystack["channelConfig"]>;

  beforeAll(async () => {
    fake = await startFakePaystack();
    receiver = await startWebhookReceiver();
    config = fake.channelConfig();
    disputes = createPaystackConnector({ baseUrl: fake.url, recordCall: (record) => void records.push(record) }).disputes!;
  });
  afterAll(async () => {
    await fake?.close();
    await receiver?.close();
  });

  let paid = 0;
  /** A paid KES 1,500.00 payment with a chargeback opened on it. */
  function disputed(opts: Parameters<FakePaystack["openDispute"]>[1] = {}) {
    const t = fake.inject({ reference: `txn_dispute_${++paid}`, amount: 150_000, currency: "KES" });
    const dispute = fake.openDispute(t.reference, opts);
    const payment: DisputedPayment = { reference: t.reference, amount: 150_000n, currency: "KES", providerReference: String(t.id), completedAt: new Date() };
    const query: DisputeQuery = { config, providerReference: String(dispute.id), payment, submitted: null, acceptedAt: null };
    return { t, dispute, payment, query };
  }
  const EVIDENCE: DisputeEvidence = {
    customerName: "Amina Otieno", customerEmail: "amina@example.com", customerPhone: "+254708374149",
    serviceDetails: "Two tickets to the Nairobi show, scanned at the gate", deliveryAddress: "Kenyatta Ave 12, Nairobi", deliveryDate: "2024-11-20",
  };

  it("fetch: what Paystack's REST answer says, read", async () => {
    const { dispute, query, t } = disputed({ amount: 90_000, category: "fraud" });
    expect(await disputes.fetch(query)).toEqual({
      providerReference: String(dispute.id), paymentReference: t.reference, amount: 90_000n, currency: "KES", reason: "fraudulent", state: "needs_response",
      dueBy: new Date(dispute.dueAt!), resolvedAt: null, messages: [{ sender: "disputes@paystack.test", body: "Customer complained about debit without value", createdAt: dispute.createdAt }], fee: 0n,
    });
  });

  it("fetch: an id Paystack does not know is its refusal (provider_error); a 5xx is provider_unavailable", async () => {
    const { query } = disputed();
    expect(await caught(disputes.fetch({ ...query, providerReference: "999" }))).toMatchObject({ code: "provider_error", message: expect.stringContaining("Dispute not found") });
    fake.switches.failNext = { path: `/dispute/${query.providerReference}`, status: 503, body: { status: false, message: "Service unavailable" } };
    expect(await caught(disputes.fetch(query))).toMatchObject({ code: "provider_unavailable" });
  });

  it("ofPayment: the dispute on the payment by Paystack's transaction id; null for an undisputed payment or one Paystack has no id for", async () => {
    const { dispute, payment } = disputed();
    expect(await disputes.ofPayment!({ config, payment })).toMatchObject({ providerReference: String(dispute.id), paymentReference: payment.reference, state: "needs_response" });
    const undisputed = fake.inject({ reference: "txn_undisputed", amount: 5_000, currency: "KES" });
    expect(await disputes.ofPayment!({ config, payment: { ...payment, reference: undisputed.reference, providerReference: String(undisputed.id) } })).toBeNull();
    const asked = fake.requests.length;
    expect(await disputes.ofPayment!({ config, payment: { ...payment, providerReference: null } })).toBeNull();
    expect(fake.requests.length).toBe(asked);
  });

  it("uploadFile: a signed URL, then the exact bytes PUT there without the secret key; the file named as Paystack named it", async () => {
    const { dispute, query } = disputed();
    const bytes = Buffer.concat([Buffer.from("%PDF-1.7\n"), Buffer.from([0x00, 0xff, 0x80, 0xfe, 0x0a]), Buffer.alloc(2048, 7)]);
    const { providerFileName } = await disputes.uploadFile({ config, providerReference: query.providerReference, fileName: "receipt.pdf", contentType: "application/pdf", bytes });
    const upload = fake.uploads.get(providerFileName)!;
    expect(upload).toMatchObject({ disputeId: dispute.id, requestedName: "receipt.pdf", contentType: "application/pdf" });
    expect(upload.bytes!.equals(bytes)).toBe(true);
    const put = fake.requests.find((r) => r.method === "PUT" && r.path.startsWith(`/uploads/${providerFileName}`))!;
    expect(put.headers.authorization).toBeUndefined();
    const recorded = records.filter((r) => r.operation.startsWith("dispute_file_upload")).slice(-2);
    expect(recorded.map((r) => [r.operation, r.method, r.path, r.statusCode])).toEqual([
      ["dispute_file_upload_url", "GET", `/dispute/${dispute.id}/upload_url`, 200],
      ["dispute_file_upload", "PUT", `/uploads/${providerFileName}`, 200],
    ]);
    expect(recorded[1]!.requestBody).toBe(`<file ${bytes.length} bytes application/pdf>`);
    // The signed URL lets anyone write the file while it lasts: kept out of the record; the name Paystack gave stays.
    expect(JSON.parse(recorded[0]!.responseBody!).data).toEqual({ signedUrl: "[redacted]", fileName: providerFileName });
  });

  it("uploadFile: storage refusing the upload is a refusal, not a success", async () => {
    const { query } = disputed();
    fake.switches.failNext = { path: "/uploads/", status: 403, body: { message: "Request has expired" } };
    expect(await caught(disputes.uploadFile({ config, providerReference: query.providerReference, fileName: "a.png", contentType: "image/png", bytes: Buffer.from([1, 2, 3]) }))).toMatchObject({ code: "provider_error" });
  });

  it("contest: evidence, then resolve declined naming the evidence and the file; Paystack awaits the bank; the bank's verdict is read as won", async () => {
    const { dispute, query } = disputed();
    const { providerFileName } = await disputes.uploadFile({ config, providerReference: query.providerReference, fileName: "receipt.pdf", contentType: "application/pdf", bytes: Buffer.from("%PDF-1.7 receipt") });
    await disputes.contest({ ...query, evidence: EVIDENCE, files: [providerFileName], amount: 150_000n, message: "The payer attended the show" });
    expect(dispute.status).toBe("awaiting-bank-feedback");
    expect(dispute.evidence).toMatchObject({
      customer_email: "amina@example.com", customer_name: "Amina Otieno", customer_phone: "+254708374149",
      service_details: EVIDENCE.serviceDetails, delivery_address: "Kenyatta Ave 12, Nairobi", delivery_date: "2024-11-20",
    });
    expect(dispute.resolves).toEqual([{ resolution: "declined", message: "The payer attended the show", refund_amount: 150_000, uploaded_filename: providerFileName, evidence: dispute.evidence!.id }]);
    expect((await disputes.fetch(query)).state).toBe("under_review");
    fake.resolveDispute(dispute.id, "declined");
    expect(await disputes.fetch(query)).toMatchObject({ state: "won", resolvedAt: new Date(dispute.resolvedAt!) });
  });

  it("contest without a file or delivery details: uploaded_filename sent empty, the optional fields left out", async () => {
    const { dispute, query } = disputed();
    await disputes.contest({ ...query, evidence: { ...EVIDENCE, deliveryAddress: null, deliveryDate: null }, files: [], amount: 150_000n, message: "Contested" });
    expect(dispute.status).toBe("awaiting-bank-feedback");
    expect(dispute.evidence).not.toHaveProperty("delivery_address");
    expect(dispute.evidence).not.toHaveProperty("delivery_date");
    expect(dispute.resolves[0]).toMatchObject({ uploaded_filename: "" });
  });

  it("contest: evidence Paystack refuses (a required field blank) is provider_error, and nothing is resolved", async () => {
    const { dispute, query } = disputed();
    const error = await caught(disputes.contest({ ...query, evidence: { ...EVIDENCE, customerPhone: "" }, files: [], amount: 150_000n, message: "Contested" }));
    expect(error).toMatchObject({ code: "provider_error", message: expect.stringContaining("customer_phone is required") });
    expect(dispute.resolves).toEqual([]);
  });

  it("accept: resolved merchant-accepted with the refund amount; the payment reversed at Paystack; read as lost", async () => {
    const { dispute, query, t } = disputed();
    await disputes.accept({ ...query, amount: 150_000n, message: "We accept" });
    expect(dispute).toMatchObject({ status: "resolved", resolution: "merchant-accepted" });
    expect(dispute.resolves).toEqual([{ resolution: "merchant-accepted", message: "We accept", refund_amount: 150_000, uploaded_filename: "" }]);
    expect(t.status).toBe("reversed");
    expect((await disputes.fetch(query)).state).toBe("lost");
  });

  it("a refund amount above the payment is Paystack's refusal (provider_error) with its message", async () => {
    const { dispute, query } = disputed();
    const error = await caught(disputes.accept({ ...query, amount: 150_001n, message: "We accept" }));
    expect(error).toBeInstanceOf(GatewayError);
    expect(error).toMatchObject({ code: "provider_error", message: expect.stringContaining("Refund amount cannot be greater than initial amount") });
    expect(dispute.status).toBe("awaiting-merchant-feedback");
  });

  it("the fake's dispute webhooks (webhook shape, signed) read as dispute notices; an auto-accepted resolve reads as lost", async () => {
    const { dispute, query } = disputed();
    for (const event of ["charge.dispute.create", "charge.dispute.remind"] as const) await fake.sendDisputeWebhook(dispute.id, event, receiver.url);
    fake.resolveDispute(dispute.id, "auto-accepted");
    await fake.sendDisputeWebhook(dispute.id, "charge.dispute.resolve", receiver.url);
    const delivered = await receiver.waitFor(3);
    const inbound = createPaystackConnector().inbound!;
    for (const [i, event] of ["charge.dispute.create", "charge.dispute.remind", "charge.dispute.resolve"].entries()) {
      const webhook = delivered[i]!;
      expect(webhook.json.data).toMatchObject({ id: dispute.id, attachments: null, created_at: dispute.createdAt, dueAt: dispute.dueAt });
      expect(webhook.json.data).not.toHaveProperty("createdAt");
      const read = inbound.read({ path: "", params: {}, rawBody: Buffer.from(webhook.body), contentType: "application/json", headers: webhook.headers, config: () => config });
      expect(read).toEqual({ kind: "notification", notification: { kind: "dispute", event, providerReference: String(dispute.id) } });
    }
    expect(readPaystackDispute(delivered[2]!.json.data)).toMatchObject({ state: "lost", resolvedAt: new Date(dispute.resolvedAt!) });
    expect((await disputes.fetch(query)).state).toBe("lost");
  });

  it("every call is on record, and no record holds the secret key or the upload URL's signature", () => {
    const operations = new Set(records.map((r) => r.operation));
    for (const operation of ["dispute_lookup", "dispute_search", "dispute_file_upload_url", "dispute_file_upload", "dispute_evidence", "dispute_contest", "dispute_acceptance"]) {
      expect(operations).toContain(operation);
    }
    const all = JSON.stringify(records);
    expect(all).not.toContain(config.secret_key);
    expect(all).not.toContain("Bearer");
    expect(all).not.toMatch(/X-Amz-Signature=[0-9a-f]/);
  });
});
