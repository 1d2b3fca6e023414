import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";
import { groupEntries, type PostingRow } from "../support/ledger-entries.ts";

const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" });

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  gw = await startTestGateway({ env: { SANDBOX_REFUND_DELAY_MS: "100", JOB_POLL_INTERVAL_MS: "50", RATE_LIMIT_ENABLED: "false" } });
  const merchant = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
  await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
});
afterAll(async () => { await gw?.close(); });

async function paid(amount: number): Promise<string> {
  const init = await api.post("/api/transactions/initialize", { amount, email: "payer@example.com", currency: "KES" });
  const res = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card("4242424242424242"));
  expect(res.status, res.text).toBe(200);
  return init.body.reference;
}

/** Each entry of the merchant's ledger as type, amount, fee and its legs (account kind: signed amount). */
async function journal() {
  const rows = await gw.gateway.db.prisma.$queryRawUnsafe<PostingRow[]>(
    `SELECT e.id::text, e.type, e.amount::text, e.fee::text, a.kind, p.amount::text AS leg
     FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id ORDER BY e.id, a.id`,
  );
  return groupEntries(rows);
}

describe("the ledger's postings", () => {
  it("posts a payment, a refund's reservation and its completion, each balanced; refuses edits of the ledger", async () => {
    const ref = await paid(10_000);
    const r = await api.post("/v1/refunds", { transaction: ref, amount: 4000 });
    expect(r.status, r.text).toBe(201);
    await until(() => api.get(`/v1/refunds/${r.body.data.id}`), (x) => x.body.data.status !== "pending");
    const p = gw.gateway.db.prisma;
    expect(await journal()).toEqual([
      { type: "payment", amount: 10_000, fee: 0, legs: { payers: -10_000, available: 10_000 } },
      { type: "refund_reservation", amount: 0, fee: 0, legs: { available: -4000, pending_out: 4000 } },
      { type: "refund", amount: -4000, fee: 0, legs: { pending_out: -4000, refunds: 4000 } },
    ]);
    await expect(p.$executeRawUnsafe("UPDATE ledger_entries SET amount = 1")).rejects.toThrow(/append-only/);
    await expect(p.$executeRawUnsafe("DELETE FROM ledger_postings")).rejects.toThrow(/append-only/);
    await expect(p.$executeRawUnsafe("TRUNCATE ledger_entries CASCADE")).rejects.toThrow(/append-only/);
    await expect(p.$executeRawUnsafe("UPDATE ledger_accounts SET kind = 'available'")).rejects.toThrow(/append-only/);
  });
});

describe("channel balances", () => {
  it("are the accounts' sums, and available is what the other figures leave", async () => {
    const { channelBalances } = await import("../../src/modules/ledger/store.ts");
    const merchant = await gw.createMerchant();
    const mine = apiClient(gw.url, merchant.testKey);
    const channel = await mine.post("/api/payment-channels/create", { name: "Fees", provider: "sandbox", fee_percent_bps: 150, fee_fixed: 10 });
    const init = await mine.post("/api/transactions/initialize", { amount: 20_001, email: "payer@example.com", currency: "KES" });
    expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card("4242424242424242"))).status).toBe(200);
    const [b] = await channelBalances(gw.gateway.db.prisma, { merchantId: merchant.id, mode: "test" });
    // 1.5 % of 20,001 is 300.015: 300, plus 10 fixed.
    expect(b).toEqual({
      channelId: channel.body.channel.id, provider: "sandbox", currency: "KES",
      collected: 20_001n, fees: 310n, refunded: 0n, paidOut: 0n, pendingOut: 0n, adjustments: 0n, disputed: 0n, chargedBack: 0n, available: 19_691n,
    });
  });
});
