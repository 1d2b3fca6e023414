import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { FakeDaraja } from "../fakes/daraja.ts";
import { withDaraja, type DarajaBench } from "../support/benches.ts";
import { jobsFallDue, until, withSwitches as switched } from "../support/wait.ts";

/**
 * Issue 35 item 7, over the real callback routes with the loopback Daraja: a callback that cannot be matched
 * field by field (amount missing, unreadable, fractional beyond the cents, negative or different; phone missing,
 * unreadable or another; receipt missing; request ids missing or contradicting) is acknowledged, logged for
 * support and applied to nothing: the STK push (API and checkout page), the payout or the refund stays pending
 * until the status query, which then settles it. A receipt sent for reversal is never sent again, whatever a
 * later Result says.
 */
const PHONE = "254708374149";
const CHECKOUT_PHONE = "254712345678";
const REVERSAL_PATH = "/mpesa/reversal/v1/request";
/** Far enough out that no payout or refund job falls due by itself while this file runs. */
const OVERDUE_MS = 120_000;
const ACK = { ResultCode: 0, ResultDesc: "Accepted" };
const NOT_APPLIED = /does not match .* field by field; not applied, left for the status query/;

/** Bound when the bench is up (beforeAll). */
let { fake, gw, api, channelId } = {} as DarajaBench;
const logLines: { level: number; msg: string; reference?: string; mismatched?: string[] }[] = [];
const logger = pino({ level: "warn" }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
const prisma = () => gw.gateway.db.prisma;
const withSwitches = <T>(changes: Partial<FakeDaraja["switches"]>, run: () => Promise<T>) => switched(fake.switches, changes, run);

withDaraja(
  {
    initiator: true,
    merchant: "Callback Matching Ltd",
    cleanLedger: true,
    env: {
      JOBS_ENABLED: "false",
      STK_CALLBACK_OVERDUE_MS: "1",
      STK_QUERY_BACKOFF_MS: "1",
      PAYOUT_RESULT_OVERDUE_MS: String(OVERDUE_MS),
      REVERSAL_RESULT_OVERDUE_MS: String(OVERDUE_MS),
      RATE_LIMIT_ENABLED: "false",
    },
    logger,
  },
  (bench) => {
    ({ fake, gw, api, channelId } = bench);
    // Results are posted by the tests themselves, never raced by the fake's own.
    fake.switches.b2cNoResult = true;
    fake.switches.reversalNoResult = true;
  },
);

/** The warnings that say a callback about `reference` was not applied. */
const notApplied = (reference: string) => logLines.filter((l) => l.level === 40 && NOT_APPLIED.test(l.msg) && l.reference === reference);

type Item = { Name: string; Value?: unknown };
/** A successful STK callback for the push with CallbackMetadata's items changed: a value replaces, undefined drops the item, {} drops its Value. */
function stkSuccess(checkoutRequestId: string, changes: Record<string, unknown>) {
  const body = fake.stkCallbackBody(checkoutRequestId);
  const metadata = body.Body.stkCallback.CallbackMetadata as { Item: Item[] };
  for (const [name, value] of Object.entries(changes)) {
    const index = metadata.Item.findIndex((i) => i.Name === name);
    if (value === undefined) metadata.Item.splice(index, 1);
    else if (typeof value === "object" && value !== null && Object.keys(value).length === 0) metadata.Item[index] = { Name: name };
    else metadata.Item[index] = { Name: name, Value: value };
  }
  return body;
}

/** Every way an STK success can fail to match a push of KES 1,500 to `phone`. */
const stkCases = (phone: string): [string, Record<string, unknown>][] => [
  ["Amount not a number", { Amount: "abc" }],
  ["Amount with a fraction of a cent", { Amount: 1500.001 }],
  ["Amount as text with a fraction of a cent", { Amount: "1500.004" }],
  ["Amount 99.999", { Amount: 99.999 }],
  ["Amount negative", { Amount: -1500 }],
  ["Amount null", { Amount: null }],
  ["Amount without its Value", { Amount: {} }],
  ["Amount missing", { Amount: undefined }],
  ["Amount one shilling short", { Amount: 1499 }],
  ["PhoneNumber missing", { PhoneNumber: undefined }],
  ["PhoneNumber not a number", { PhoneNumber: "abc" }],
  ["PhoneNumber masked", { PhoneNumber: `${phone.slice(0, 4)}*****${phone.slice(-3)}` }],
  ["PhoneNumber another payer's", { PhoneNumber: 254711111111 }],
  ["MpesaReceiptNumber missing", { MpesaReceiptNumber: undefined }],
];

describe("STK callbacks", () => {
  it("an API push: every callback that does not match field by field is acknowledged, logged and not applied; the status query then completes it", async () => {
    const res = await api.post("/api/momo/stk-push", { amount: 150_000, phone_number: PHONE, payment_channel_id: channelId });
    expect(res.status, res.text).toBe(200);
    const t = res.body.transaction as { id: number; reference: string; checkout_request_id: string };
    const url = fake.pushes.get(t.checkout_request_id)!.body.CallBackURL as string;
    const cases = stkCases(PHONE);
    for (const [what, changes] of cases) {
      const reply = await fake.postJson(url, stkSuccess(t.checkout_request_id, changes));
      expect(reply, what).toEqual({ status: 200, body: ACK });
      expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } }), what).toMatchObject({ status: "pending", providerReference: null });
    }
    // No metadata at all on a ResultCode 0.
    const bare = fake.stkCallbackBody(t.checkout_request_id);
    delete bare.Body.stkCallback.CallbackMetadata;
    expect(await fake.postJson(url, bare)).toEqual({ status: 200, body: ACK });

    expect(await prisma().event.count({ where: { transactionId: t.id, type: { not: "transaction.pending" } } })).toBe(0);
    const warned = notApplied(t.reference);
    expect(warned).toHaveLength(cases.length + 1);
    expect(warned.map((l) => l.mismatched)).toContainEqual(["amount", "phone", "receipt"]);

    // The reconciliation asks Daraja (STK query), which says it was paid.
    fake.queryResults.set(t.checkout_request_id, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
    await jobsFallDue(prisma(), { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } });
    await gw.gateway.services.jobs.runDueJobs(["transaction.reconcile"]);
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).toMatchObject({ status: "completed", amount: 150_000n });
    expect(await prisma().event.count({ where: { transactionId: t.id, type: "transaction.completed" } })).toBe(1);
  });

  it("a callback that matches once normalised (Amount as text, the phone as 07...) is applied", async () => {
    const res = await api.post("/api/momo/stk-push", { amount: 150_000, phone_number: PHONE, payment_channel_id: channelId });
    expect(res.status, res.text).toBe(200);
    const t = res.body.transaction as { id: number; reference: string; checkout_request_id: string };
    const url = fake.pushes.get(t.checkout_request_id)!.body.CallBackURL as string;
    const reply = await fake.postJson(url, stkSuccess(t.checkout_request_id, { Amount: "1500.00", PhoneNumber: "0708374149", MpesaReceiptNumber: "MTCH000001" }));
    expect(reply).toEqual({ status: 200, body: ACK });
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).toMatchObject({ status: "completed", providerReference: "MTCH000001" });
    expect(notApplied(t.reference)).toHaveLength(0);
  });

  it("a checkout-page push: the attempt and its payment stay pending through every mismatch; the attempt's status query then pays it", async () => {
    const init = await api.post("/api/transactions/initialize", { amount: 150_000, currency: "KES", email: "payer@example.com" });
    expect(init.status, init.text).toBe(200);
    const reference = init.body.reference as string;
    const pushed = await fetch(`${gw.url}/payment/checkout/${reference}/mpesa`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ phone: `0${CHECKOUT_PHONE.slice(3)}` }) });
    expect(pushed.status, await pushed.clone().text()).toBe(202);
    const t = await prisma().transaction.findUniqueOrThrow({ where: { reference }, include: { attempts: true } });
    const [attempt] = t.attempts;
    expect(attempt).toMatchObject({ method: "mpesa", status: "pending", phoneNumber: `+${CHECKOUT_PHONE}` });
    const push = fake.pushes.get(attempt!.checkoutRequestId!)!;
    expect(push.body.PhoneNumber).toBe(CHECKOUT_PHONE);

    const cases = stkCases(CHECKOUT_PHONE);
    for (const [what, changes] of cases) {
      const reply = await fake.postJson(push.body.CallBackURL, stkSuccess(push.checkoutRequestId, changes));
      expect(reply, what).toEqual({ status: 200, body: ACK });
    }
    expect(await prisma().transactionAttempt.findUniqueOrThrow({ where: { id: attempt!.id } })).toMatchObject({ status: "pending", providerReference: null });
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).toMatchObject({ status: "pending" });
    expect(notApplied(reference)).toHaveLength(cases.length);

    fake.queryResults.set(push.checkoutRequestId, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
    await jobsFallDue(prisma(), { kind: "transaction.attempt_query", payload: { path: ["attemptId"], equals: attempt!.id } });
    await gw.gateway.services.jobs.runDueJobs(["transaction.attempt_query"]);
    expect(await prisma().transactionAttempt.findUniqueOrThrow({ where: { id: attempt!.id } })).toMatchObject({ status: "succeeded" });
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).toMatchObject({ status: "completed", paymentMethod: "momo_stk" });
  });
});

describe("C2B confirmations", () => {
  it("one whose TransAmount is no amount is refused in Daraja's shape, logged, and records nothing", async () => {
    const row = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: channelId } });
    const url = `${gw.url}/callbacks/daraja/${Buffer.from(row.callbackToken, "utf8").toString("hex")}/c2b/confirmation`;
    const base = { TransactionType: "Pay Bill", TransTime: "20260101120000", BusinessShortCode: fake.shortcode, BillRefNumber: "INV-1", MSISDN: PHONE, FirstName: "John" };
    const amounts: [string, unknown][] = [["abc", "abc"], ["99.999", "99.999"], ["a negative", "-5.00"], ["a number with a fraction of a cent", 10.555], ["none", undefined]];
    for (const [index, [what, amount]] of amounts.entries()) {
      const transId = `C2BX00000${index}`;
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...base, TransID: transId, TransAmount: amount }) });
      expect(res.status, what).toBe(400);
      expect(await res.json(), what).toMatchObject({ ResultCode: 1, ResultDesc: expect.stringMatching(/^Rejected: TransAmount: /) });
      expect(await prisma().transaction.count({ where: { providerReference: transId } }), what).toBe(0);
    }
    const refused = logLines.filter((l) => l.level === 40 && /provider callback refused as unreadable; not applied/.test(l.msg) && (l as { path?: string }).path === "/c2b/confirmation");
    expect(refused).toHaveLength(amounts.length);
  });
});

/** A B2C (or Reversal) Result body with its ResultParameter `key` changed: a value replaces, undefined drops it. */
function withParameter<T extends { Result: Record<string, any> }>(body: T, key: string, value: unknown): T {
  const copy = structuredClone(body);
  const list = copy.Result.ResultParameters.ResultParameter as { Key: string; Value?: unknown }[];
  const index = list.findIndex((p) => p.Key === key);
  if (value === undefined) list.splice(index, 1);
  else list[index] = { Key: key, Value: value };
  return copy;
}

/** Result ids dropped or replaced. */
function withIds<T extends { Result: Record<string, any> }>(body: T, ids: { OriginatorConversationID?: string | undefined; ConversationID?: string | undefined }): T {
  const copy = structuredClone(body);
  for (const [key, value] of Object.entries(ids)) {
    if (value === undefined) delete copy.Result[key];
    else copy.Result[key] = value;
  }
  return copy;
}

describe("B2C payout results", () => {
  it("a Result or status answer that does not match field by field leaves the payout pending; the status query then completes it", async () => {
    const res = await api.post("/v1/payouts", { amount: 150_000, phone_number: PHONE, payment_channel_id: channelId });
    expect(res.status, res.text).toBe(201);
    const payout = await prisma().payout.findUniqueOrThrow({ where: { id: res.body.data.id } });
    const good = fake.b2cResultBody(payout.providerRequestId);
    const url = fake.payouts.get(payout.providerRequestId)!.body.ResultURL as string;
    const cases: [string, unknown][] = [
      ["TransactionAmount not a number", withParameter(good, "TransactionAmount", "abc")],
      ["TransactionAmount with a fraction of a cent", withParameter(good, "TransactionAmount", 1500.001)],
      ["TransactionAmount negative", withParameter(good, "TransactionAmount", -1500)],
      ["TransactionAmount missing", withParameter(good, "TransactionAmount", undefined)],
      ["TransactionAmount another", withParameter(good, "TransactionAmount", 1501)],
      ["no OriginatorConversationID", withIds(good, { OriginatorConversationID: undefined })],
    ];
    for (const [what, body] of cases) {
      expect(await fake.postJson(url, body), what).toEqual({ status: 200, body: ACK });
      expect((await prisma().payout.findUniqueOrThrow({ where: { id: payout.id } })).status, what).toBe("pending");
    }
    // The amount cases name the payout; the one without a request id names none and is logged as unknown.
    expect(notApplied(payout.reference)).toHaveLength(cases.length - 1);
    expect(logLines.some((l) => l.level === 40 && /payout result for an unknown payout; not applied/.test(l.msg))).toBe(true);

    // The status query: its answer, posted on the payout's own path, must name the payout too.
    await prisma().job.updateMany({ where: { kind: "payout.query", status: "queued", payload: { path: ["payoutId"], equals: payout.id } }, data: { runAt: new Date() } });
    await withSwitches({ statusNoResult: true }, () => gw.gateway.services.jobs.runDueJobs(["payout.query"]));
    const query = fake.statusQueries.find((q) => q.payout === payout.providerRequestId)!;
    const answer = fake.statusResultBody(query.originatorConversationId);
    const anonymous = withParameter(answer, "OriginatorConversationID", undefined);
    expect(await fake.postJson(query.body.ResultURL, anonymous)).toEqual({ status: 200, body: ACK });
    expect(await fake.postJson(query.body.ResultURL, withParameter(answer, "Amount", "15OO"))).toEqual({ status: 200, body: ACK });
    expect((await prisma().payout.findUniqueOrThrow({ where: { id: payout.id } })).status).toBe("pending");
    expect(notApplied(payout.reference)).toHaveLength(cases.length + 1);

    await fake.sendStatusResult(query.originatorConversationId);
    const done = await prisma().payout.findUniqueOrThrow({ where: { id: payout.id } });
    expect(done).toMatchObject({ status: "completed", providerReference: fake.payouts.get(payout.providerRequestId)!.transactionId });
    expect(await prisma().event.count({ where: { payoutId: payout.id, type: "payout.completed" } })).toBe(1);
  });
});

let receipts = 0;
/** An STK payment completed by a matching callback; its reference, id and receipt. */
async function paidPayment(amount: number) {
  const res = await api.post("/api/momo/stk-push", { amount, phone_number: PHONE, payment_channel_id: channelId });
  expect(res.status, res.text).toBe(200);
  const receipt = `MTR${String(++receipts).padStart(7, "0")}`;
  expect((await fake.sendStkCallback(res.body.transaction.checkout_request_id, { receipt })).body).toEqual(ACK);
  const t = await prisma().transaction.findUniqueOrThrow({ where: { id: res.body.transaction.id } });
  expect(t).toMatchObject({ status: "completed", providerReference: receipt });
  return { id: t.id, reference: t.reference, receipt };
}

const refundRow = (id: number) => prisma().refund.findUniqueOrThrow({ where: { id } });
const reversalRequests = (receipt: string) => fake.requests.filter((r) => r.path === REVERSAL_PATH && r.body?.TransactionID === receipt);
async function runRefundCheck(id: number) {
  const updated = await prisma().job.updateMany({ where: { kind: "refund.check", status: "queued", payload: { path: ["refundId"], equals: id } }, data: { runAt: new Date() } });
  expect(updated.count).toBe(1);
  await gw.gateway.services.jobs.runDueJobs(["refund.check"]);
}

describe("reversal results", () => {
  it("a Result or status answer that does not match field by field leaves the refund pending; the status query then completes it", async () => {
    const payment = await paidPayment(150_000);
    const res = await api.post("/v1/refunds", { transaction: payment.reference });
    expect(res.status, res.text).toBe(201);
    const refund = await refundRow(res.body.data.id);
    expect(refund).toMatchObject({ status: "pending", method: "mpesa_reversal", reversedReceipt: payment.receipt });
    const reversal = fake.reversals.get(refund.providerRequestId)!;
    const good = fake.reversalResultBody(refund.providerRequestId);
    const url = reversal.body.ResultURL as string;
    const cases: [string, unknown][] = [
      ["Amount not a number", withParameter(good, "Amount", "abc")],
      ["Amount with a fraction of a cent", withParameter(good, "Amount", 1500.001)],
      ["Amount 99.999", withParameter(good, "Amount", 99.999)],
      ["Amount negative", withParameter(good, "Amount", -1500)],
      ["Amount missing", withParameter(good, "Amount", undefined)],
      ["no request ids", withIds(good, { OriginatorConversationID: undefined, ConversationID: undefined })],
      ["another OriginatorConversationID and no ConversationID", withIds(good, { OriginatorConversationID: "29112-34801843-1", ConversationID: undefined })],
      ["our OriginatorConversationID with another ConversationID", withIds(good, { ConversationID: "AG_20260101_000000000000000000" })],
      // A failure names no amount: its request ids are all it is matched by.
      ["a failure naming no request", withIds(fake.reversalResultBody(refund.providerRequestId, { ResultCode: "2001" }), { OriginatorConversationID: undefined, ConversationID: undefined })],
    ];
    for (const [what, body] of cases) {
      expect(await fake.postJson(url, body), what).toEqual({ status: 200, body: ACK });
      expect(await refundRow(refund.id), what).toMatchObject({ status: "pending", failureCode: null });
    }
    // Those naming no request of ours cannot even name the refund in the log.
    expect(logLines.filter((l) => l.level === 40 && NOT_APPLIED.test(l.msg) && /refund result/.test(l.msg))).toHaveLength(cases.length);

    // The status query: an answer on the refund's own path that names no request does not settle it either.
    await withSwitches({ statusNoResult: true }, () => runRefundCheck(refund.id));
    const query = fake.statusQueries.find((q) => q.reversal === refund.providerRequestId)!;
    expect(query.body.ResultURL).toMatch(new RegExp(`/refund/status/${refund.reference}$`));
    const answer = fake.statusResultBody(query.originatorConversationId);
    const anonymous = withParameter(withParameter(answer, "OriginatorConversationID", undefined), "ConversationID", undefined);
    expect(await fake.postJson(query.body.ResultURL, anonymous)).toEqual({ status: 200, body: ACK });
    expect(await fake.postJson(query.body.ResultURL, withParameter(answer, "Amount", undefined))).toEqual({ status: 200, body: ACK });
    expect((await refundRow(refund.id)).status).toBe("pending");
    expect(notApplied(refund.reference).length).toBeGreaterThanOrEqual(2);

    await fake.sendStatusResult(query.originatorConversationId);
    expect(await refundRow(refund.id)).toMatchObject({ status: "completed", providerReference: reversal.transactionId });
    expect(await prisma().event.count({ where: { refundId: refund.id } })).toBe(1);
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: payment.id } })).amountRefunded).toBe(150_000n);
    expect(reversalRequests(payment.receipt)).toHaveLength(1);
  });

  it("a forged Failed for a reversal: the refund fails, and no second reversal of that receipt ever reaches Daraja", async () => {
    const payment = await paidPayment(50_000);
    const first = await api.post("/v1/refunds", { transaction: payment.reference });
    expect(first.status, first.text).toBe(201);
    const refund = await refundRow(first.body.data.id);
    // A "Failed" naming the request, as anyone holding the channel's callback URL and the ids could post it.
    const forged = await fake.sendReversalResult(refund.providerRequestId, { ResultCode: "2001", ResultDesc: "The initiator information is invalid." });
    expect(forged).toEqual({ status: 200, body: ACK });
    expect(await refundRow(refund.id)).toMatchObject({ status: "failed", failureCode: "2001", reversedReceipt: payment.receipt });

    // Asked again, whole or in part, at once or one after another: refused, saying why.
    const again = await Promise.all([
      api.post("/v1/refunds", { transaction: payment.reference }),
      api.post("/v1/refunds", { transaction: payment.reference }),
      api.post("/v1/refunds", { transaction: payment.reference, amount: 50_000 }),
      api.post("/v1/refunds", { transaction: payment.reference, amount: 20_000 }),
    ]);
    for (const res of again) {
      expect(res.status, res.text).toBe(409);
      expect(res.body).toMatchObject({ status: "error", code: "transaction_not_refundable" });
      expect(res.body.message).toContain(`its receipt ${payment.receipt} was already sent for reversal`);
    }
    // Daraja's real Result (the money did go back) arrives later: the failed refund is terminal, nothing is sent.
    expect(await fake.sendReversalResult(refund.providerRequestId)).toEqual({ status: 200, body: ACK });
    expect((await refundRow(refund.id)).status).toBe("failed");
    expect(reversalRequests(payment.receipt)).toHaveLength(1);
    expect(await prisma().refund.count({ where: { transactionId: payment.id } })).toBe(1);

    // The database itself refuses a second reversal of the receipt on this channel, whatever the code does.
    await expect(
      prisma().refund.create({
        data: {
          merchantId: refund.merchantId, mode: refund.mode, reference: "re_second_reversal", transactionId: payment.id, transactionReference: payment.reference,
          channelId, amount: 50_000n, currency: "KES", method: "mpesa_reversal", providerRequestId: "second-reversal", reversedReceipt: payment.receipt,
        },
      }),
    ).rejects.toThrow(/Unique constraint|unique/i);
  });
});
