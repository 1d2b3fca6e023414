import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { channelBalances } from "../../src/modules/ledger/store.ts";
import { apiClient as plainApiClient, startTwoInstances, type TestGateway } from "../support/gateway.ts";
import { runLedgerCheck } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";
import { retrying } from "../support/retry.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

/**
 * 200 money operations at once on one channel, spread over two gateway instances on one PostgreSQL: card payments
 * (initialize on one instance, paid on the other's hosted checkout), refunds of some of them as soon as they are
 * paid (some that the sandbox completes, some that it fails), and payouts (some paid, some refused). Afterwards
 * `npm run cli -- ledger check` (the process) is clean, and the channel's balances are exactly what this test
 * computes from what it did.
 */
const PAYMENTS = 120;
const REFUNDS = 40; // of every third payment
const PAYOUTS = 40;
const FEE_BPS = 175;
const FEE_FIXED = 3;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" });
const PAYS = card("4242424242424242");
/** Pays, but the sandbox fails every refund of it. */
const REFUND_FAILS = card("4000000000005126");
const PAID_PHONE = "254708374149";
const FAILED_PHONE = "254700000001";

/** The channel's fee on a payment, as the issue defines it: round(amount * bps / 10000) half away from zero, plus the fixed fee. */
const feeOf = (amount: number) => Math.round((amount * FEE_BPS) / 10_000) + FEE_FIXED;

describe("the ledger under 200 concurrent operations on one channel across two instances", () => {
  let a: TestGateway;
  let b: TestGateway;
  let key: string;
  let merchantId: number;
  let channelId: number;

  beforeAll(async () => {
    const env = { RATE_LIMIT_ENABLED: "false", SANDBOX_REFUND_DELAY_MS: "50", SANDBOX_STK_DELAY_MS: "50", JOB_POLL_INTERVAL_MS: "100" };
    [a, b] = await startTwoInstances({ env });
    const merchant = await a.createMerchant();
    key = merchant.testKey;
    merchantId = merchant.id;
    const channel = await apiClient(a.url, key).post("/api/payment-channels/create", {
      name: "Busy sandbox", provider: "sandbox", config: {}, fee_percent_bps: FEE_BPS, fee_fixed: FEE_FIXED,
    });
    expect(channel.status, channel.text).toBe(201);
    channelId = channel.body.channel.id;
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("ledger check is clean and the balances are exact", async () => {
    const instance = (i: number) => (i % 2 ? a : b);
    const other = (i: number) => (i % 2 ? b : a);

    /** A payment initialized on one instance and paid on the other's checkout; every third one is refunded at once. */
    const payment = async (i: number) => {
      const amount = 1_000 + i * 37;
      // Every sixth payment (half of those refunded) is paid with the card whose refunds fail.
      const refunded = i % 3 === 0;
      const refundFails = i % 6 === 0;
      const init = await apiClient(instance(i).url, key).post("/api/transactions/initialize", { amount, email: `payer${i}@load.test`, payment_channel_id: channelId });
      expect(init.status, init.text).toBe(200);
      const paid = await apiClient(other(i).url).post(`/payment/checkout/${init.body.reference}/pay`, refundFails ? REFUND_FAILS : PAYS);
      expect(paid.status, paid.text).toBe(200);
      if (!refunded) return { amount, refund: null };
      // Alternately all of it and a part, on the instance that did not take the payment.
      const refundAmount = i % 2 ? amount : Math.floor(amount / 3);
      const refund = await apiClient(other(i).url, key).post("/v1/refunds", { transaction: init.body.reference, amount: refundAmount });
      expect(refund.status, refund.text).toBe(201);
      return { amount, refund: { id: refund.body.data.id as number, amount: refundAmount, completes: !refundFails } };
    };
    const payout = async (i: number) => {
      const amount = 100 * (10 + i); // M-Pesa rails pay whole shillings, KES 10 or more
      const paysOut = i % 4 !== 0;
      const res = await apiClient(instance(i).url, key).post("/v1/payouts", { amount, phone_number: paysOut ? PAID_PHONE : FAILED_PHONE, payment_channel_id: channelId, description: `load ${i}` });
      expect(res.status, res.text).toBe(201);
      return { id: res.body.data.id as number, amount, paysOut };
    };

    const [payments, payouts] = await Promise.all([
      Promise.all(Array.from({ length: PAYMENTS }, (_, i) => payment(i))),
      Promise.all(Array.from({ length: PAYOUTS }, (_, i) => payout(i))),
    ]);
    const refunds = payments.flatMap((p) => (p.refund ? [p.refund] : []));
    expect(refunds).toHaveLength(REFUNDS);

    // Everything in flight settles (the sandbox answers refunds and payouts a moment later, on either instance).
    const api = apiClient(a.url, key);
    for (const r of refunds) {
      const settled = await until(() => api.get(`/v1/refunds/${r.id}`), (x) => x.body.data.status !== "pending", 30_000);
      expect(settled.body.data.status, `refund ${r.id}`).toBe(r.completes ? "completed" : "failed");
    }
    for (const p of payouts) {
      const settled = await until(() => api.get(`/v1/payouts/${p.id}`), (x) => x.body.data.status !== "pending", 30_000);
      expect(settled.body.data.status, `payout ${p.id}`).toBe(p.paysOut ? "completed" : "failed");
    }

    const { code, output } = await runLedgerCheck(a.database);
    expect(output).toContain("Clean: the ledger agrees with itself, the API and the business tables.");
    expect(code, output).toBe(0);

    const collected = payments.reduce((sum, p) => sum + p.amount, 0);
    const fees = payments.reduce((sum, p) => sum + feeOf(p.amount), 0);
    const refunded = refunds.filter((r) => r.completes).reduce((sum, r) => sum + r.amount, 0);
    const paidOut = payouts.filter((p) => p.paysOut).reduce((sum, p) => sum + p.amount, 0);
    const balances = await channelBalances(a.gateway.db.prisma, { merchantId, mode: "test" }, channelId);
    expect(balances).toEqual([
      {
        channelId, provider: "sandbox", currency: "KES",
        collected: BigInt(collected), fees: BigInt(fees), refunded: BigInt(refunded), paidOut: BigInt(paidOut), pendingOut: 0n, adjustments: 0n, disputed: 0n, chargedBack: 0n,
        available: BigInt(collected - fees - refunded - paidOut),
      },
    ]);
    // One entry per payment, two per refund and per payout (the reservation, then its completion or failure).
    const entries = await a.gateway.db.prisma.ledgerEntry.groupBy({ by: ["type"], where: { channelId }, _count: { _all: true } });
    const byType = Object.fromEntries(entries.map((e) => [e.type, e._count._all]));
    expect(byType).toEqual({
      payment: PAYMENTS,
      refund_reservation: REFUNDS,
      refund: refunds.filter((r) => r.completes).length,
      refund_failure: refunds.filter((r) => !r.completes).length,
      payout_reservation: PAYOUTS,
      payout: payouts.filter((p) => p.paysOut).length,
      payout_failure: payouts.filter((p) => !p.paysOut).length,
    });
  });
});
