import { describe, expect, it } from "vitest";
import type { FakeDaraja } from "../fakes/daraja.ts";
import { BENCH_ENV, withDaraja, type DarajaBench } from "../support/benches.ts";
import { until, withSwitches as switched } from "../support/wait.ts";

/**
 * Refunds of M-Pesa payments against the loopback Daraja, over real HTTP: a whole payment by the Reversal
 * API (the body Daraja reads, its Result on the refund's token path, R000001, failures), a result lost and
 * found by Transaction Status without a second reversal, a queue timeout, one result 50 times at once; a
 * part of one by B2C to the payer; refusals. Jobs run only when a test runs them.
 */
const PHONE = "254708374149";
const PUBLIC_BASE_URL = "https://pay.gateway.test";
const REVERSAL_PATH = "/mpesa/reversal/v1/request";
const STATUS_PATH = "/mpesa/transactionstatus/v1/query";
/** Far enough out that no refund.check job falls due by itself while this file runs. */
const OVERDUE_MS = 120_000;

/** Bound when the bench is up (beforeAll). */
let { fake, receiver, gw, api, channelId } = {} as DarajaBench;
/** Can reverse and pay out (an initiator); the other collects only. */
let collectOnlyChannelId: number;
let token: string;
const prisma = () => gw.gateway.db.prisma;

withDaraja(
  {
    initiator: true,
    merchant: "Nairobi Books",
    channelName: "M-Pesa with initiator",
    webhooks: [{ path: "/refunds", events: ["refund.completed", "refund.failed"] }],
    cleanLedger: true,
    env: { ...BENCH_ENV, PUBLIC_BASE_URL, REVERSAL_RESULT_OVERDUE_MS: String(OVERDUE_MS) },
  },
  async (bench) => {
    ({ fake, receiver, gw, api, channelId } = bench);
    // Daraja answers first and posts the Result later: 20 ms could beat our own 201 on a busy CPU.
    fake.switches.reversalResultDelayMs = 250;
    fake.switches.b2cResultDelayMs = 250;
    collectOnlyChannelId = await bench.createChannel(fake.channelConfig(), "M-Pesa collections");
    token = await bench.callbackToken(channelId);
  },
);

let receipts = 0;
/** An STK payment of `amount` (KES minor units) through `channel`, completed by Daraja's callback; returns its reference and receipt. */
async function paidPayment(amount = 150_000, channel = channelId): Promise<{ reference: string; receipt: string; id: number }> {
  const res = await api.post("/api/momo/stk-push", { amount, phone_number: PHONE, payment_channel_id: channel });
  expect(res.status, res.text).toBe(200);
  const receipt = `RFD${String(++receipts).padStart(7, "0")}`;
  const reply = await fake.sendStkCallback(res.body.transaction.checkout_request_id, { receipt });
  expect(reply.status).toBe(200);
  const tx = await until(() => prisma().transaction.findUniqueOrThrow({ where: { id: res.body.transaction.id } }), (t) => t.status === "completed");
  expect(tx.providerReference).toBe(receipt);
  return { reference: tx.reference, receipt, id: tx.id };
}

const refund = (body: Record<string, unknown>) => api.post("/v1/refunds", body);
const refundRow = (id: number) => prisma().refund.findUniqueOrThrow({ where: { id } });
const eventsOf = async (id: number) => (await prisma().event.findMany({ where: { refundId: id }, orderBy: { id: "asc" } })).map((e) => e.type);
const settled = (id: number) => until(() => refundRow(id), (r) => r.status !== "pending");
const reversalsOf = (receipt: string) => fake.requests.filter((r) => r.path === REVERSAL_PATH && r.body?.TransactionID === receipt);

/** Time passing: the refund's check job falls due now, and runs. */
async function runRefundCheck(id: number) {
  const updated = await prisma().job.updateMany({ where: { kind: "refund.check", status: "queued", payload: { path: ["refundId"], equals: id } }, data: { runAt: new Date() } });
  expect(updated.count).toBe(1);
  await gw.gateway.services.jobs.runDueJobs(["refund.check"]);
}

/**
 * After runRefundCheck: time passes until the refund settles. On a busy machine the status question itself can fail (a
 * provider call timing out) and be deferred: as time passing would, the check is made due and asked again (never the
 * reversal, which tests count).
 */
async function settledByChecks(id: number) {
  let askedAt = Date.now();
  return until(
    async () => {
      const row = await refundRow(id);
      if (row.status === "pending" && Date.now() - askedAt > 2000) {
        askedAt = Date.now();
        await prisma().job.updateMany({ where: { kind: "refund.check", status: "queued", payload: { path: ["refundId"], equals: id } }, data: { runAt: new Date() } });
        await gw.gateway.services.jobs.runDueJobs(["refund.check"]);
      }
      return row;
    },
    (row) => row.status !== "pending",
  );
}

/** Runs with the fake's switches changed, then puts them back. */
const withSwitches = <T>(changes: Partial<FakeDaraja["switches"]>, run: () => Promise<T>) => switched(fake.switches, changes, run);

describe("mpesa_reversal (a whole payment)", () => {
  it("sends Daraja's documented Reversal body (RecieverIdentifierType, token URLs, our OriginatorConversationID); its Result completes the refund", async () => {
    const payment = await paidPayment();
    const res = await refund({ transaction: payment.reference, merchant_note: "Order cancelled by the customer" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "pending", method: "mpesa_reversal", amount: 150_000, currency: "KES" });
    const row = await refundRow(res.body.data.id);
    const [sent] = reversalsOf(payment.receipt);
    expect(reversalsOf(payment.receipt)).toHaveLength(1);
    const record = fake.reversals.get(row.providerRequestId);
    expect(record, "the fake accepted the Reversal request").toBeDefined();
    expect(sent!.body).toEqual({
      OriginatorConversationID: row.providerRequestId,
      Initiator: fake.initiatorName,
      SecurityCredential: expect.any(String),
      CommandID: "TransactionReversal",
      TransactionID: payment.receipt,
      Amount: 1500,
      ReceiverParty: fake.shortcode,
      RecieverIdentifierType: "11",
      ResultURL: `${PUBLIC_BASE_URL}/callbacks/daraja/${token}/refund/result`,
      QueueTimeOutURL: `${PUBLIC_BASE_URL}/callbacks/daraja/${token}/refund/timeout`,
      Remarks: "Order cancelled by the customer",
      Occasion: row.reference,
    });
    expect(Buffer.from(sent!.body.SecurityCredential, "base64")).toHaveLength(256);
    // Pending: Daraja's ConversationID is what it is known by until the Result names the reversal.
    expect(row.providerReference).toBe(record!.conversationId);

    const done = await settled(row.id);
    expect(done).toMatchObject({ status: "completed", providerReference: record!.transactionId, failureCode: null });
    expect(await eventsOf(row.id)).toEqual(["refund.completed"]);
    const fetched = await api.get(`/v1/refunds/${row.reference}`);
    expect(fetched.body.data).toMatchObject({ status: "completed", provider_reference: record!.transactionId, method: "mpesa_reversal" });
    const tx = await prisma().transaction.findUniqueOrThrow({ where: { id: payment.id } });
    expect(tx.amountRefunded).toBe(150_000n);
    await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
    expect(receiver.received.filter((d) => d.json?.data?.reference === row.reference).map((d) => d.json.type)).toEqual(["refund.completed"]);
  });

  it("R000001 (already reversed) carries no Amount, so its Result is not applied; the status query completes it", async () => {
    const payment = await paidPayment(20_000);
    fake.reversalOutcomes.set(payment.receipt, { ResultCode: "R000001", ResultDesc: "The transaction is already reversed" });
    const res = await refund({ transaction: payment.reference });
    expect(res.status, res.text).toBe(201);
    const { providerRequestId } = await refundRow(res.body.data.id);
    await until(() => fake.postedResults.find((p) => p.kind === "reversal_result" && (p.body as any).Result.OriginatorConversationID === providerRequestId && p.reply), Boolean);
    expect((await refundRow(res.body.data.id)).status).toBe("pending");
    await runRefundCheck(res.body.data.id);
    expect(await settledByChecks(res.body.data.id)).toMatchObject({ status: "completed", failureCode: null });
    expect(reversalsOf(payment.receipt)).toHaveLength(1);
  });

  it.each([
    [2001, "The initiator information is invalid."],
    ["R000002", "The OriginalTransactionID is invalid."],
  ])("ResultCode %s fails it with that code and ResultDesc; the receipt is never sent for reversal again", async (code, desc) => {
    const payment = await paidPayment(30_000);
    fake.reversalOutcomes.set(payment.receipt, { ResultCode: code, ResultDesc: desc });
    const res = await refund({ transaction: payment.reference });
    expect(res.status, res.text).toBe(201);
    expect(await settled(res.body.data.id)).toMatchObject({ status: "failed", failureCode: String(code), failureReason: desc, reversedReceipt: payment.receipt });
    expect(await eventsOf(res.body.data.id)).toEqual(["refund.failed"]);
    fake.reversalOutcomes.delete(payment.receipt);
    // Neither the whole payment (a reversal) nor a part of it (B2C) is refunded again: a person decides.
    for (const body of [{ transaction: payment.reference }, { transaction: payment.reference, amount: 10_000 }]) {
      const again = await refund(body);
      expect(again.status, again.text).toBe(409);
      expect(again.body).toMatchObject({ status: "error", code: "transaction_not_refundable" });
      expect(again.body.message).toContain(`its receipt ${payment.receipt} was already sent for reversal (refund ${res.body.data.reference} asked for it and was reported failed (${code}: ${desc}))`);
      expect(again.body.message).toMatch(/M-Pesa org portal/);
    }
    expect(reversalsOf(payment.receipt)).toHaveLength(1);
    expect(await prisma().refund.count({ where: { transactionId: payment.id } })).toBe(1);
  });

  it("a reversal Daraja refuses at once reversed nothing: the receipt is free and the next refund reverses it", async () => {
    const payment = await paidPayment(35_000);
    const refused = await withSwitches({ busy: true }, () => refund({ transaction: payment.reference }));
    expect(refused.status, refused.text).toBe(201);
    expect(await refundRow(refused.body.data.id)).toMatchObject({ status: "failed", failureCode: "provider_error", reversedReceipt: null });
    const again = await refund({ transaction: payment.reference });
    expect(again.status, again.text).toBe(201);
    expect(await refundRow(again.body.data.id)).toMatchObject({ method: "mpesa_reversal", reversedReceipt: payment.receipt });
    expect(await settled(again.body.data.id)).toMatchObject({ status: "completed" });
    // The busy answer came before the fake recorded anything: one accepted reversal.
    expect([...fake.reversals.values()].filter((r) => r.body.TransactionID === payment.receipt)).toHaveLength(1);
  });

  it("one Result delivered 50 times at once: one transition, one event, one webhook", async () => {
    const payment = await paidPayment(40_000);
    const created = await withSwitches({ reversalNoResult: true }, async () => (await refund({ transaction: payment.reference })).body.data);
    const { providerRequestId } = await refundRow(created.id);
    const replies = await Promise.all(Array.from({ length: 50 }, () => fake.sendReversalResult(providerRequestId)));
    expect(replies.map((r) => r?.status)).toEqual(Array(50).fill(200));
    expect(replies.every((r) => r?.body?.ResultCode === 0)).toBe(true);
    expect((await refundRow(created.id)).status).toBe("completed");
    expect(await eventsOf(created.id)).toEqual(["refund.completed"]);
    await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
    expect(receiver.received.filter((d) => d.json?.data?.reference === created.reference).map((d) => d.json.type)).toEqual(["refund.completed"]);
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: payment.id } })).amountRefunded).toBe(40_000n);
  });

  it("a Result naming Daraja's own OriginatorConversationID is matched by its ConversationID; one for another amount is not applied", async () => {
    const payment = await paidPayment(70_000);
    const created = await withSwitches({ reversalNoResult: true }, async () => (await refund({ transaction: payment.reference })).body.data);
    const row = await refundRow(created.id);
    const body = fake.reversalResultBody(row.providerRequestId);
    const url = fake.reversals.get(row.providerRequestId)!.body.ResultURL as string;
    const otherAmount = structuredClone(body);
    otherAmount.Result.ResultParameters = { ResultParameter: [{ Key: "Amount", Value: 1 }] };
    expect((await fake.postJson(url, otherAmount)).status).toBe(200);
    expect((await refundRow(created.id)).status).toBe("pending");
    const theirs = { Result: { ...body.Result, OriginatorConversationID: "29112-34801843-1" } };
    expect((await fake.postJson(url, theirs)).status).toBe(200);
    expect(await refundRow(created.id)).toMatchObject({ status: "completed", providerReference: body.Result.TransactionID });
  });

  it("a Result that never comes: the refund.check job asks Transaction Status, whose answer settles it; one Reversal request ever", async () => {
    const payment = await paidPayment(50_000);
    const created = await withSwitches({ reversalNoResult: true }, async () => (await refund({ transaction: payment.reference })).body.data);
    const row = await refundRow(created.id);
    const record = fake.reversals.get(row.providerRequestId)!;
    await runRefundCheck(created.id);
    const query = fake.statusQueries.find((q) => q.reversal === row.providerRequestId);
    expect(query?.body).toMatchObject({
      CommandID: "TransactionStatusQuery",
      OriginalConversationID: record.conversationId,
      PartyA: fake.shortcode,
      IdentifierType: "4",
      ResultURL: `${PUBLIC_BASE_URL}/callbacks/daraja/${token}/refund/status/${row.reference}`,
    });
    expect(await settledByChecks(created.id)).toMatchObject({ status: "completed", providerReference: record.transactionId });
    expect(reversalsOf(payment.receipt)).toHaveLength(1);
    expect(await eventsOf(created.id)).toEqual(["refund.completed"]);
  });

  it("a queue timeout makes the check due now (asked at once, not after REVERSAL_RESULT_OVERDUE_MS)", async () => {
    const payment = await paidPayment(60_000);
    const created = await withSwitches({ reversalQueueTimeout: true }, async () => (await refund({ transaction: payment.reference })).body.data);
    await until(() => fake.postedResults.find((p) => p.kind === "reversal_timeout" && p.url.includes("/refund/timeout") && p.reply !== null), (p) => p !== undefined);
    const job = await prisma().job.findFirstOrThrow({ where: { kind: "refund.check", payload: { path: ["refundId"], equals: created.id } } });
    expect(job.runAt.getTime()).toBeLessThanOrEqual(Date.now());
    expect((await refundRow(created.id)).status).toBe("pending");
    await gw.gateway.services.jobs.runDueJobs(["refund.check"]);
    expect(await settledByChecks(created.id)).toMatchObject({ status: "completed" });
    expect(reversalsOf(payment.receipt)).toHaveLength(1);
  });

  it("a payment with no M-Pesa receipt recorded cannot be reversed: 409 saying so, nothing sent", async () => {
    const payment = await paidPayment(10_000);
    await prisma().transaction.update({ where: { id: payment.id }, data: { providerReference: null } });
    const before = fake.requests.filter((r) => r.path === REVERSAL_PATH).length;
    const res = await refund({ transaction: payment.reference });
    expect(res.status, res.text).toBe(409);
    expect(res.body).toMatchObject({ status: "error", code: "transaction_not_refundable" });
    expect(res.body.message).toMatch(/no M-Pesa receipt/);
    expect(fake.requests.filter((r) => r.path === REVERSAL_PATH)).toHaveLength(before);
    expect(await prisma().refund.count({ where: { transactionId: payment.id } })).toBe(0);
  });
});

describe("mpesa_b2c (part of a payment)", () => {
  it("pays the part back to the payer by B2C; its Result completes it; the rest goes the same way", async () => {
    const payment = await paidPayment(150_000);
    const res = await refund({ transaction: payment.reference, amount: 50_000, customer_note: "Two of three books" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "pending", method: "mpesa_b2c", amount: 50_000 });
    const row = await refundRow(res.body.data.id);
    const record = fake.payouts.get(row.providerRequestId);
    expect(record, "the fake accepted the B2C request").toBeDefined();
    expect(record!.body).toMatchObject({
      OriginatorConversationID: row.providerRequestId,
      InitiatorName: fake.initiatorName,
      CommandID: "BusinessPayment",
      Amount: 500,
      PartyA: fake.b2cShortcode,
      PartyB: PHONE,
      Remarks: "Two of three books",
      ResultURL: `${PUBLIC_BASE_URL}/callbacks/daraja/${token}/refund/result`,
      QueueTimeOutURL: `${PUBLIC_BASE_URL}/callbacks/daraja/${token}/refund/timeout`,
    });
    expect(await settled(row.id)).toMatchObject({ status: "completed", providerReference: record!.transactionId });
    expect(await prisma().payout.count({ where: { providerRequestId: row.providerRequestId } })).toBe(0);
    expect(reversalsOf(payment.receipt)).toHaveLength(0);

    // "All that remains" after a part is no reversal: B2C again, for the rest.
    const rest = await refund({ transaction: payment.reference });
    expect(rest.status, rest.text).toBe(201);
    expect(rest.body.data).toMatchObject({ method: "mpesa_b2c", amount: 100_000 });
    expect(await settled(rest.body.data.id)).toMatchObject({ status: "completed" });
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: payment.id } })).amountRefunded).toBe(150_000n);
    expect(reversalsOf(payment.receipt)).toHaveLength(0);
  });

  it("a lost B2C Result is settled by Transaction Status on the B2C shortcode", async () => {
    const payment = await paidPayment(80_000);
    const created = await withSwitches({ b2cNoResult: true }, async () => (await refund({ transaction: payment.reference, amount: 30_000 })).body.data);
    const row = await refundRow(created.id);
    await runRefundCheck(created.id);
    const query = fake.statusQueries.find((q) => q.payout === row.providerRequestId);
    expect(query?.body).toMatchObject({ PartyA: fake.b2cShortcode, ResultURL: `${PUBLIC_BASE_URL}/callbacks/daraja/${token}/refund/status/${row.reference}` });
    expect(await settledByChecks(created.id)).toMatchObject({ status: "completed" });
    expect(fake.requests.filter((r) => r.path === "/mpesa/b2c/v3/paymentrequest" && r.body?.OriginatorConversationID === row.providerRequestId)).toHaveLength(1);
    expect(fake.requests.filter((r) => r.path === STATUS_PATH && r.body?.OriginalConversationID === row.providerReference)).toHaveLength(1);
  });

  it("a partial refund on a channel that cannot pay out: 400 partial_refund_unsupported saying why; nothing reserved or sent", async () => {
    const payment = await paidPayment(100_000, collectOnlyChannelId);
    const before = fake.requests.length;
    const res = await refund({ transaction: payment.reference, amount: 40_000 });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ status: "error", code: "partial_refund_unsupported" });
    expect(res.body.message).toMatch(/reverses only a whole payment.*B2C.*initiator_name/);
    // Nor can it reverse the whole: 409 saying why.
    const full = await refund({ transaction: payment.reference });
    expect(full.status, full.text).toBe(409);
    expect(full.body).toMatchObject({ status: "error", code: "transaction_not_refundable" });
    expect(full.body.message).toMatch(/reversal.*initiator_name/);
    expect(await prisma().refund.count({ where: { transactionId: payment.id } })).toBe(0);
    expect(fake.requests.length).toBe(before);
  });

  it("an amount that is not whole shillings is refused, naming the amount", async () => {
    const payment = await paidPayment(100_000);
    const res = await refund({ transaction: payment.reference, amount: 50_050 });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(res.body.message).toMatch(/^amount: must be a whole number of shillings/);
    expect(await prisma().refund.count({ where: { transactionId: payment.id } })).toBe(0);
  });
});
