import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Principal } from "../../src/auth.ts";
import { apiClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * The paged lists' totals come from list_counts, which triggers keep (prisma/migrations/*_list_rollups): they
 * must stay exact whatever writes the rows, through the API or directly with SQL, alone or concurrently.
 */
describe("list totals kept by the database", () => {
  let gw: TestGateway;
  let me: Awaited<ReturnType<typeof createSandboxMerchant>>;
  let them: Awaited<ReturnType<typeof createSandboxMerchant>>;
  let mine: Principal;

  const principalOf = (merchantId: number): Principal => ({ merchantId, mode: "test", role: "owner", userId: null, keyId: null, keyPrefix: null });
  const exec = (text: string, params: unknown[] = []) => gw.gateway.db.sql.query(text, params);

  /**
   * Every count list_counts keeps, per list, merchant, mode, key, channel and day (and all-time), against
   * count(*) of the tables themselves: the rows where they differ (none, when the rollups are exact).
   */
  async function rollupDifferences() {
    const actual = (list: string, key: string, channel: string) => `
      SELECT '${list}' AS list, merchant_id, mode, ${key} AS key, ${channel} AS channel_id, d.day, count(*) AS n
      FROM ${list} r CROSS JOIN LATERAL (VALUES ((r.created_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day)
      GROUP BY 1, 2, 3, 4, 5, 6`;
    return exec(`
      WITH actual AS (
        ${actual("transactions", "status::text", "0")} UNION ALL ${actual("payouts", "status::text", "0")}
        UNION ALL ${actual("refunds", "status::text", "0")} UNION ALL ${actual("customers", "''", "0")}
        UNION ALL ${actual("payment_links", "active::text", "0")} UNION ALL ${actual("ledger_entries", "type", "channel_id")}
        UNION ALL ${actual("disputes", "status", "0")}
        UNION ALL SELECT 'disputes_closed', merchant_id, mode, status, 0, d.day, count(*)
          FROM disputes r CROSS JOIN LATERAL (VALUES ((r.closed_at AT TIME ZONE 'UTC')::date), ('-infinity'::date)) d(day) WHERE closed_at IS NOT NULL
          GROUP BY 1, 2, 3, 4, 5, 6
      ), kept AS (
        SELECT list, merchant_id, mode, key, channel_id, day, sum(n) AS n FROM list_counts GROUP BY 1, 2, 3, 4, 5, 6
      )
      SELECT list, merchant_id, mode::text, key, channel_id, day::text, actual.n::int AS actual, kept.n::int AS kept
      FROM actual FULL JOIN kept USING (list, merchant_id, mode, key, channel_id, day)
      WHERE coalesce(actual.n, 0) <> coalesce(kept.n, 0)
      UNION ALL
      SELECT * FROM (${hourDifferences()}) hours`);
  }

  /** The same per UTC hour of each day (list_counts.hours, summed over stripes), as rows of the same shape. */
  function hourDifferences() {
    const actual = (list: string, key: string, channel: string) => `
      SELECT '${list}' AS list, merchant_id, mode, ${key} AS key, ${channel} AS channel_id, (r.created_at AT TIME ZONE 'UTC')::date AS day,
        1 + extract(hour FROM r.created_at AT TIME ZONE 'UTC')::int AS h, count(*) AS n
      FROM ${list} r GROUP BY 1, 2, 3, 4, 5, 6, 7`;
    return `
      WITH actual AS (
        ${actual("transactions", "status::text", "0")} UNION ALL ${actual("payouts", "status::text", "0")}
        UNION ALL ${actual("refunds", "status::text", "0")} UNION ALL ${actual("customers", "''", "0")}
        UNION ALL ${actual("payment_links", "active::text", "0")} UNION ALL ${actual("ledger_entries", "type", "channel_id")}
        UNION ALL ${actual("disputes", "status", "0")}
        UNION ALL SELECT 'disputes_closed', merchant_id, mode, status, 0, (closed_at AT TIME ZONE 'UTC')::date,
          1 + extract(hour FROM closed_at AT TIME ZONE 'UTC')::int, count(*) FROM disputes WHERE closed_at IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7
      ), kept AS (
        SELECT list, merchant_id, mode, key, channel_id, day, u.h, sum(u.n) AS n
        FROM list_counts, unnest(hours) WITH ORDINALITY AS u(n, h) WHERE day > '-infinity' GROUP BY 1, 2, 3, 4, 5, 6, 7
      )
      SELECT list, merchant_id, mode::text, key, channel_id, day::text || ' hour ' || (h - 1), actual.n::int AS actual, kept.n::int AS kept
      FROM actual FULL JOIN kept USING (list, merchant_id, mode, key, channel_id, day, h)
      WHERE coalesce(actual.n, 0) <> coalesce(kept.n, 0)`;
  }

  /** Each ledger account's balance as ledger_account_balances keeps it against the sum of its postings: where they differ. */
  function balanceDifferences() {
    return exec(`
      SELECT a.id, coalesce(p.n, 0)::text AS actual, coalesce(b.n, 0)::text AS kept FROM ledger_accounts a
      LEFT JOIN (SELECT account_id, sum(amount) AS n FROM ledger_postings GROUP BY 1) p ON p.account_id = a.id
      LEFT JOIN (SELECT account_id, sum(balance) AS n FROM ledger_account_balances GROUP BY 1) b ON b.account_id = a.id
      WHERE coalesce(p.n, 0) <> coalesce(b.n, 0)`);
  }

  /** The REST list's total for these query parameters, and count(*) of the same rows. */
  async function transactionTotals(query: string, condition: string, params: unknown[] = []) {
    const res = await apiClient(gw.url, me.testKey).get(`/api/transactions/list?limit=7&${query}`);
    expect(res.status, res.text).toBe(200);
    const [row] = await exec(`SELECT count(*)::int AS n FROM transactions WHERE merchant_id = $1 AND mode = 'test' AND ${condition}`, [me.id, ...params]);
    return { total: res.body.total as number, pages: res.body.pages as number, counted: (row as { n: number }).n };
  }

  beforeAll(async () => {
    // 200 concurrent initializes from one key are the point of a test here, not the rate limit.
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    me = await createSandboxMerchant(gw);
    them = await createSandboxMerchant(gw);
    mine = principalOf(me.id);
  });
  afterAll(() => gw?.close());

  it("stays exact after API writes and status changes", async () => {
    const api = apiClient(gw.url, me.testKey);
    const references: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await api.post("/api/transactions/initialize", { amount: 100 + i, email: `payer${i}@example.com` });
      expect(res.status, res.text).toBe(200);
      references.push(res.body.reference);
    }
    await apiClient(gw.url, them.testKey).post("/api/transactions/initialize", { amount: 100, email: "other@example.com" });
    const transactions = gw.gateway.services.transactions;
    const idOf = async (reference: string) => (await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } })).id;
    await transactions.transition({ transactionId: await idOf(references[0]!), to: "completed", changes: { paymentMethod: "card" } });
    await transactions.transition({ transactionId: await idOf(references[1]!), to: "completed", changes: { paymentMethod: "card" } });
    await transactions.transition({ transactionId: await idOf(references[2]!), to: "failed", changes: { failureCode: "card_declined" } });
    const link = await api.post("/v1/payment-links", { amount: 500, currency: "KES", description: "A link" });
    expect([200, 201], link.text).toContain(link.status);

    expect(await rollupDifferences()).toEqual([]);
    for (const status of ["pending", "completed", "failed"]) {
      const { total, counted } = await transactionTotals(`status=${status}`, `status = $2::"TransactionStatus"`, [status]);
      expect(total, status).toBe(counted);
    }
    expect((await transactionTotals("", "true")).total).toBe(6);
    expect((await gw.gateway.services.customers.listCustomers(mine)).total).toBe(6);
    expect((await gw.gateway.services.paymentLinks.listPage(mine, {})).total).toBe(1);
    expect((await gw.gateway.services.paymentLinks.listPage(mine, { active: false })).total).toBe(0);
    expect((await gw.gateway.services.ledger.listPage(mine, {})).total).toBe(2);
  });

  it("stays exact after direct SQL: a bulk insert of thousands, updates that move rows, deletes and TRUNCATE", async () => {
    // 3,000 payments over about twelve days, ending now, a third in each status.
    await exec(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, channel_id, created_at, updated_at)
       SELECT $1::int, 'test', 'bulk_' || i, 'ac_bulk_' || i, 100 + i, 'KES', (ARRAY['pending', 'completed', 'failed'])[1 + i % 3]::"TransactionStatus",
         'bulk' || i || '@example.com', $2::int, now() - i * interval '347 seconds', now()
       FROM generate_series(1, 3000) i`,
      [me.id, me.channelId],
    );
    await exec(
      `INSERT INTO customers (merchant_id, mode, email, first_name, created_at)
       SELECT $1::int, 'test', 'bulk' || i || '@example.com', 'Bulk', now() - i * interval '1 hour' FROM generate_series(1, 1500) i`,
      [me.id],
    );
    await exec(
      `INSERT INTO payment_links (merchant_id, mode, slug, amount, currency, description, active, created_at)
       SELECT $1::int, 'test', 'bulk-link-' || i, 100, 'KES', 'Bulk', i % 4 <> 0, now() - i * interval '1 hour' FROM generate_series(1, 400) i`,
      [me.id],
    );
    expect(await rollupDifferences()).toEqual([]);

    // Status changes, rows moved to other days, to another merchant and mode, and deletes.
    await exec(`UPDATE transactions SET status = 'completed' WHERE reference LIKE 'bulk\\_%' AND status = 'pending' AND amount % 5 = 0`);
    await exec(`UPDATE transactions SET created_at = created_at - interval '3 days' WHERE reference LIKE 'bulk\\_%' AND amount % 7 = 0`);
    await exec(`UPDATE transactions SET merchant_id = $1 WHERE reference LIKE 'bulk\\_%' AND amount % 11 = 0`, [them.id]);
    await exec(`UPDATE transactions SET mode = 'live' WHERE reference LIKE 'bulk\\_%' AND amount % 13 = 0`);
    await exec(`UPDATE transactions SET description = 'untouched counts' WHERE reference LIKE 'bulk\\_%'`);
    await exec(`DELETE FROM transactions WHERE reference LIKE 'bulk\\_%' AND amount % 17 = 0`);
    await exec(`UPDATE payment_links SET active = NOT active WHERE slug LIKE 'bulk-link-%' AND amount = 100 AND length(slug) = 12`);
    await exec(`DELETE FROM customers WHERE email LIKE 'bulk1%'`);
    expect(await rollupDifferences()).toEqual([]);

    for (const status of ["pending", "completed", "failed"]) {
      const { total, pages, counted } = await transactionTotals(`status=${status}`, `status = $2::"TransactionStatus"`, [status]);
      expect(total, status).toBe(counted);
      expect(pages).toBe(Math.ceil(counted / 7));
    }
    // A 7-day window, and one that ends today, from whole days of the rollups.
    const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
    const window = (from: string, to: string) => [new Date(`${from}T00:00:00Z`), new Date(new Date(`${to}T00:00:00Z`).getTime() + 86_400_000)];
    for (const [from, to] of [[day(9), day(3)], [day(6), day(0)], [day(0), day(0)]] as const) {
      const { total, counted } = await transactionTotals(`date_from=${from}&date_to=${to}`, "created_at >= $2 AND created_at < $3", window(from, to));
      expect(total, `${from}..${to}`).toBe(counted);
      const completed = await transactionTotals(`status=completed&date_from=${from}`, `status = 'completed' AND created_at >= $2`, [window(from, to)[0]]);
      expect(completed.total).toBe(completed.counted);
    }
    const links = await exec(`SELECT active, count(*)::int AS n FROM payment_links WHERE merchant_id = $1 GROUP BY active`, [me.id]);
    for (const { active, n } of links as { active: boolean; n: number }[]) {
      expect((await gw.gateway.services.paymentLinks.listPage(mine, { active })).total).toBe(n);
    }

    // TRUNCATE empties a list's counts (payment_links CASCADE: its payments go with it).
    await exec("TRUNCATE payment_links CASCADE");
    expect((await gw.gateway.services.paymentLinks.listPage(mine, {})).total).toBe(0);
    expect(await rollupDifferences()).toEqual([]);
  });

  it("a row at exactly the first and the last millisecond of a window is in it; one a millisecond outside is not", async () => {
    const merchant = await createSandboxMerchant(gw);
    const at = ["2024-03-09T23:59:59.999Z", "2024-03-10T00:00:00.000Z", "2024-03-12T23:59:59.999Z", "2024-03-13T00:00:00.000Z"];
    await exec(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, created_at, updated_at)
       SELECT $1::int, 'test', 'edge_' || $1::int || '_' || i, 'ac_edge_' || $1::int || '_' || i, 100, 'KES', 'pending', 'edge@example.com', ($2::timestamptz[])[i], now()
       FROM generate_series(1, 4) i`,
      [merchant.id, at],
    );
    const list = (query: string) => apiClient(gw.url, merchant.testKey).get(`/api/transactions/list?${query}`);
    const inWindow = await list("date_from=2024-03-10&date_to=2024-03-12");
    expect(inWindow.body.total).toBe(2);
    expect(inWindow.body.data.map((t: { created_at: string }) => t.created_at)).toEqual([at[2], at[1]]);
    expect((await list("date_from=2024-03-10")).body.total).toBe(3);
    expect((await list("date_to=2024-03-12")).body.total).toBe(3);
    expect((await list("date_from=2024-03-13&date_to=2024-03-13")).body.total).toBe(1);
  });

  it("200 concurrent initializes leave exact totals", async () => {
    const merchant = await createSandboxMerchant(gw);
    const api = apiClient(gw.url, merchant.testKey);
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => api.post("/api/transactions/initialize", { amount: 1000 + i, email: `crowd${i % 50}@example.com` })),
    );
    expect(answers.filter((res) => res.status !== 200).map((res) => res.text)).toEqual([]);
    const list = await api.get("/api/transactions/list?status=pending&limit=100");
    expect(list.body.total).toBe(200);
    expect(list.body.pages).toBe(2);
    expect((await gw.gateway.services.customers.listCustomers(principalOf(merchant.id))).total).toBe(50);
    expect(await rollupDifferences()).toEqual([]);
  });

  it("concurrent payments, declines and initializes of one merchant (inserts and status changes at once) leave exact totals", async () => {
    const merchant = await createSandboxMerchant(gw);
    const declined = { ...SANDBOX_CARD, card_number: "4000000000009995" };
    await Promise.all(
      Array.from({ length: 90 }, (_, i) => {
        const body = { amount: 2000 + i, email: `rush${i % 30}@example.com` };
        if (i % 3 === 0) return paidTransaction(gw.url, merchant.testKey, body);
        if (i % 3 === 1) return apiClient(gw.url, merchant.testKey).post("/api/transactions/initialize", body).then(async (init) => {
          expect(init.status, init.text).toBe(200);
          const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, declined);
          expect(paid.status, paid.text).toBe(402);
        });
        return apiClient(gw.url, merchant.testKey).post("/api/transactions/initialize", body).then((init) => expect(init.status, init.text).toBe(200));
      }),
    );
    const api = apiClient(gw.url, merchant.testKey);
    for (const status of ["completed", "failed", "pending"]) {
      expect((await api.get(`/api/transactions/list?status=${status}`)).body.total, status).toBe(30);
    }
    expect(await rollupDifferences()).toEqual([]);
    expect(await balanceDifferences()).toEqual([]);
  });

  it("disputes' totals and the balances stay exact after direct SQL: disputes inserted, moved and deleted; postings inserted in bulk", async () => {
    const merchant = await createSandboxMerchant(gw);
    const api = apiClient(gw.url, merchant.testKey);
    const paid = await paidTransaction(gw.url, merchant.testKey, { amount: 5000, email: "disputed@example.com" });
    // A payment to hang the disputes on (their rows need one), found by its reference.
    const [payment] = (await exec(`SELECT id, reference FROM transactions WHERE reference = $1`, [paid])) as { id: number; reference: string }[];
    await exec(
      `INSERT INTO disputes (merchant_id, mode, reference, transaction_id, transaction_reference, channel_id, amount, currency, reason, status,
         due_by, provider_reference, created_at, updated_at, closed_at)
       SELECT $1::int, 'test', 'dp_bulk_' || $1::int || '_' || i, $2::int, $3, $4::int, 100, 'KES', 'fraudulent',
         (ARRAY['needs_response', 'under_review', 'won', 'lost', 'won', 'won'])[1 + i % 6], CASE WHEN i % 6 < 2 THEN now() + i * interval '1 hour' END,
         'pdp_bulk_' || $1::int || '_' || i, now() - i * interval '3 hours', now(), CASE WHEN i % 6 >= 2 THEN now() - i * interval '17 minutes' END
       FROM generate_series(1, 3000) i`,
      [merchant.id, payment!.id, payment!.reference, merchant.channelId],
    );
    await exec(`UPDATE disputes SET status = 'won', closed_at = now() WHERE reference LIKE 'dp\\_bulk\\_%' AND status = 'under_review' AND amount = 100 AND due_by < now() + interval '100 hours'`);
    await exec(`DELETE FROM disputes WHERE reference LIKE 'dp\\_bulk\\_%' AND reference LIKE '%7'`);
    expect(await rollupDifferences()).toEqual([]);
    const counts = (await exec(`SELECT status, count(*)::int AS n FROM disputes WHERE merchant_id = $1 GROUP BY status`, [merchant.id])) as { status: string; n: number }[];
    for (const { status, n } of counts) expect((await api.get(`/v1/disputes?status=${status}&limit=7`)).body.total, status).toBe(n);
    const all = await api.get("/v1/disputes?limit=100&page=2");
    expect(all.body.total).toBe(counts.reduce((sum, c) => sum + c.n, 0));
    // The page in the list's order, as a plain ORDER BY ... OFFSET reads it.
    const expected = (await exec(
      `SELECT reference FROM disputes WHERE merchant_id = $1 AND mode = 'test' ORDER BY closed_at DESC NULLS FIRST, due_by ASC NULLS LAST, created_at DESC, id DESC LIMIT 100 OFFSET 100`,
      [merchant.id],
    )) as { reference: string }[];
    expect(all.body.data.map((d: { id: string }) => d.id)).toEqual(expected.map((d) => d.reference));
    // Deep pages (past the open ones, found by closing day and hour), with and without a status, and the last: as OFFSET reads them.
    for (const [status, page] of [[null, 12], [null, 20], [null, 27], ["won", 12], ["lost", 6], ["needs_response", 3]] as const) {
      const res = await api.get(`/v1/disputes?limit=100&page=${page}${status ? `&status=${status}` : ""}`);
      expect(res.status, res.text).toBe(200);
      const rows = (await exec(
        `SELECT reference FROM disputes WHERE merchant_id = $1 AND mode = 'test' AND ($2::text IS NULL OR status = $2)
         ORDER BY closed_at DESC NULLS FIRST, due_by ASC NULLS LAST, created_at DESC, id DESC LIMIT 100 OFFSET $3`,
        [merchant.id, status, (page - 1) * 100],
      )) as { reference: string }[];
      expect(res.body.data.map((d: { id: string }) => d.id), `${status} page ${page}`).toEqual(rows.map((d) => d.reference));
    }

    // Postings written by SQL, 5,000 at once on two accounts of the merchant's channel: the balance moves with them.
    const before = (await api.get("/v1/balance")).body.data[0];
    await exec(
      `WITH accounts AS (SELECT ledger_account($1::int, 'test', $2::int, 'KES', 'available') AS available, ledger_account($1::int, 'test', $2::int, 'KES', 'payers') AS payers)
       INSERT INTO ledger_postings (entry_id, account_id, amount)
       SELECT -i, leg.account, leg.sign * 3 FROM generate_series(1, 2500) i, accounts, LATERAL (VALUES (available, 1), (payers, -1)) leg(account, sign)`,
      [merchant.id, merchant.channelId],
    );
    const after = (await api.get("/v1/balance")).body.data[0];
    expect(BigInt(after.available) - BigInt(before.available)).toBe(7500n);
    expect(BigInt(after.collected) - BigInt(before.collected)).toBe(7500n);
    expect(await balanceDifferences()).toEqual([]);
  });
});
