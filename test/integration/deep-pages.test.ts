import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Principal } from "../../src/auth.ts";
import * as ledgerStore from "../../src/modules/ledger/store.ts";
import { createTrigramStatistics, indexedPart } from "../../src/modules/customers/search.ts";
import { createCustomerService } from "../../src/modules/customers/service.ts";
import * as linkStore from "../../src/modules/payment-links/store.ts";
import * as payoutStore from "../../src/modules/payouts/store.ts";
import * as refundStore from "../../src/modules/refunds/store.ts";
import { createTransactionStore, type TransactionStore } from "../../src/modules/transactions/store.ts";
import { DAY_SKIP_FROM, pageOfIds } from "../../src/paging.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Every paged list's pages (the first, around the offset from which the per-day counts choose where to start,
 * the middle, the last, past the end) are the rows and total a plain `ORDER BY created_at DESC, id DESC OFFSET`
 * query gives, for each of its filters; and a customer search finds what a plain ILIKE does.
 */
describe("deep pages equal a plain OFFSET query", () => {
  let gw: TestGateway;
  let me: Awaited<ReturnType<typeof createSandboxMerchant>>;
  let mine: Principal;
  let store: TransactionStore;
  const ROWS = 2600;
  const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
  const midnight = (date: string, plusDays = 0) => new Date(new Date(`${date}T00:00:00Z`).getTime() + plusDays * 86_400_000);

  const exec = <T extends object>(text: string, params: unknown[] = []) => gw.gateway.db.sql.query<T>(text, params);

  /** The pages worth checking for a list of `total` rows at `limit` a page. */
  function pagesOf(total: number, limit: number): number[] {
    const last = Math.max(1, Math.ceil(total / limit));
    const aroundSkip = [Math.floor(DAY_SKIP_FROM / limit), Math.floor(DAY_SKIP_FROM / limit) + 1];
    return [...new Set([1, 2, ...aroundSkip, Math.ceil(last / 2), last - 1, last, last + 1])].filter((p) => p >= 1);
  }

  /** Checks `read` against the plain query over `table` for each page worth checking. */
  async function expectSamePages(
    label: string,
    table: string,
    condition: string,
    params: unknown[],
    read: (page: number, limit: number) => Promise<{ ids: unknown[]; total: number }>,
  ) {
    const { n } = (await exec<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${condition}`, params))[0]!;
    expect(n, `${label}: the filter matches rows`).toBeGreaterThan(0);
    for (const limit of [20, 100]) {
      for (const page of pagesOf(n, limit)) {
        // Named apart from id: ORDER BY id would otherwise sort by the output column, the text.
        const expected = await exec<{ key: string }>(
          `SELECT id::text AS key FROM ${table} WHERE ${condition} ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${(page - 1) * limit}`,
          params,
        );
        const got = await read(page, limit);
        expect({ total: got.total, ids: got.ids.map(String) }, `${label}, page ${page} of ${limit}`).toEqual({ total: n, ids: expected.map((r) => r.key) });
      }
    }
  }

  beforeAll(async () => {
    gw = await startTestGateway();
    store = createTransactionStore(gw.gateway.db);
    me = await createSandboxMerchant(gw);
    const them = await createSandboxMerchant(gw);
    mine = { merchantId: me.id, mode: "test", role: "owner", userId: null, keyId: null, keyPrefix: null };
    // About two weeks of rows, three to a millisecond (the id breaks ties), and another merchant's and live ones between.
    await exec(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, channel_id, created_at, updated_at)
       SELECT CASE WHEN i % 10 = 0 THEN $2::int ELSE $1::int END, CASE WHEN i % 15 = 0 THEN 'live' ELSE 'test' END::"Mode",
         'deep_' || i, 'ac_deep_' || i, 100 + i, 'KES', (ARRAY['pending', 'completed', 'failed'])[1 + i % 3]::"TransactionStatus",
         'deep' || (i % 40) || '@example.com', CASE WHEN i % 10 = 0 THEN $4::int ELSE $3::int END,
         date_trunc('second', now()) - (i / 3) * interval '1380 seconds', now()
       FROM generate_series(1, ${ROWS}) i`,
      [me.id, them.id, me.channelId, them.channelId],
    );
    await exec(
      `INSERT INTO payouts (merchant_id, mode, reference, amount, currency, phone_number, status, command_id, channel_id, provider_request_id, created_at, updated_at)
       SELECT $1::int, 'test', 'po_deep_' || i, 100, 'KES', '+254712345678', (ARRAY['pending', 'completed', 'failed'])[1 + i % 3]::"TransactionStatus",
         'BusinessPayment', $2::int, 'req_po_deep_' || i, date_trunc('second', now()) - (i / 2) * interval '2000 seconds', now()
       FROM generate_series(1, 1500) i`,
      [me.id, me.channelId],
    );
    await exec(
      `INSERT INTO refunds (merchant_id, mode, reference, transaction_id, transaction_reference, channel_id, amount, currency, status, method, provider_request_id, created_at, updated_at)
       SELECT t.merchant_id, t.mode, 're_deep_' || t.id, t.id, t.reference, t.channel_id, 1, 'KES', (ARRAY['pending', 'completed', 'failed'])[1 + t.id % 3]::"TransactionStatus",
         'sandbox', 'req_re_deep_' || t.id, t.created_at, now()
       FROM transactions t WHERE t.merchant_id = $1 AND t.reference LIKE 'deep\\_%' AND t.id % 2 = 0`,
      [me.id],
    );
    await exec(
      `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, created_at)
       SELECT $1::int, 'test', CASE WHEN i % 4 = 0 THEN $3::int ELSE $2::int END, 'KES',
         (ARRAY['payment', 'refund', 'payout', 'adjustment', 'refund_reservation'])[1 + i % 5], 'deep', i, 'deep_' || i, 100, date_trunc('second', now()) - (i / 2) * interval '1500 seconds'
       FROM generate_series(1, 2000) i`,
      [me.id, me.channelId, (await createSandboxChannel()).id],
    );
    await exec(
      `INSERT INTO customers (merchant_id, mode, email, first_name, last_name, phone, created_at)
       SELECT $1::int, 'test', 'cust' || i || '@example.com', (ARRAY['Anna', 'Brian', 'Wanjiru', 'Otieno', 'Ann_Marie'])[1 + i % 5], 'Kamau' || (i % 7),
         '+2547' || lpad(i::text, 8, '0'), date_trunc('second', now()) - (i / 2) * interval '1700 seconds'
       FROM generate_series(1, 1500) i`,
      [me.id],
    );
    await exec(
      `INSERT INTO payment_links (merchant_id, mode, slug, amount, currency, description, active, created_at)
       SELECT $1::int, 'test', 'deep-link-' || i, 100, 'KES', 'Deep', i % 3 <> 0, date_trunc('second', now()) - (i / 2) * interval '1900 seconds'
       FROM generate_series(1, 1300) i`,
      [me.id],
    );
  });
  afterAll(() => gw?.close());

  async function createSandboxChannel(): Promise<{ id: number }> {
    const res = await apiClient(gw.url, me.testKey).post("/api/payment-channels/create", { name: "Second", provider: "sandbox", config: {} });
    expect(res.status, res.text).toBe(201);
    return res.body.channel;
  }

  const scope = () => `merchant_id = ${me.id} AND mode = 'test'`;

  it("transactions: with each filter, on the plain-SQL path and the Prisma (relations) path", async () => {
    const from = day(9);
    const to = day(4);
    const filters: [string, Record<string, string>, string, unknown[]][] = [
      ["no filter", {}, "true", []],
      ["pending", { status: "pending" }, "status = 'pending'", []],
      ["completed", { status: "completed" }, "status = 'completed'", []],
      ["a six-day window", { dateFrom: from, dateTo: to }, "created_at >= $1 AND created_at < $2", [midnight(from), midnight(to, 1)]],
      ["failed since", { status: "failed", dateFrom: from }, "status = 'failed' AND created_at >= $1", [midnight(from)]],
      ["until", { dateTo: to }, "created_at < $1", [midnight(to, 1)]],
      ["a search", { search: "deep7@example.com" }, "email = 'deep7@example.com'", []],
    ];
    for (const [label, input, condition, params] of filters) {
      await expectSamePages(label, "transactions", `${scope()} AND ${condition}`, params, async (page, limit) => {
        const viaSql = await store.listPage(mine, { ...input, page, limit });
        const viaPrisma = await store.listPage(mine, { ...input, page, limit }, { include: { channel: true } });
        expect(viaPrisma.items.map((t) => t.id)).toEqual(viaSql.items.map((t) => t.id));
        expect(viaPrisma.total).toBe(viaSql.total);
        expect(await store.count(mine, input)).toBe(viaSql.total);
        return { ids: viaSql.items.map((t) => t.id), total: viaSql.total };
      });
    }
    // Windows that start or end within a day (none of the lists' filters makes one, but the counting allows it):
    // whole days from the rollups, the edges from the index; and a window within one day.
    const hours = (date: string, h: number) => new Date(midnight(date).getTime() + h * 3_600_000 + 123);
    for (const [gte, lt] of [[hours(from, 5), hours(to, 7)], [hours(from, 1), hours(from, 20)], [hours(from, 5), undefined]] as const) {
      const condition = lt ? "created_at >= $1 AND created_at < $2" : "created_at >= $1";
      await expectSamePages(`from ${gte.toISOString()} to ${lt?.toISOString()}`, "transactions", `${scope()} AND ${condition}`, lt ? [gte, lt] : [gte], (page, limit) =>
        pageOfIds(gw.gateway.db.prisma, { table: "transactions", merchantId: me.id, mode: "test", createdAt: { gte, ...(lt ? { lt } : {}) } }, { page, limit }),
      );
    }
    // The REST envelope of a deep page.
    const res = await apiClient(gw.url, me.testKey).get("/api/transactions/list?page=60&limit=20&status=completed");
    expect(res.status, res.text).toBe(200);
    const { n } = (await exec<{ n: number }>(`SELECT count(*)::int AS n FROM transactions WHERE ${scope()} AND status = 'completed'`))[0]!;
    expect(res.body).toMatchObject({ total: n, page: 60, limit: 20, pages: Math.ceil(n / 20) });
  });

  it("payouts, refunds, balance transactions and payment links: with each filter", async () => {
    const from = day(10);
    const to = day(3);
    const window = [midnight(from), midnight(to, 1)];
    const db = gw.gateway.db.prisma;
    const page = (page: number, limit: number) => ({ page, limit });
    const idsOf = <T extends { id: unknown }>(r: { items: T[]; total: number }) => ({ ids: r.items.map((x) => x.id), total: r.total });

    for (const [label, filters, condition, params] of [
      ["payouts", {}, "true", []],
      ["completed payouts in a window", { status: "completed", dateFrom: from, dateTo: to }, "status = 'completed' AND created_at >= $1 AND created_at < $2", window],
    ] as const) {
      await expectSamePages(label, "payouts", `${scope()} AND ${condition}`, [...params], async (p, l) => idsOf(await payoutStore.listPage(db, mine, filters, page(p, l))));
    }
    const transactionId = (await exec<{ id: number }>(`SELECT transaction_id AS id FROM refunds WHERE ${scope()} LIMIT 1`))[0]!.id;
    for (const [label, filters, condition, params] of [
      ["refunds", {}, "true", []],
      ["failed refunds", { status: "failed" }, "status = 'failed'", []],
      ["refunds in a window", { dateFrom: from, dateTo: to }, "created_at >= $1 AND created_at < $2", window],
      ["a payment's refunds", { transactionId }, `transaction_id = ${transactionId}`, []],
    ] as const) {
      await expectSamePages(label, "refunds", `${scope()} AND ${condition}`, [...params], async (p, l) => idsOf(await refundStore.listPage(db, mine, filters, page(p, l))));
    }
    const types = "type IN ('payment', 'refund', 'refund_failure', 'payout', 'payout_failure', 'adjustment')";
    for (const [label, filters, condition, params] of [
      ["balance transactions", {}, types, []],
      ["payments", { type: "payment" as const }, "type = 'payment'", []],
      ["one channel's", { channelId: me.channelId }, `${types} AND channel_id = ${me.channelId}`, []],
      ["one channel's payouts in a window", { type: "payout" as const, channelId: me.channelId, createdAt: { gte: window[0], lt: window[1] } }, `type = 'payout' AND channel_id = ${me.channelId} AND created_at >= $1 AND created_at < $2`, window],
    ] as const) {
      await expectSamePages(label, "ledger_entries", `${scope()} AND ${condition}`, [...params], async (p, l) => idsOf(await ledgerStore.balanceTransactionPage(db, mine, filters, page(p, l))));
    }
    for (const [label, filters, condition] of [
      ["payment links", {}, "true"],
      ["inactive payment links", { active: false }, "NOT active"],
      ["active payment links", { active: true }, "active"],
    ] as const) {
      await expectSamePages(label, "payment_links", `${scope()} AND ${condition}`, [], async (p, l) => idsOf(await linkStore.listPage(db, mine, filters, page(p, l))));
    }
  });

  it("customers: every page, and a search finds and counts what a plain ILIKE does (% and _ taken literally)", async () => {
    let customers = gw.gateway.services.customers;
    await expectSamePages("customers", "customers", scope(), [], async (page, limit) => {
      const r = await customers.listCustomers(mine, { page, limit });
      return { ids: r.items.map((c) => c.id), total: r.total };
    });
    const searches = async (how: string, more: string[][] = []) => {
      for (const [search, pattern] of [["anna", "%anna%"], ["KAMAU3", "%kamau3%"], ["2547000001", "%2547000001%"], ["cust14", "%cust14%"], ["cust149@ex", "%cust149@ex%"], ["n_m", "%n\\_m%"], ...more]) {
      await expectSamePages(
        `search ${search} (${how})`,
        "customers",
        `${scope()} AND (first_name ILIKE $1 OR last_name ILIKE $1 OR email ILIKE $1 OR phone ILIKE $1)`,
        [pattern],
        async (page, limit) => {
          const r = await customers.listCustomers(mine, { search, page, limit });
          return { ids: r.items.map((c) => c.id), total: r.total };
        },
      );
      }
      // "%" is a character to find, not a wildcard: no customer has one.
      expect((await customers.listCustomers(mine, { search: "%" })).total).toBe(0);
    };
    // 1,500 customers: the search walks them newest first.
    await searches("walking the list");
    // Past 2,000 the trigram indexes find the matches first: the same pages and totals.
    await exec(
      `INSERT INTO customers (merchant_id, mode, email, first_name, last_name, phone, created_at)
       SELECT $1::int, 'test', 'more' || i || '@example.org', 'Zed', 'Mwangi', '+2541' || lpad(i::text, 8, '0'), now() - i * interval '1 second'
       FROM generate_series(1, 1000) i`,
      [me.id],
    );
    await searches("matches first");
    // Once ANALYZE has counted the columns' trigrams, the indexes are asked for the uncommon part of the term only
    // (customers/search.ts); the whole term is still what rows must contain. A new service: the first one read the
    // statistics before there were any, and keeps that for a minute.
    await exec("ANALYZE customers");
    const common = await createTrigramStatistics(gw.gateway.db.prisma).common();
    expect(common.get("email")?.has("cus")).toBe(true);
    expect(indexedPart("cust149@ex", common.get("email")!)).not.toBe("cust149@ex");
    // "e149@" alone is also in more149@example.org: the .com term must still find nothing.
    expect(indexedPart("e149@example.com", common.get("email")!)).toBe("e149@");
    customers = createCustomerService(gw.gateway.db.prisma);
    await searches("matches first, common trigrams left out", [["e149@example.org", "%e149@example.org%"]]);
    expect((await customers.listCustomers(mine, { search: "e149@example.com" })).total).toBe(0);
  });
});
