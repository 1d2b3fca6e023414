import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { channelBalances } from "../../src/modules/ledger/store.ts";
import { darajaGatewayEnv, startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { apiClient, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";
import { groupEntries, type PostingRow } from "../support/ledger-entries.ts";

/**
 * Every posting rule of the ledger (src/modules/ledger/postings.ts), read back as entries and legs after real
 * operations over HTTP: a payment's fee from its channel's schedule (rounded half away from zero, plus the fixed
 * fee), a payout's reservation then completion or failure, a refund's failure, and replayed provider callbacks
 * (an STK callback from the Daraja fake, a Paystack webhook) that post nothing twice. The file ends with the ledger
 * check (the CLI) clean.
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 2;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" });
const REFUND_FAILS = card("4000000000005126");
const PAID_PHONE = "254708374149";
const FAILED_PHONE = "254700000001";

let gw: TestGateway;
let daraja: FakeDaraja;
let paystack: FakePaystack;
let merchant: { id: number; testKey: string };
let api: ReturnType<typeof apiClient>;
const prisma = () => gw.gateway.db.prisma;

beforeAll(async () => {
  daraja = await startFakeDaraja();
  paystack = await startFakePaystack();
  gw = await startTestGateway({
    env: {
      ...darajaGatewayEnv(daraja),
      PAYSTACK_BASE_URL: paystack.url,
      SANDBOX_REFUND_DELAY_MS: "30",
      SANDBOX_STK_DELAY_MS: "30",
      JOB_POLL_INTERVAL_MS: "50",
      RATE_LIMIT_ENABLED: "false",
    },
  });
  daraja.switches.callbackOrigin = gw.url;
  merchant = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
});
afterAll(async () => {
  await gw?.close();
  await daraja?.close();
  await paystack?.close();
});
afterAll(() => expectCleanLedger(gw));

async function createChannel(body: Record<string, unknown>): Promise<number> {
  const res = await api.post("/api/payment-channels/create", { config: {}, ...body });
  expect(res.status, res.text).toBe(201);
  return res.body.channel.id as number;
}

/** The entries of one source (transaction, refund or payout), oldest first, each with its legs by account kind. */
async function entriesOf(sourceType: "transaction" | "refund" | "payout", reference: string) {
  const rows = await prisma().$queryRawUnsafe<PostingRow[]>(
    `SELECT e.id::text, e.type, e.amount::text, e.fee::text, a.kind, p.amount::text AS leg
     FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
     WHERE e.source_type = $1 AND e.source_reference = $2 ORDER BY e.id, a.kind`,
    sourceType,
    reference,
  );
  return groupEntries(rows);
}

const pay = (channelId: number, amount: number, cardDetails = card("4242424242424242")) =>
  paidTransaction(gw.url, merchant.testKey, { amount, email: "payer@example.com", currency: "KES", payment_channel_id: channelId }, cardDetails);

describe("a payment's fee", () => {
  it("is round(amount * fee_percent_bps / 10000), half away from zero, plus fee_fixed; available gets the rest", async () => {
    // 2.5 %: 20 -> 0.5 -> 1; 60 -> 1.5 -> 2; 100 -> 2.5 -> 3 (half to even would say 2); 19 -> 0.475 -> 0; 10,001 -> 250.025 -> 250.
    const channelId = await createChannel({ name: "Percent and fixed", provider: "sandbox", fee_percent_bps: 250, fee_fixed: 7 });
    const cases: [number, number][] = [[20, 1], [60, 2], [100, 3], [19, 0], [10_001, 250]];
    for (const [amount, percentFee] of cases) {
      const reference = await pay(channelId, amount);
      const fee = percentFee + 7;
      expect(await entriesOf("transaction", reference), `amount ${amount}`).toEqual([
        { type: "payment", amount, fee, legs: { available: amount - fee, fees: fee, payers: -amount } },
      ]);
    }
    const [balance] = await channelBalances(prisma(), { merchantId: merchant.id, mode: "test" }, channelId);
    const collected = cases.reduce((sum, [amount]) => sum + amount, 0);
    const fees = cases.reduce((sum, [, percentFee]) => sum + percentFee + 7, 0);
    expect(balance).toMatchObject({ collected: BigInt(collected), fees: BigInt(fees), available: BigInt(collected - fees), pendingOut: 0n });
  });

  it("is the fixed fee alone with no percentage, nothing with no schedule; a failed payment posts nothing", async () => {
    const fixedOnly = await createChannel({ name: "Fixed only", provider: "sandbox", fee_fixed: 30 });
    const free = await createChannel({ name: "No fees", provider: "sandbox" });
    const fixedRef = await pay(fixedOnly, 5_000);
    expect(await entriesOf("transaction", fixedRef)).toEqual([{ type: "payment", amount: 5_000, fee: 30, legs: { available: 4_970, fees: 30, payers: -5_000 } }]);
    const freeRef = await pay(free, 5_000);
    expect(await entriesOf("transaction", freeRef)).toEqual([{ type: "payment", amount: 5_000, fee: 0, legs: { available: 5_000, payers: -5_000 } }]);

    const init = await api.post("/api/transactions/initialize", { amount: 5_000, email: "payer@example.com", currency: "KES", payment_channel_id: free });
    const declined = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card("4000000000000002"));
    expect(declined.status, declined.text).toBe(402);
    expect(await entriesOf("transaction", init.body.reference)).toEqual([]);
  });
});

describe("payouts", () => {
  it("reserve available -> pending_out when created, then pending_out -> payees when paid, or back to available when failed", async () => {
    const channelId = await createChannel({ name: "Payouts", provider: "sandbox" });
    await pay(channelId, 50_000);
    const [paid, failed] = await Promise.all(
      [PAID_PHONE, FAILED_PHONE].map((phone) => api.post("/v1/payouts", { amount: 12_000, phone_number: phone, payment_channel_id: channelId, description: "rules" })),
    );
    expect(paid!.status, paid!.text).toBe(201);
    expect(failed!.status, failed!.text).toBe(201);
    for (const p of [paid!, failed!]) await until(() => api.get(`/v1/payouts/${p.body.data.id}`), (r) => r.body.data.status !== "pending");

    const reservation = { type: "payout_reservation", amount: 0, fee: 0, legs: { available: -12_000, pending_out: 12_000 } };
    expect(await entriesOf("payout", paid!.body.data.reference)).toEqual([reservation, { type: "payout", amount: -12_000, fee: 0, legs: { payees: 12_000, pending_out: -12_000 } }]);
    expect(await entriesOf("payout", failed!.body.data.reference)).toEqual([
      reservation,
      { type: "payout_failure", amount: 0, fee: 0, legs: { available: 12_000, pending_out: -12_000 } },
    ]);
    const [balance] = await channelBalances(prisma(), { merchantId: merchant.id, mode: "test" }, channelId);
    expect(balance).toMatchObject({ collected: 50_000n, paidOut: 12_000n, pendingOut: 0n, available: 38_000n });
  });

  it("hold the amount in pending_out while in flight: the balance transactions' net still equals available + pending_out", async () => {
    const channelId = await createChannel({ name: "In flight", provider: "sandbox" });
    await pay(channelId, 30_000);
    const payout = await api.post("/v1/payouts", { amount: 10_000, phone_number: PAID_PHONE, payment_channel_id: channelId, description: "in flight" });
    expect(payout.status, payout.text).toBe(201);
    // Read in the same statement's snapshot as the payout's status: pending with the reservation, or paid without it.
    const [row] = await prisma().$queryRawUnsafe<{ status: string; net: string; held: string }[]>(
      `SELECT (SELECT status::text FROM payouts WHERE id = $1) AS status,
         (SELECT sum(amount - fee)::text FROM ledger_entries WHERE channel_id = $2 AND type NOT IN ('refund_reservation', 'payout_reservation')) AS net,
         (SELECT sum(p.amount)::text FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id WHERE a.channel_id = $2 AND a.kind IN ('available', 'pending_out')) AS held`,
      payout.body.data.id,
      channelId,
    );
    expect(row!.net).toBe(row!.held);
    expect(row!.net).toBe(row!.status === "completed" ? "20000" : "30000");
  });
});

describe("refunds", () => {
  it("that fail give the reservation back: refund_reservation, then refund_failure (amount 0), available whole again", async () => {
    const channelId = await createChannel({ name: "Refunds", provider: "sandbox", fee_percent_bps: 100 });
    const reference = await pay(channelId, 20_000, REFUND_FAILS);
    const refund = await api.post("/v1/refunds", { transaction: reference, amount: 8_000 });
    expect(refund.status, refund.text).toBe(201);
    const settled = await until(() => api.get(`/v1/refunds/${refund.body.data.id}`), (r) => r.body.data.status !== "pending");
    expect(settled.body.data.status).toBe("failed");
    expect(await entriesOf("refund", refund.body.data.reference)).toEqual([
      { type: "refund_reservation", amount: 0, fee: 0, legs: { available: -8_000, pending_out: 8_000 } },
      { type: "refund_failure", amount: 0, fee: 0, legs: { available: 8_000, pending_out: -8_000 } },
    ]);
    const [balance] = await channelBalances(prisma(), { merchantId: merchant.id, mode: "test" }, channelId);
    expect(balance).toMatchObject({ collected: 20_000n, fees: 200n, refunded: 0n, pendingOut: 0n, available: 19_800n });
  });

  it("that complete send the reserved amount to the refunds account; the fee is not given back", async () => {
    const channelId = await createChannel({ name: "Refunds that complete", provider: "sandbox", fee_percent_bps: 100 });
    const reference = await pay(channelId, 20_000);
    const refund = await api.post("/v1/refunds", { transaction: reference });
    expect(refund.status, refund.text).toBe(201);
    await until(() => api.get(`/v1/refunds/${refund.body.data.id}`), (r) => r.body.data.status === "completed");
    expect(await entriesOf("refund", refund.body.data.reference)).toEqual([
      { type: "refund_reservation", amount: 0, fee: 0, legs: { available: -20_000, pending_out: 20_000 } },
      { type: "refund", amount: -20_000, fee: 0, legs: { pending_out: -20_000, refunds: 20_000 } },
    ]);
    const [balance] = await channelBalances(prisma(), { merchantId: merchant.id, mode: "test" }, channelId);
    expect(balance).toMatchObject({ collected: 20_000n, fees: 200n, refunded: 20_000n, available: -200n });
  });
});

describe("replayed provider callbacks post nothing twice", () => {
  it("the same STK callback from Daraja three times (one at a time and two at once): one payment entry", async () => {
    const channelId = await createChannel({ name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig(), fee_fixed: 5 });
    const push = await api.post("/api/momo/stk-push", { amount: 1_500, phone_number: PAID_PHONE, payment_channel_id: channelId, reference: "RULES-1" });
    expect(push.status, push.text).toBe(200);
    const { reference, checkout_request_id: checkoutRequestId } = push.body.transaction;
    const body = daraja.stkCallbackBody(checkoutRequestId, { receipt: "RCPTLEDGER1" });
    const url = `${gw.url}${new URL(daraja.pushes.get(checkoutRequestId)!.body.CallBackURL).pathname}`;
    const first = await daraja.postJson(url, body);
    const again = await Promise.all([daraja.postJson(url, body), daraja.postJson(url, body)]);
    for (const ack of [first, ...again]) expect(ack.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect((await api.get(`/api/momo/stk-status/${reference}`)).body.transaction.status).toBe("completed");
    // Daraja's STK amount is whole shillings: 1,500 minor units is KES 15.
    expect(await entriesOf("transaction", reference)).toEqual([{ type: "payment", amount: 1_500, fee: 5, legs: { available: 1_495, fees: 5, payers: -1_500 } }]);
  });

  it("the same Paystack charge.success webhook five times at once: one payment entry", async () => {
    const channel = await api.post("/api/payment-channels/create", { name: "Paystack", provider: "paystack", config: paystack.channelConfig(), fee_percent_bps: 150 });
    expect(channel.status, channel.text).toBe(201);
    // The channel's webhook URL names the public address; the fake posts to where this gateway listens.
    const webhookUrl = `${gw.url}${new URL(channel.body.channel.webhook_url).pathname}`;
    const init = await api.post("/api/transactions/initialize", { amount: 250_000, email: "payer@example.com", currency: "NGN", payment_channel_id: channel.body.channel.id });
    expect(init.status, init.text).toBe(200);
    const reference = init.body.reference as string;
    await paystack.pay(reference); // no webhookUrl is set on the fake: nothing is posted yet
    const event = paystack.chargeEvent(reference);
    const answers = await Promise.all(Array.from({ length: 5 }, () => paystack.sendWebhook(webhookUrl, event)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    await until(() => prisma().transaction.findUniqueOrThrow({ where: { reference } }), (t) => t.status === "completed");
    const again = await paystack.sendWebhook(webhookUrl, event);
    expect(again.status).toBe(200);
    expect(await entriesOf("transaction", reference)).toEqual([{ type: "payment", amount: 250_000, fee: 3_750, legs: { available: 246_250, fees: 3_750, payers: -250_000 } }]);
  });
});
