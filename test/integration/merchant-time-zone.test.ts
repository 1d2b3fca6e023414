import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { csvRecords } from "../support/csv.ts";
import { until } from "../support/wait.ts";

/**
 * Issue 37, the merchant's time zone: a payment made at 22:30 UTC is on the next day for a merchant in
 * Africa/Nairobi (UTC+3) in everything that counts days for the merchant (the overview's figures, the /v1 lists' and
 * reports' date_from/date_to, GraphQL's lists, the CSVs' date column), each answer naming the zone; a UTC merchant's
 * days are unchanged; and the /api list keeps its published UTC days for both.
 */

const DAY_MS = 86_400_000;
const utcDay = (at: Date) => at.toISOString().slice(0, 10);
const nextDay = (day: string) => utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + DAY_MS));

/** The latest 22:30 UTC at least a minute ago: within the overview's 30 days, and on the next day in Nairobi. */
function lastHalfPastTen(now = new Date()): Date {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), 22, 30);
  return new Date(today <= now.getTime() - 60_000 ? today : today - DAY_MS);
}

const STATS = `query($days: Int, $periods: [Int!]) {
  paymentStats(days: $days, periods: $periods) {
    __typename
    ... on Error { code message }
    ... on PaymentStats { timezone daily { date completedCount volume { currency amount count } } periods { days since } }
  }
}`;

const TRANSACTIONS_PAGE = `query($from: String, $to: String, $zone: String) {
  transactionsPage(dateFrom: $from, dateTo: $to, timeZone: $zone) {
    __typename
    ... on Error { code message }
    ... on TransactionPage { timezone total items { reference } }
  }
}`;

interface Shop {
  zone: string;
  key: string;
  api: ReturnType<typeof apiClient>;
  reference: string;
  refund: string;
}

let gw: TestGateway;
let nairobi: Shop;
let utc: Shop;
/** When both shops' payment (and its refund and balance transaction) was made. */
const at = lastHalfPastTen();
/** Its UTC day, and its day in Nairobi (the next one). */
const utcDate = utcDay(at);
const nairobiDate = nextDay(utcDate);

async function shop(zone: string): Promise<Shop> {
  const merchant = await createSandboxMerchant(gw, `Shop in ${zone}`);
  await gw.gateway.db.prisma.merchant.update({ where: { id: merchant.id }, data: { timezone: zone } });
  const api = apiClient(gw.url, merchant.testKey);
  const reference = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 2_500, currency: "KES" });
  const created = await api.post("/v1/refunds", { transaction: reference, amount: 500 });
  expect(created.status, created.text).toBe(201);
  const refund = created.body.data.reference as string;
  await until(() => api.get(`/v1/refunds/${refund}`), (r) => r.body.data.status === "completed");
  // Made at 22:30 UTC: the payment, its refund and the payment's balance transaction (the ledger is append-only,
  // so its guard is lifted for this one test update).
  const prisma = gw.gateway.db.prisma;
  await prisma.transaction.update({ where: { reference }, data: { createdAt: at } });
  await prisma.refund.update({ where: { reference: refund }, data: { createdAt: at } });
  await prisma.$transaction([
    prisma.$executeRawUnsafe(`ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only`),
    prisma.$executeRawUnsafe(`UPDATE ledger_entries SET created_at = $1 WHERE merchant_id = $2 AND source_reference = $3`, at, merchant.id, reference),
    prisma.$executeRawUnsafe(`ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only`),
  ]);
  return { zone, key: merchant.testKey, api, reference, refund };
}

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
  nairobi = await shop("Africa/Nairobi");
  utc = await shop("UTC");
});
afterAll(async () => {
  await gw?.close();
});

/** The merchant's day of the payment, and the other one. */
const dayOf = (s: Shop) => (s.zone === "UTC" ? utcDate : nairobiDate);
const otherDayOf = (s: Shop) => (s.zone === "UTC" ? nairobiDate : utcDate);

describe("the merchant's time zone", () => {
  it("puts a 22:30 UTC payment on the next day of a Nairobi merchant's overview, and says the zone (GraphQL)", async () => {
    for (const s of [nairobi, utc]) {
      const res = await s.api.post("/graphql", { query: STATS, variables: { days: 30, periods: [1, 7, 30] } });
      expect(res.status, res.text).toBe(200);
      const stats = res.body.data.paymentStats;
      expect(stats.__typename, res.text).toBe("PaymentStats");
      expect(stats.timezone).toBe(s.zone);
      const day = stats.daily.find((d: { date: string }) => d.date === dayOf(s));
      expect(day, `${s.zone}: ${JSON.stringify(stats.daily.slice(-3))}`).toMatchObject({ completedCount: 1, volume: [{ currency: "KES", amount: 2_500, count: 1 }] });
      const other = stats.daily.find((d: { date: string }) => d.date === otherDayOf(s));
      if (other) expect(other.completedCount).toBe(0);
      // Periods start at the merchant's midnight: 21:00 UTC the day before in Nairobi.
      const since = stats.periods.find((p: { days: number }) => p.days === 7).since as string;
      expect(since).toMatch(s.zone === "UTC" ? /T00:00:00\.000Z$/ : /T21:00:00\.000Z$/);
    }
  });

  it("reads the /v1 lists' date_from/date_to (refunds, transactions) as the merchant's days and answers with its timezone", async () => {
    for (const s of [nairobi, utc]) {
      const on = await s.api.get(`/v1/refunds?date_from=${dayOf(s)}&date_to=${dayOf(s)}`);
      expect(on.status, on.text).toBe(200);
      expect(on.body.timezone).toBe(s.zone);
      expect(on.body.data.map((r: { reference: string }) => r.reference)).toEqual([s.refund]);
      expect(on.body.total).toBe(1);
      const off = await s.api.get(`/v1/refunds?date_from=${otherDayOf(s)}&date_to=${otherDayOf(s)}`);
      expect(off.status, off.text).toBe(200);
      expect(off.body).toMatchObject({ timezone: s.zone, total: 0, data: [] });

      const payments = await s.api.get(`/v1/transactions?date_from=${dayOf(s)}&date_to=${dayOf(s)}`);
      expect(payments.status, payments.text).toBe(200);
      expect(payments.body).toMatchObject({ timezone: s.zone, total: 1 });
      expect(payments.body.data.map((t: { reference: string }) => t.reference)).toEqual([s.reference]);
      const noPayments = await s.api.get(`/v1/transactions?date_from=${otherDayOf(s)}&date_to=${otherDayOf(s)}`);
      expect(noPayments.body).toMatchObject({ timezone: s.zone, total: 0, data: [] });
    }
  });

  it("filters the balance transactions (/v1 and GraphQL) by the merchant's days", async () => {
    for (const s of [nairobi, utc]) {
      const on = await s.api.get(`/v1/balance/transactions?date_from=${dayOf(s)}&date_to=${dayOf(s)}`);
      expect(on.status, on.text).toBe(200);
      expect(on.body.timezone).toBe(s.zone);
      expect(on.body.data.filter((e: { source_reference: string }) => e.source_reference === s.reference)).toHaveLength(1);
      const off = await s.api.get(`/v1/balance/transactions?date_from=${otherDayOf(s)}&date_to=${otherDayOf(s)}`);
      expect(off.body.data.filter((e: { source_reference: string }) => e.source_reference === s.reference)).toHaveLength(0);
    }
  });

  it("reads GraphQL's dateFrom/dateTo as the merchant's days unless timeZone asks for another", async () => {
    const page = async (s: Shop, day: string, zone?: string) => {
      const res = await s.api.post("/graphql", { query: TRANSACTIONS_PAGE, variables: { from: day, to: day, zone } });
      expect(res.body.data.transactionsPage.__typename, res.text).toBe("TransactionPage");
      return res.body.data.transactionsPage as { timezone: string; items: { reference: string }[] };
    };
    const local = await page(nairobi, nairobiDate);
    expect(local.timezone).toBe("Africa/Nairobi");
    expect(local.items.map((t) => t.reference)).toEqual([nairobi.reference]);
    expect((await page(nairobi, utcDate)).items).toEqual([]);
    const asked = await page(nairobi, utcDate, "UTC");
    expect(asked.timezone).toBe("UTC");
    expect(asked.items.map((t) => t.reference)).toEqual([nairobi.reference]);
    const bad = await nairobi.api.post("/graphql", { query: TRANSACTIONS_PAGE, variables: { from: utcDate, to: utcDate, zone: "Mars/Olympus" } });
    expect(bad.body.data.transactionsPage).toMatchObject({ __typename: "ValidationError", message: expect.stringMatching(/timeZone: must be an IANA time zone name/) });
  });

  it("gives the CSV reports a date column in the merchant's zone, named in a timezone column, and filters by its days", async () => {
    for (const s of [nairobi, utc]) {
      const transactions = await s.api.get(`/v1/reports/transactions.csv?date_from=${dayOf(s)}&date_to=${dayOf(s)}`);
      expect(transactions.status, transactions.text).toBe(200);
      const rows = csvRecords(transactions.text);
      expect(rows.map((r) => r.reference)).toEqual([s.reference]);
      expect(rows[0]).toMatchObject({ created_at: at.toISOString(), date: dayOf(s), timezone: s.zone });
      const none = await s.api.get(`/v1/reports/transactions.csv?date_from=${otherDayOf(s)}&date_to=${otherDayOf(s)}`);
      expect(csvRecords(none.text)).toEqual([]);

      const ledger = await s.api.get(`/v1/reports/balance-transactions.csv?date_from=${dayOf(s)}&date_to=${dayOf(s)}`);
      expect(ledger.status, ledger.text).toBe(200);
      const entries = csvRecords(ledger.text).filter((r) => r.source_reference === s.reference);
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({ created_at: at.toISOString(), date: dayOf(s), timezone: s.zone });
      expect(ledger.headers.get("content-disposition")).toBe(`attachment; filename="balance-transactions-test-${dayOf(s)}_to_${dayOf(s)}.csv"`);
    }
  });

  it("keeps the /api list's date_from/date_to on UTC days, whatever the merchant's zone, and its answer as published", async () => {
    for (const s of [nairobi, utc]) {
      const on = await s.api.get(`/api/transactions/list?date_from=${utcDate}&date_to=${utcDate}`);
      expect(on.status, on.text).toBe(200);
      expect(on.body.data.map((t: { reference: string }) => t.reference)).toContain(s.reference);
      expect(Object.keys(on.body).sort()).toEqual(["data", "limit", "page", "pages", "status", "total"]);
      const off = await s.api.get(`/api/transactions/list?date_from=${nairobiDate}&date_to=${nairobiDate}`);
      expect(off.body.data.map((t: { reference: string }) => t.reference)).not.toContain(s.reference);
    }
  });
});
