import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webhookBody } from "../../src/modules/webhooks/payload.ts";
import { buildStkCallbackBody } from "../../src/providers/mpesa/wire.ts";
import { graphql } from "../gql/index.ts";
import { apiClient, createSandboxMerchant, SANDBOX_CHANNEL, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";

/**
 * Issue 25's payment core over HTTP: a checkout transaction takes several attempts (cards, STK pushes from the
 * page) until one succeeds or CHECKOUT_MAX_ATTEMPTS fail, one at a time; the payer's /mpesa and /status endpoints.
 */
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "408" });
const SUCCESS = card("4084084084084081");
const DECLINED = card("4000000000000002");
const NO_FUNDS = card("4000000000009995");
const PAYS = "0708374149";
const CANCELS = "254700001032";
const TIMES_OUT = "+254700001037";
const NEVER_ANSWERS = "254700001019";

const DECLINE_402 = { status: "error", code: "payment_declined", message: "Card declined by the issuer" };
const IN_PROGRESS = { status: "error", code: "conflict", message: "A payment for this transaction is in progress" };

const TransactionAttempts = graphql(`
  query CheckoutAttempts($reference: String!) {
    transaction(reference: $reference) {
      __typename
      ... on Error {
        code
      }
      ... on Transaction {
        status
        attempts {
          method
          status
          code
          reason
          detail
          providerReference
          settledAt
        }
      }
    }
  }
`);

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let merchantId: number;
const payer = () => apiClient(gw.url);
const prisma = () => gw.gateway.db.prisma;

beforeAll(async () => {
  gw = await startTestGateway({ env: { CHECKOUT_MAX_ATTEMPTS: "3", SANDBOX_STK_DELAY_MS: "100", RATE_LIMIT_ENABLED: "false" } });
  const merchant = await createSandboxMerchant(gw);
  merchantId = merchant.id;
  api = apiClient(gw.url, merchant.testKey);
});
afterAll(async () => {
  await expectCleanLedger(gw);
  await gw?.close();
});

async function newTransaction(body: Record<string, unknown> = {}, client = api) {
  const init = await client.post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com", ...body });
  expect(init.status, init.text).toBe(200);
  const row = await prisma().transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
  return { reference: init.body.reference as string, id: row.id };
}

const pay = (reference: string, body: unknown) => payer().post(`/payment/checkout/${reference}/pay`, body);
const mpesa = (reference: string, phone: unknown) => payer().post(`/payment/checkout/${reference}/mpesa`, { phone });
const status = (reference: string) => payer().get(`/payment/checkout/${reference}/status`);
const settlingEvents = (transactionId: number) =>
  prisma().event.findMany({ where: { transactionId, type: { in: ["transaction.completed", "transaction.failed"] } }, orderBy: { id: "asc" } });
const attemptsOf = (transactionId: number) =>
  prisma().transactionAttempt.findMany({ where: { transactionId }, orderBy: { id: "asc" }, select: { method: true, status: true, code: true, detail: true } });
const settled = (reference: string) => until(() => status(reference), (r) => r.body.status !== "pending");

describe("card attempts", () => {
  it("a declined card leaves the payment pending; another card then pays it, with both attempts recorded", async () => {
    const { reference, id } = await newTransaction();
    const declined = await pay(reference, DECLINED);
    expect(declined.status).toBe(402);
    expect(declined.body).toEqual(DECLINE_402);
    const afterDecline = await status(reference);
    expect(afterDecline.status).toBe(200);
    expect(afterDecline.body).toEqual({
      status: "pending",
      failure_code: null,
      failure_reason: null,
      attempts_left: 2,
      attempt: { method: "card", status: "failed", code: "card_declined", reason: "Card declined by the issuer", detail: "**** 0002" },
      return_url: null,
    });
    expect(await settlingEvents(id)).toEqual([]);

    const paid = await pay(reference, SUCCESS);
    expect(paid.status, paid.text).toBe(200);
    expect(paid.body.transaction).toMatchObject({ reference, status: "completed" });
    expect((await status(reference)).body).toMatchObject({ status: "completed", attempts_left: 0, attempt: { method: "card", status: "succeeded", code: null, detail: "**** 4081" } });
    expect(await attemptsOf(id)).toEqual([
      { method: "card", status: "failed", code: "card_declined", detail: "**** 0002" },
      { method: "card", status: "succeeded", code: null, detail: "**** 4081" },
    ]);
    const events = await settlingEvents(id);
    expect(events.map((e) => e.type)).toEqual(["transaction.completed"]);
    expect((events[0]!.payload as { transaction: { attempt: unknown } }).transaction.attempt).toEqual({ method: "card", code: null, reason: null, number: 2 });
    // No card number or CVC is stored anywhere on the attempt.
    expect(JSON.stringify(await prisma().transactionAttempt.findMany({ where: { transactionId: id } }))).not.toMatch(/4084084084084081|"408"/);
  });

  it("three failed attempts fail the payment with the last one's code; transaction.failed once, carrying that attempt", async () => {
    const { reference, id } = await newTransaction({ callback_url: "https://merchant.example/done" });
    expect((await pay(reference, DECLINED)).status).toBe(402);
    expect((await mpesa(reference, CANCELS)).status).toBe(202);
    await until(() => status(reference), (r) => r.body.attempt?.status === "failed");
    expect((await status(reference)).body).toMatchObject({ status: "pending", attempts_left: 1, attempt: { method: "mpesa", code: "1032", detail: "2547*****032" } });
    const last = await pay(reference, NO_FUNDS);
    expect(last.status).toBe(402);
    expect(last.body).toEqual({ status: "error", code: "payment_declined", message: "Insufficient funds" });
    expect((await status(reference)).body).toEqual({
      status: "failed",
      failure_code: "insufficient_funds",
      failure_reason: "Insufficient funds",
      attempts_left: 0,
      attempt: { method: "card", status: "failed", code: "insufficient_funds", reason: "Insufficient funds", detail: "**** 9995" },
      return_url: `https://merchant.example/done?trxref=${reference}&reference=${reference}`,
    });
    const events = await settlingEvents(id);
    expect(events.map((e) => e.type)).toEqual(["transaction.failed"]);
    const data = JSON.parse(webhookBody(events[0]!)).data;
    expect(data).toMatchObject({ status: "failed", failure_code: "insufficient_funds", payment_method: "card" });
    expect(data.attempt).toEqual({ method: "card", code: "insufficient_funds", reason: "Insufficient funds", number: 3 });
    // Settled: another attempt of either kind is refused.
    expect((await pay(reference, SUCCESS)).body).toEqual({ status: "error", code: "conflict", message: "Transaction is already failed" });
    expect((await mpesa(reference, PAYS)).status).toBe(409);
  });
});

describe("M-Pesa from the checkout page", () => {
  it("sends the STK push for this payment and completes it on the sandbox's callback", async () => {
    const { reference, id } = await newTransaction();
    const sent = await mpesa(reference, PAYS);
    expect(sent.status, sent.text).toBe(202);
    expect(sent.body).toEqual({
      status: "pending",
      message: "Check your phone to approve the payment",
      attempt: { method: "mpesa", status: "pending", code: null, reason: null, detail: "2547*****149" },
    });
    const done = await settled(reference);
    expect(done.body).toEqual({
      status: "completed",
      failure_code: null,
      failure_reason: null,
      attempts_left: 0,
      attempt: { method: "mpesa", status: "succeeded", code: null, reason: null, detail: "2547*****149" },
      return_url: null,
    });
    const row = await prisma().transaction.findUniqueOrThrow({ where: { id } });
    expect(row).toMatchObject({ status: "completed", paymentMethod: "momo_stk" });
    expect(row.providerReference).toMatch(/^SBX/);
    const events = await settlingEvents(id);
    expect(events.map((e) => e.type)).toEqual(["transaction.completed"]);
    expect((events[0]!.payload as { transaction: { attempt: unknown } }).transaction.attempt).toEqual({ method: "mpesa", code: null, reason: null, number: 1 });
  });

  it("a cancelled push leaves the payment payable; another number then pays it", async () => {
    const { reference, id } = await newTransaction();
    expect((await mpesa(reference, CANCELS)).status).toBe(202);
    const cancelled = await until(() => status(reference), (r) => r.body.attempt?.status === "failed");
    expect(cancelled.body).toMatchObject({ status: "pending", attempts_left: 2, attempt: { method: "mpesa", code: "1032", reason: "Request cancelled by user." } });
    expect((await mpesa(reference, PAYS)).status).toBe(202);
    expect((await settled(reference)).body.status).toBe("completed");
    expect(await attemptsOf(id)).toEqual([
      { method: "mpesa", status: "failed", code: "1032", detail: "2547*****032" },
      { method: "mpesa", status: "succeeded", code: null, detail: "2547*****149" },
    ]);
    expect((await settlingEvents(id)).map((e) => e.type)).toEqual(["transaction.completed"]);
  });

  it("a push the payer never answers in time (1037) is a failed attempt with the provider's reason", async () => {
    const { reference } = await newTransaction();
    expect((await mpesa(reference, TIMES_OUT)).status).toBe(202);
    const timedOut = await until(() => status(reference), (r) => r.body.attempt?.status === "failed");
    expect(timedOut.body).toMatchObject({ status: "pending", attempts_left: 2, attempt: { code: "1037", reason: "DS timeout user cannot be reached.", detail: "2547*****037" } });
  });

  it("answers 404 for an unknown reference, 400 naming phone for a bad number, 403 when M-Pesa cannot take it", async () => {
    const { reference } = await newTransaction();
    expect((await mpesa("txn-doesnotexist", PAYS)).body).toMatchObject({ status: "error", code: "not_found" });
    expect((await mpesa("txn-doesnotexist", PAYS)).status).toBe(404);
    for (const phone of ["0808374149", "", 708374149, null, "07083741490000", "+447911123456"]) {
      const bad = await mpesa(reference, phone);
      expect(bad.status, JSON.stringify(phone)).toBe(400);
      expect(bad.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(bad.body.message).toMatch(/^phone: /);
    }
    const nul = await mpesa(reference, "0708\u0000374149");
    expect(nul.status).toBe(400);
    expect(nul.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect((await payer().post(`/payment/checkout/${encodeURIComponent("txn-\u0000x")}/mpesa`, { phone: PAYS })).status).toBe(400);
    // Nothing was attempted by any of these.
    expect((await status(reference)).body).toMatchObject({ status: "pending", attempts_left: 3, attempt: null });
    // Cents M-Pesa cannot collect, and a currency other than KES: not an M-Pesa payment.
    const cents = await newTransaction({ amount: 2550 });
    expect((await mpesa(cents.reference, PAYS)).body).toEqual({ status: "error", code: "forbidden", message: "This transaction cannot be paid by M-Pesa" });
    const usd = await newTransaction({ currency: "USD" });
    expect((await mpesa(usd.reference, PAYS)).status).toBe(403);
  });
});

describe("one attempt in flight at a time", () => {
  it("an STK push in flight refuses a card charge and a second push with the in-progress 409", async () => {
    const { reference, id } = await newTransaction();
    expect((await mpesa(reference, NEVER_ANSWERS)).status).toBe(202);
    const card = await pay(reference, SUCCESS);
    expect(card.status).toBe(409);
    expect(card.body).toEqual(IN_PROGRESS);
    const again = await mpesa(reference, PAYS);
    expect(again.status).toBe(409);
    expect(again.body).toEqual(IN_PROGRESS);
    expect((await status(reference)).body).toMatchObject({ status: "pending", attempts_left: 3, attempt: { method: "mpesa", status: "pending", detail: "2547*****019" } });
    expect(await attemptsOf(id)).toHaveLength(1);
  });

  it("a card charge in flight refuses an STK push with the in-progress 409", async () => {
    const slow = await api.post("/api/payment-channels/create", { ...SANDBOX_CHANNEL, name: "Slow sandbox", config: { charge_delay_ms: 1500 } });
    expect(slow.status, slow.text).toBe(201);
    const { reference, id } = await newTransaction({ payment_channel_id: slow.body.channel.id });
    const charging = pay(reference, SUCCESS);
    await until(() => attemptsOf(id), (attempts) => attempts.length === 1);
    const push = await mpesa(reference, PAYS);
    expect(push.status).toBe(409);
    expect(push.body).toEqual(IN_PROGRESS);
    expect((await charging).status).toBe(200);
    expect(await attemptsOf(id)).toEqual([{ method: "card", status: "succeeded", code: null, detail: "**** 4081" }]);
  });

  it("a late M-Pesa success of an earlier push completes the payment once, after a later card attempt failed", async () => {
    const { reference, id } = await newTransaction();
    expect((await mpesa(reference, NEVER_ANSWERS)).status).toBe(202);
    const [push] = await prisma().transactionAttempt.findMany({ where: { transactionId: id } });
    expect(push!.checkoutRequestId).toMatch(/^ws_CO_/);
    // The push outlives its lifetime (STK_LIFETIME_MS): its claim lapses and the payer tries a card, which is declined.
    const lapsed = new Date(Date.now() - 181_000);
    await prisma().transactionAttempt.update({ where: { id: push!.id }, data: { createdAt: lapsed } });
    await prisma().transaction.update({ where: { id }, data: { chargeStartedAt: lapsed } });
    expect((await pay(reference, DECLINED)).status).toBe(402);
    expect((await status(reference)).body).toMatchObject({ status: "pending", attempts_left: 2, attempt: { method: "card", status: "failed" } });

    // Then M-Pesa's callback for the first push arrives, twice: the payment completes once, on that attempt.
    const channel = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: push!.channelId! } });
    const callbackPath = new URL(gw.gateway.services.callbackUrls.of(channel).collection!).pathname;
    const body = buildStkCallbackBody({
      merchantRequestId: "late-1",
      checkoutRequestId: push!.checkoutRequestId!,
      resultCode: 0,
      resultDesc: "The service request is processed successfully.",
      shillings: 25,
      receipt: "SBXLATE001",
      phoneNumber: "254700001019",
    });
    for (let i = 0; i < 2; i++) expect((await payer().post(callbackPath, body)).status).toBe(200);
    expect((await status(reference)).body).toMatchObject({ status: "completed", attempt: { method: "card", status: "failed" } });
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "completed", paymentMethod: "momo_stk", providerReference: "SBXLATE001" });
    expect(await attemptsOf(id)).toEqual([
      { method: "mpesa", status: "succeeded", code: null, detail: "2547*****019" },
      { method: "card", status: "failed", code: "card_declined", detail: "**** 0002" },
    ]);
    const events = await settlingEvents(id);
    expect(events.map((e) => e.type)).toEqual(["transaction.completed"]);
    expect(JSON.parse(webhookBody(events[0]!)).data.attempt).toEqual({ method: "mpesa", code: null, reason: null, number: 1 });
  });
});

describe("GraphQL Transaction.attempts", () => {
  it("lists a payment's attempts oldest first, to its merchant only", async () => {
    const { reference } = await newTransaction();
    expect((await pay(reference, DECLINED)).status).toBe(402);
    expect((await pay(reference, SUCCESS)).status).toBe(200);
    const mine = await api.graphql(TransactionAttempts, { reference });
    const transaction = mine.body.data?.transaction;
    expect(transaction?.__typename).toBe("Transaction");
    const attempts = transaction?.__typename === "Transaction" ? transaction.attempts : [];
    expect(attempts.map(({ settledAt, ...a }) => ({ ...a, settled: settledAt !== null }))).toEqual([
      { method: "card", status: "failed", code: "card_declined", reason: "Card declined by the issuer", detail: "**** 0002", providerReference: null, settled: true },
      { method: "card", status: "succeeded", code: null, reason: null, detail: "**** 4081", providerReference: expect.stringMatching(/^sbx_/), settled: true },
    ]);
    // Another merchant (and this merchant's live key) cannot see the transaction, nor so its attempts.
    const other = await gw.createMerchant();
    for (const key of [other.testKey, other.liveKey]) {
      const theirs = await apiClient(gw.url, key).graphql(TransactionAttempts, { reference });
      expect(theirs.body.data?.transaction).toMatchObject({ __typename: "NotFoundError" });
    }
    expect(merchantId).toBeGreaterThan(0);
  });
});

describe("the status endpoint", () => {
  it("answers 404 in the envelope for an unknown or impossible reference", async () => {
    for (const reference of ["txn-doesnotexist", encodeURIComponent("txn-\u0000x"), "x".repeat(90)]) {
      const res = await status(reference);
      expect(res.status, reference).toBe(404);
      expect(res.body).toMatchObject({ status: "error", code: "not_found" });
    }
  });
});

/** A gateway with today's single attempt and a short expiry: each case needs settings of its own. */
describe("CHECKOUT_MAX_ATTEMPTS=1 and CHECKOUT_EXPIRY_MS", () => {
  let short: TestGateway;
  let shortApi: ReturnType<typeof apiClient>;
  beforeAll(async () => {
    short = await startTestGateway({ env: { CHECKOUT_MAX_ATTEMPTS: "1", CHECKOUT_EXPIRY_MS: "2000", JOB_POLL_INTERVAL_MS: "200", SANDBOX_STK_DELAY_MS: "100", RATE_LIMIT_ENABLED: "false" } });
    shortApi = apiClient(short.url, (await createSandboxMerchant(short)).testKey);
  });
  afterAll(async () => {
    await expectCleanLedger(short);
    await short?.close();
  });
  const init = async () => {
    const res = await shortApi.post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com" });
    expect(res.status, res.text).toBe(200);
    return res.body.reference as string;
  };
  const shortStatus = (reference: string) => apiClient(short.url).get(`/payment/checkout/${reference}/status`);

  it("with one attempt a declined card fails the payment, as before", async () => {
    const reference = await init();
    const declined = await apiClient(short.url).post(`/payment/checkout/${reference}/pay`, DECLINED);
    expect(declined.body).toEqual(DECLINE_402);
    expect((await shortStatus(reference)).body).toMatchObject({ status: "failed", failure_code: "card_declined", attempts_left: 0 });
    const events = await short.gateway.db.prisma.event.findMany({ where: { transaction: { reference } } });
    expect(events.map((e) => e.type)).toEqual(["transaction.failed"]);
  });

  it("an unpaid payment fails as abandoned once it expires, by the job runner; one paid in time does not", async () => {
    const unpaid = await init();
    const paid = await init();
    expect((await apiClient(short.url).post(`/payment/checkout/${paid}/pay`, SUCCESS)).status).toBe(200);
    const expired = await until(() => shortStatus(unpaid), (r) => r.body.status !== "pending", 15_000);
    expect(expired.body).toEqual({
      status: "failed",
      failure_code: "abandoned",
      failure_reason: "The payer did not complete the payment in time",
      attempts_left: 0,
      attempt: null,
      return_url: null,
    });
    expect((await shortStatus(paid)).body.status).toBe("completed");
    const events = await short.gateway.db.prisma.event.findMany({ where: { transaction: { reference: unpaid } } });
    expect(events.map((e) => e.type)).toEqual(["transaction.failed"]);
    expect((events[0]!.payload as { transaction: Record<string, unknown> }).transaction).not.toHaveProperty("attempt");
    // Expired: nothing more can be attempted on it.
    expect((await apiClient(short.url).post(`/payment/checkout/${unpaid}/mpesa`, { phone: PAYS })).body).toEqual({ status: "error", code: "conflict", message: "Transaction is already failed" });
  });

  it("a payment with an attempt in flight is not expired under it", async () => {
    const reference = await init();
    expect((await apiClient(short.url).post(`/payment/checkout/${reference}/mpesa`, { phone: NEVER_ANSWERS })).status).toBe(202);
    const row = await short.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
    await short.gateway.db.prisma.transaction.update({ where: { id: row.id }, data: { createdAt: new Date(Date.now() - 60_000) } });
    // The sweep runs now (as the runner would) and leaves the claimed payment alone; without the claim it expires it.
    await short.gateway.services.transactions.expireCheckouts();
    expect((await shortStatus(reference)).body).toMatchObject({ status: "pending", attempt: { status: "pending" } });
    await short.gateway.db.prisma.transaction.update({ where: { id: row.id }, data: { chargeStartedAt: null } });
    await short.gateway.services.transactions.expireCheckouts();
    expect((await shortStatus(reference)).body).toMatchObject({ status: "failed", failure_code: "abandoned" });
  });
});
