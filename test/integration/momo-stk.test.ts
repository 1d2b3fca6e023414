import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createMpesaConnector } from "../../src/providers/mpesa/index.ts";
import { createMemoryTokenStore } from "../../src/providers/mpesa/token-store.ts";
import { withDaraja, type DarajaBench } from "../support/benches.ts";
import { jobsFallDue } from "../support/wait.ts";

/** M-Pesa STK push against a loopback Daraja: the connector, callbacks, reconciliation and REST shapes. */
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PHONE = "254708374149";

/** Bound when the bench is up (beforeAll). */
let { fake, gw, api, channelId, createChannel } = {} as DarajaBench;
const logLines: { level: number; msg: string }[] = [];
const logger = pino({ level: "warn" }, { write: (line: string) => void logLines.push(JSON.parse(line)) });

const prisma = () => gw.gateway.db.prisma;

async function push(body: Record<string, unknown> = {}) {
  return api.post("/api/momo/stk-push", { amount: 150000, phone_number: PHONE, payment_channel_id: channelId, reference: "INV-2024-000123-XYZ", description: "Order 123 for a long description", ...body });
}

async function pushOk(body: Record<string, unknown> = {}) {
  const res = await push(body);
  expect(res.status, res.text).toBe(200);
  return res.body.transaction as { id: number; reference: string; checkout_request_id: string };
}

const row = (id: number) => prisma().transaction.findUniqueOrThrow({ where: { id } });
/** Settling events (completed/failed); every push also has its transaction.pending event. */
const eventCount = (id: number) => prisma().event.count({ where: { transactionId: id, type: { not: "transaction.pending" } } });

withDaraja(
  { cleanLedger: true, env: { JOBS_ENABLED: "false", STK_CALLBACK_OVERDUE_MS: "1", STK_QUERY_BACKOFF_MS: "1", RATE_LIMIT_ENABLED: "false" }, logger },
  (bench) => {
    ({ fake, gw, api, channelId, createChannel } = bench);
  },
);

describe("STK push", () => {
  it("initiates with the documented shape and Daraja's wire format, and a success callback completes it", async () => {
    const res = await push();
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(["status", "message", "transaction"]);
    expect(res.body.status).toBe("success");
    const t = res.body.transaction;
    expect(Object.keys(t)).toEqual(["id", "reference", "amount", "phone_number", "status", "checkout_request_id", "created_at"]);
    expect(t).toMatchObject({ amount: 150000, phone_number: PHONE, status: "pending" });
    expect(t.reference).toMatch(/^txn-/);
    expect(t.checkout_request_id).toMatch(/^ws_CO_/);
    expect(t.created_at).toMatch(ISO_MS);

    // The fake already checked Password = base64(shortcode+passkey+Timestamp) and Nairobi time within a minute.
    const sent = fake.pushes.get(t.checkout_request_id)!.body;
    expect(sent).toMatchObject({ BusinessShortCode: fake.shortcode, TransactionType: "CustomerPayBillOnline", Amount: 1500, PartyA: PHONE, PartyB: fake.shortcode, PhoneNumber: PHONE });
    expect(sent.Timestamp).toMatch(/^\d{14}$/);
    expect(Buffer.from(sent.Password, "base64").toString()).toBe(`${fake.shortcode}${fake.passkey}${sent.Timestamp}`);
    expect(sent.AccountReference).toBe("INV-2024-000");
    expect(sent.TransactionDesc).toBe("Order 123 for");
    expect(sent.CallBackURL).toMatch(/^https:\/\/pay\.gateway\.test\/callbacks\/daraja\/[0-9a-f]+\/stk$/);
    for (const word of ["mpesa", "safaricom", "exe", "exec", "cmd", "sql", "query"]) expect(sent.CallBackURL.toLowerCase()).not.toContain(word);
    expect((await row(t.id)).clientReference).toBe("INV-2024-000123-XYZ");

    const ack = await fake.sendStkCallback(t.checkout_request_id, { receipt: "NLJ7RT61SV" });
    expect(ack).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });

    const status = await api.get(`/api/momo/stk-status/${t.reference}`);
    expect(status.status).toBe(200);
    expect(Object.keys(status.body)).toEqual(["status", "transaction"]);
    expect(Object.keys(status.body.transaction)).toEqual([
      "id", "reference", "amount", "phone_number", "status", "payment_method", "created_at",
      "currency", "client_reference", "provider_reference", "failure_code", "failure_reason", "amount_refunded", "refunded",
      "disputed", "dispute_status", "fee", "net",
    ]);
    expect(status.body.transaction).toMatchObject({ id: t.id, reference: t.reference, amount: 150000, phone_number: PHONE, status: "completed", payment_method: "momo_stk" });
    // The M-Pesa receipt (MpesaReceiptNumber) is shown, not only stored.
    expect(status.body.transaction).toMatchObject({ currency: "KES", client_reference: "INV-2024-000123-XYZ", provider_reference: "NLJ7RT61SV", failure_code: null, failure_reason: null });
    expect((await row(t.id)).providerReference).toBe("NLJ7RT61SV");
    const v1 = await api.get(`/v1/collections/stk/${t.reference}`);
    expect(v1.status, v1.text).toBe(200);
    expect(v1.body).toEqual({
      status: "success",
      data: {
        id: t.id,
        reference: t.reference,
        client_reference: "INV-2024-000123-XYZ",
        amount: 150000,
        currency: "KES",
        phone_number: PHONE,
        status: "completed",
        payment_method: "momo_stk",
        checkout_request_id: t.checkout_request_id,
        metadata: null,
        provider_reference: "NLJ7RT61SV",
        failure_code: null,
        failure_reason: null,
        created_at: expect.stringMatching(ISO_MS),
        completed_at: expect.stringMatching(ISO_MS),
      },
    });
    expect(await eventCount(t.id)).toBe(1);
  });

  it.each([1, 1032, 1037, 2001])("a failure callback with ResultCode %i fails the transaction with that code", async (code) => {
    const t = await pushOk();
    const ack = await fake.sendStkCallback(t.checkout_request_id, { resultCode: code, resultDesc: `Result ${code}` });
    expect(ack.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    const stored = await row(t.id);
    expect(stored).toMatchObject({ status: "failed", failureCode: String(code), failureReason: `Result ${code}` });
    const status = (await api.get(`/api/momo/stk-status/${t.reference}`)).body.transaction;
    expect(status).toMatchObject({ status: "failed", failure_code: String(code), failure_reason: `Result ${code}` });
  });

  it("a duplicated callback changes nothing and is still acknowledged", async () => {
    const t = await pushOk();
    const body = fake.stkCallbackBody(t.checkout_request_id, { receipt: "RCPTDUP001" });
    const url = new URL(fake.pushes.get(t.checkout_request_id)!.body.CallBackURL).pathname;
    const first = await fake.postJson(`${gw.url}${url}`, body);
    const again = await fake.postJson(`${gw.url}${url}`, body);
    const late = await fake.sendStkCallback(t.checkout_request_id, { resultCode: 1032 });
    for (const ack of [first, again, late]) expect(ack.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await row(t.id)).toMatchObject({ status: "completed", providerReference: "RCPTDUP001" });
    expect(await eventCount(t.id)).toBe(1);
  });

  it("a success callback whose receipt another transaction already holds is acknowledged and not applied", async () => {
    const first = await pushOk();
    const second = await pushOk();
    await fake.sendStkCallback(first.checkout_request_id, { receipt: "RCPTTAKEN1" });
    const replay = await fake.sendStkCallback(second.checkout_request_id, { receipt: "RCPTTAKEN1" });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await row(second.id)).toMatchObject({ status: "pending", providerReference: null });
    expect(await eventCount(second.id)).toBe(0);
    expect(logLines.some((l) => l.msg.includes("provider reference already recorded for another transaction"))).toBe(true);
    // The real receipt still settles it.
    await fake.sendStkCallback(second.checkout_request_id, { receipt: "RCPTOWN002" });
    expect(await row(second.id)).toMatchObject({ status: "completed", providerReference: "RCPTOWN002" });
  });

  it("racing callbacks settle the transaction exactly once", async () => {
    const t = await pushOk();
    const acks = await Promise.all([
      ...Array.from({ length: 4 }, () => fake.sendStkCallback(t.checkout_request_id)),
      ...Array.from({ length: 4 }, () => fake.sendStkCallback(t.checkout_request_id, { resultCode: 1032 })),
    ]);
    for (const ack of acks) expect(ack.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(["completed", "failed"]).toContain((await row(t.id)).status);
    expect(await eventCount(t.id)).toBe(1);
  });

  it("a callback on a wrong token path is rejected and applies nothing", async () => {
    const t = await pushOk();
    const body = fake.stkCallbackBody(t.checkout_request_id);
    for (const path of ["/callbacks/daraja/00ff00ff00ff/stk", "/callbacks/daraja/not-hex/stk"]) {
      const res = await fake.postJson(`${gw.url}${path}`, body);
      expect(res.status).toBe(404);
    }
    expect((await row(t.id)).status).toBe("pending");
  });

  it("a callback whose amount or phone does not match is not applied, but acknowledged", async () => {
    const t = await pushOk();
    expect((await fake.sendStkCallback(t.checkout_request_id, { amount: 1 })).body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect((await fake.sendStkCallback(t.checkout_request_id, { phone: "254711111111" })).body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect((await row(t.id)).status).toBe("pending");
    expect(await eventCount(t.id)).toBe(0);
    expect(logLines.filter((l) => l.level === 40 && /does not match/.test(l.msg))).toHaveLength(2);
    // Logs never carry the channel's secrets.
    const logs = JSON.stringify(logLines);
    for (const secret of [fake.consumerSecret, fake.passkey]) expect(logs).not.toContain(secret);
  });

  it("refuses amounts M-Pesa cannot take and malformed phones with a 400 saying why", async () => {
    const cents = await push({ amount: 150050 });
    expect(cents.status).toBe(400);
    expect(cents.body.message).toMatch(/whole number of shillings/);
    const tooBig = await push({ amount: 25_000_100 });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.message).toMatch(/250,000/);
    const phone = await push({ phone_number: "0808374149" });
    expect(phone.status).toBe(400);
    expect(phone.body.message).toMatch(/^phone_number: must be a Kenyan mobile number: 2547XXXXXXXX, \+2547XXXXXXXX, 07XXXXXXXX or 01XXXXXXXX$/);
  });
});

describe("Daraja failures", () => {
  it("an expired token is refreshed once and the request retried", async () => {
    await pushOk(); // a token is cached
    const issued = fake.tokensIssued;
    fake.switches.invalidTokenOnce = true;
    const t = await pushOk();
    expect(t.checkout_request_id).toMatch(/^ws_CO_/);
    expect(fake.tokensIssued).toBe(issued + 1);
    // Cached afterwards: no new token for the next push.
    await pushOk();
    expect(fake.tokensIssued).toBe(issued + 1);
  });

  it("Daraja busy -> 502 envelope, no secret in it, and the recorded push failed with the reason", async () => {
    const before = await prisma().transaction.count();
    fake.switches.busy = true;
    try {
      const res = await push();
      expect(res.status).toBe(502);
      expect(res.body).toMatchObject({ status: "error", code: "provider_error" });
      expect(res.body.message).toMatch(/busy.*500\.003\.02/);
      for (const secret of [fake.consumerSecret, fake.passkey]) expect(res.text).not.toContain(secret);
    } finally {
      fake.switches.busy = false;
    }
    fake.switches.quota = true;
    try {
      const res = await push();
      expect(res.status).toBe(502);
      expect(res.body.message).toMatch(/quota.*500\.003\.03/);
    } finally {
      fake.switches.quota = false;
    }
    // The row was written before Daraja was asked, so a refusal leaves a failed record, never a gap.
    const refused = await prisma().transaction.findMany({ where: { id: { gt: 0 } }, orderBy: { id: "desc" }, take: 2 });
    expect(await prisma().transaction.count()).toBe(before + 2);
    for (const t of refused) {
      expect(t).toMatchObject({ status: "failed", failureCode: "provider_error", checkoutRequestId: null });
      expect(await eventCount(t.id)).toBe(1);
    }
    expect(refused[0]!.failureReason).toMatch(/quota/);
  });

  it("wrong consumer credentials -> 502 saying so, without the secret", async () => {
    const badChannel = await createChannel({ ...fake.channelConfig(), consumer_secret: "not-the-secret-123" }, "Bad creds");
    const res = await push({ payment_channel_id: badChannel });
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(/consumer key or consumer secret/);
    expect(res.text).not.toContain("not-the-secret-123");
  });

  it("a wrong passkey -> 502 naming the Daraja code, without the passkey", async () => {
    const badChannel = await createChannel({ ...fake.channelConfig(), passkey: "wrong-passkey-value" }, "Bad passkey");
    const res = await push({ payment_channel_id: badChannel });
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(/500\.001\.1001/);
    expect(res.text).not.toContain("wrong-passkey-value");
  });

  it("an unreachable Daraja -> 503 provider_unavailable", async () => {
    const connector = createMpesaConnector({ tokenStore: createMemoryTokenStore(), baseUrlOverride: "http://127.0.0.1:1" });
    const attempt = connector.momo!.stkPush({
      config: fake.channelConfig(), amount: 100n, currency: "KES", phoneNumber: PHONE, accountReference: "A", description: "B", callbackUrl: "https://pay.gateway.test/x",
    });
    await expect(attempt).rejects.toMatchObject({ code: "provider_unavailable", status: 503 });
  });

  it("a till channel sends CustomerBuyGoodsOnline with the till number as PartyB", async () => {
    const till = await createChannel(fake.channelConfig({ transaction_type: "till", till_number: "5544332" }), "Till");
    const t = await pushOk({ payment_channel_id: till });
    expect(fake.pushes.get(t.checkout_request_id)!.body).toMatchObject({ TransactionType: "CustomerBuyGoodsOnline", PartyB: "5544332", BusinessShortCode: fake.shortcode });
  });
});

describe("reconciliation", () => {
  it("queries an overdue push: still pending while Daraja is processing, completed when it answers 0", async () => {
    const t = await pushOk();
    await gw.gateway.services.jobs.runDueJobs();
    expect((await row(t.id)).status).toBe("pending");
    const queries = fake.requests.filter((r) => r.path === "/mpesa/stkpushquery/v1/query" && r.body.CheckoutRequestID === t.checkout_request_id);
    expect(queries.length).toBeGreaterThanOrEqual(1);
    expect(Buffer.from(queries[0]!.body.Password, "base64").toString()).toBe(`${fake.shortcode}${fake.passkey}${queries[0]!.body.Timestamp}`);

    fake.queryResults.set(t.checkout_request_id, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
    await jobsFallDue(prisma(), { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } });
    await gw.gateway.services.jobs.runDueJobs();
    expect((await row(t.id)).status).toBe("completed");
    expect(await eventCount(t.id)).toBe(1);
    // Settled pushes leave the job queue; a late callback changes nothing.
    expect(await prisma().job.count({ where: { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } } })).toBe(0);
    await fake.sendStkCallback(t.checkout_request_id, { resultCode: 1032 });
    expect((await row(t.id)).status).toBe("completed");
  });

  it("a failure answer from the query fails the push with its ResultCode", async () => {
    const t = await pushOk();
    fake.queryResults.set(t.checkout_request_id, { ResultCode: "1032", ResultDesc: "Request cancelled by user" });
    await gw.gateway.services.jobs.runDueJobs();
    expect(await row(t.id)).toMatchObject({ status: "failed", failureCode: "1032" });
  });

  it("fails a push with no answer after its lifetime as expired (1019)", async () => {
    const t = await pushOk();
    await prisma().transaction.update({ where: { id: t.id }, data: { createdAt: new Date(Date.now() - 10 * 60_000) } });
    await gw.gateway.services.jobs.runDueJobs();
    expect(await row(t.id)).toMatchObject({ status: "failed", failureCode: "1019" });
  });
});

describe("mirrors", () => {
  it("POST /v1/collections/stk starts the same collection (201, data)", async () => {
    const res = await api.post("/v1/collections/stk", { amount: 100, phone_number: PHONE, payment_channel_id: channelId, reference: "V1-REF" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe("success");
    expect(Object.keys(res.body.data)).toEqual([
      "id", "reference", "client_reference", "amount", "currency", "phone_number", "status", "payment_method", "checkout_request_id", "metadata", "customer_message", "created_at",
    ]);
    expect(res.body.data).toMatchObject({ amount: 100, currency: "KES", client_reference: "V1-REF", status: "pending", payment_method: "momo_stk" });
  });

  it("GraphQL startStkPush and stkStatus", async () => {
    const res = await api.post("/graphql", {
      query: `mutation($input: StartStkPushInput!) { startStkPush(input: $input) { __typename ... on StartStkPushPayload { customerMessage transaction { reference status checkoutRequestId paymentMethod } } ... on Error { code message } } }`,
      variables: { input: { amount: 20000, phoneNumber: PHONE, paymentChannelId: channelId } },
    });
    expect(res.status).toBe(200);
    const payload = res.body.data.startStkPush;
    expect(payload).toMatchObject({ __typename: "StartStkPushPayload", transaction: { status: "pending", paymentMethod: "momo_stk" } });
    const status = await api.post("/graphql", {
      query: `query($r: String!) { stkStatus(reference: $r) { __typename ... on Transaction { status phoneNumber } } }`,
      variables: { r: payload.transaction.reference },
    });
    expect(status.body.data.stkStatus).toEqual({ __typename: "Transaction", status: "pending", phoneNumber: PHONE });
    const bad = await api.post("/graphql", {
      query: `mutation($input: StartStkPushInput!) { startStkPush(input: $input) { __typename ... on Error { code message } } }`,
      variables: { input: { amount: 150050, phoneNumber: PHONE, paymentChannelId: channelId } },
    });
    expect(bad.body.data.startStkPush).toMatchObject({ __typename: "ValidationError", code: "validation_failed" });
  });

  it("stk-status of an unknown reference is a 404 envelope", async () => {
    const res = await api.get("/api/momo/stk-status/txn_doesnotexist");
    expect(res.status).toBe(404);
    expect(res.body.status).toBe("error");
  });
});
