import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postAdjustment } from "../../src/modules/ledger/postings.ts";
import { apiClient, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { runLedgerCheck } from "../support/ledger-check.ts";
import { runCli } from "../support/process.ts";
import { until } from "../support/wait.ts";

/**
 * `npm run cli -- ledger check` as a process, against a gateway's database after a real workload (card payments
 * with a fee schedule, refunds that complete and fail, payouts that complete and fail, an adjustment): clean, exit 0.
 * Then the ledger is tampered with the way the database still allows (INSERT only: its triggers refuse UPDATE and
 * DELETE) and the check exits 1 naming each problem.
 */
const REFUND_FAILS_CARD = { card_number: "4000000000005126", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };
const PAID_PHONE = "254708374149";
const FAILED_PHONE = "254700000001";

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let merchantId: number;
let testKey: string;
let channelId: number;
const sql = (text: string, ...values: unknown[]) => gw.gateway.db.prisma.$queryRawUnsafe<Record<string, unknown>[]>(text, ...values);

beforeAll(async () => {
  gw = await startTestGateway({ env: { SANDBOX_REFUND_DELAY_MS: "50", SANDBOX_STK_DELAY_MS: "30", JOB_POLL_INTERVAL_MS: "50", RATE_LIMIT_ENABLED: "false" } });
  const merchant = await gw.createMerchant();
  merchantId = merchant.id;
  testKey = merchant.testKey;
  api = apiClient(gw.url, merchant.testKey);
  const channel = await api.post("/api/payment-channels/create", { name: "Sandbox with fees", provider: "sandbox", config: {}, fee_percent_bps: 290, fee_fixed: 15 });
  expect(channel.status, channel.text).toBe(201);
  channelId = channel.body.channel.id;
});
afterAll(async () => {
  await gw?.close();
});

async function settledRefund(id: number) {
  return until(() => api.get(`/v1/refunds/${id}`), (r) => r.body.data.status !== "pending");
}

describe("ledger check", () => {
  it("is clean after a real workload: payments with fees, refunds and payouts that complete and fail, an adjustment", async () => {
    const paid = await Promise.all([10_001, 25_000, 333].map((amount) => paidTransaction(gw.url, testKey, { amount, email: "payer@example.com", currency: "KES" })));
    const refundsFail = await paidTransaction(gw.url, testKey, { amount: 7_000, email: "payer@example.com", currency: "KES" }, REFUND_FAILS_CARD);
    const refunds = await Promise.all([
      api.post("/v1/refunds", { transaction: paid[0], amount: 4_000 }),
      api.post("/v1/refunds", { transaction: paid[1] }),
      api.post("/v1/refunds", { transaction: refundsFail, amount: 2_000 }),
    ]);
    for (const r of refunds) expect(r.status, r.text).toBe(201);
    const payouts = await Promise.all(
      [PAID_PHONE, FAILED_PHONE].map((phone) => api.post("/v1/payouts", { amount: 1_000, phone_number: phone, payment_channel_id: channelId, description: "ledger check" })),
    );
    for (const p of payouts) expect(p.status, p.text).toBe(201);
    const settledRefunds = await Promise.all(refunds.map((r) => settledRefund(r.body.data.id)));
    expect(settledRefunds.map((r) => r.body.data.status)).toEqual(["completed", "completed", "failed"]);
    const settledPayouts = await Promise.all(payouts.map((p) => until(() => api.get(`/v1/payouts/${p.body.data.id}`), (r) => r.body.data.status !== "pending")));
    expect(settledPayouts.map((p) => p.body.data.status)).toEqual(["completed", "failed"]);
    await gw.gateway.db.prisma.$transaction((tx) =>
      postAdjustment(tx, { merchantId, mode: "test", channelId, currency: "KES", reference: `adj_${randomBytes(6).toString("hex")}`, amount: -250n, note: "bank charge", createdBy: null }),
    );

    const { code, output } = await runLedgerCheck(gw.database);
    expect(output).toMatch(/^Ledger check: \d+ entries, \d+ postings, \d+ accounts, 1 channel balances\n/);
    expect(output).not.toMatch(/FAIL/);
    expect(output).toContain("Clean: the ledger agrees with itself, the API and the business tables.");
    expect(code, output).toBe(0);
    // The workload did write the kinds of entries checked above.
    const types = (await sql(`SELECT DISTINCT type FROM ledger_entries ORDER BY type`)).map((r) => r.type);
    expect(types).toEqual(["adjustment", "payment", "payout", "payout_failure", "payout_reservation", "refund", "refund_failure", "refund_reservation"]);
  });

  it("a payment completed by a direct INSERT, with no entry: exit 1, naming the payment and the collected figure", async () => {
    const reference = `T_${randomBytes(8).toString("hex")}`;
    const [row] = await sql(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, channel_id, email, completed_at, updated_at)
       SELECT merchant_id, mode, $1, $1 || '_ac', 5000, currency, 'completed', channel_id, email, now(), now() FROM transactions WHERE channel_id = $2 LIMIT 1
       RETURNING id`,
      reference,
      channelId,
    );
    const { code, output } = await runLedgerCheck(gw.database);
    expect(code, output).toBe(1);
    expect(output).toContain(`sources_have_entries: transaction ${row!.id} (${reference}, completed): no payment entry`);
    expect(output).toMatch(new RegExp(`balances_match_business: merchant ${merchantId} test channel ${channelId} KES: collected \\d+ in the ledger, \\d+ by the completed transactions`));
    expect(output).toMatch(/\d+ differences?: the ledger is not clean\.\n$/);
  });

  it("an entry whose postings balance but name the wrong account, or another channel's account: exit 1, naming the entry and the legs", async () => {
    // A completed payment with its entry written by hand: the amount lands on pending_out instead of available.
    const reference = `T_${randomBytes(8).toString("hex")}`;
    const [t] = await sql(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, channel_id, email, completed_at, updated_at)
       SELECT merchant_id, mode, $1, $1 || '_ac', 900, currency, 'completed', channel_id, email, now(), now() FROM transactions WHERE channel_id = $2 LIMIT 1
       RETURNING id`,
      reference,
      channelId,
    );
    const [entry] = await sql(
      `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee)
       VALUES ($1, 'test', $2, 'KES', 'payment', 'transaction', $3, $4, 900, 0) RETURNING id`,
      merchantId,
      channelId,
      t!.id,
      reference,
    );
    await sql(
      `INSERT INTO ledger_postings (entry_id, account_id, amount)
       VALUES ($1, ledger_account($2, 'test', $3, 'KES', 'payers'), -900), ($1, ledger_account($2, 'test', $3, 'KES', 'pending_out'), 900)`,
      entry!.id,
      merchantId,
      channelId,
    );

    // An adjustment posted against another merchant's channel account (it balances).
    const other = await gw.createMerchant();
    const otherChannel = await apiClient(gw.url, other.testKey).post("/api/payment-channels/create", { name: "Other", provider: "sandbox", config: {} });
    const [adjustment] = await sql(
      `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, note)
       VALUES ($1, 'test', $2, 'KES', 'adjustment', 'adjustment', NULL, 'adj_forged', 100, 0, 'forged') RETURNING id`,
      merchantId,
      channelId,
    );
    await sql(
      `INSERT INTO ledger_postings (entry_id, account_id, amount)
       VALUES ($1, ledger_account($2, 'test', $3, 'KES', 'available'), 100), ($1, ledger_account($2, 'test', $3, 'KES', 'adjustments'), -100)`,
      adjustment!.id,
      other.id,
      otherChannel.body.channel.id,
    );

    // An entry whose one posting leaves it unbalanced (a hand-written statement; the gateway's rules cannot).
    const [lopsided] = await sql(
      `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, note)
       VALUES ($1, 'test', $2, 'KES', 'adjustment', 'adjustment', NULL, 'adj_lopsided', 100, 0, 'one leg') RETURNING id`,
      merchantId,
      channelId,
    );
    await sql(`INSERT INTO ledger_postings (entry_id, account_id, amount) VALUES ($1, ledger_account($2, 'test', $3, 'KES', 'available'), 100)`, lopsided!.id, merchantId, channelId);

    const { code, output } = await runLedgerCheck(gw.database);
    expect(code, output).toBe(1);
    expect(output).toMatch(new RegExp(`entries_balance: entry ${lopsided!.id} \\(adjustment adj_lopsided\\): [^\\n]*postings sum to 100, not 0`));
    expect(output).toContain(`postings_follow_rules: entry ${entry!.id} (payment ${reference}): available 0 posted, 900 by the rule; pending_out 900 posted, 0 by the rule`);
    expect(output).toMatch(new RegExp(`balances_match_business: merchant ${merchantId} test channel ${channelId} KES: .*pending_out \\d+ in the ledger, 0 by the pending refunds and payouts`));
    expect(output).toContain(`entries_balance: entry ${adjustment!.id} (adjustment adj_forged): posting(s) on an account of another merchant, mode, channel or currency`);
    // The other merchant's balance moved without an entry of its own: its journal no longer adds up to its accounts.
    expect(output).toMatch(new RegExp(`balances_from_journal: merchant ${other.id} test channel ${otherChannel.body.channel.id} KES: sum of net 0 by the balance transactions, 100 by the postings`));
    // The earlier tampering is still there (nothing can delete it), and still reported.
    expect(output).toMatch(/sources_have_entries: transaction \d+ \(T_[0-9a-f]+, completed\): no payment entry/);

    // --limit caps what is listed per check, never what is counted: a second payment without its entry.
    await sql(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, channel_id, email, completed_at, updated_at)
       SELECT merchant_id, mode, $1, $1 || '_ac', 700, currency, 'completed', channel_id, email, now(), now() FROM transactions WHERE channel_id = $2 LIMIT 1`,
      `T_${randomBytes(8).toString("hex")}`,
      channelId,
    );
    const capped = await runCli(["ledger", "check", "--limit", "1"], gw.database.env);
    expect(capped.code, capped.output).toBe(1);
    expect(capped.output).toMatch(/FAIL {2}every completed payment, every refund and payout \(reservation\), every completed or failed refund and payout, every dispute \(hold\) and every won or lost one has its entry \(2 differences\)\n {10}sources_have_entries: [^\n]+\n {10}\.\.\. and 1 more\n/);
  });
});
