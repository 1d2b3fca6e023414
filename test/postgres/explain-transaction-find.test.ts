import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { planNodes, type PlanNode } from "../support/plans.ts";

/**
 * Issue 41: finding a payment the way the shop knows it stays an index lookup at 1,000,000 payments of one merchant
 * (and 100,000 of another). Each way of finding one (GET /v1/transactions's client_reference, receipt, phone, email and
 * customer filters, the search by each kind of term, GraphQL's transactionsPage) is sent over HTTP with a recorder on
 * the gateway's pool; every statement it sent is then EXPLAINed with its parameters: a Seq Scan over transactions
 * fails the test, naming the statement.
 */
const ROWS = 1_000_000;
const OTHER_ROWS = 100_000;

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let recording = false;
/** A customer with 1,000 payments (seed: customer first + i % 1000 on i % 10 = 3, so first + 3 has i = 3, 1003, ...). */
let customer = 0;
const recorded = new Map<string, readonly unknown[]>();

beforeAll(async () => {
  gw = await startTestGateway({
    env: { RATE_LIMIT_ENABLED: "false" },
    onStatement: (text, values) => {
      if (recording && !recorded.has(text)) recorded.set(text, values);
    },
  });
  const hot = await createSandboxMerchant(gw, "Million payments");
  const other = await createSandboxMerchant(gw, "Other merchant");
  api = apiClient(gw.url, hot.testKey);
  const db = new pg.Client({ connectionString: gw.database.databaseUrl });
  await db.connect();
  try {
    const started = Date.now();
    await seed(db, hot, other);
    console.log(`seeded ${(ROWS + OTHER_ROWS).toLocaleString("en")} transactions in ${Date.now() - started} ms`);
  } finally {
    await db.end();
  }
}, 900_000);

afterAll(async () => {
  await gw?.close();
});

/**
 * The merchant's million payments over a year: an order number shared by two payments each, one of 5,000 e-mails
 * (200 payments each), phones shared by 10 payments, an M-Pesa receipt on every other one, a customer on one in 10.
 * Loaded as a restore would: the table's indexes (as the migrations define them) dropped and built again after.
 */
async function seed(db: pg.Client, hot: { id: number; channelId: number }, other: { id: number; channelId: number }) {
  const { rows: indexes } = await db.query<{ name: string; definition: string }>(
    `SELECT i.indexname AS name, i.indexdef AS definition FROM pg_indexes i
     WHERE i.schemaname = 'public' AND i.tablename = 'transactions' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
  );
  // Customers for the customer filter (one in 10 payments is one of 1,000 customers').
  await db.query(
    `INSERT INTO customers (merchant_id, mode, email) SELECT $1::int, 'test', 'customer' || i || '@example.com' FROM generate_series(1, 1000) i`,
    [hot.id],
  );
  const { rows: customers } = await db.query<{ first: number }>(`SELECT min(id)::int AS first FROM customers WHERE merchant_id = $1`, [hot.id]);
  await db.query("BEGIN");
  await db.query("SET LOCAL session_replication_role = replica");
  for (const index of indexes) await db.query(`DROP INDEX "${index.name}"`);
  const insert = (merchant: number, channel: number, rows: number, prefix: string, customerFirst: number | null) =>
    db.query(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, payment_method, email, phone_number,
         client_reference, provider_reference, channel_id, customer_id, created_at, updated_at, completed_at)
       SELECT $1::int, 'test', $4 || 'txn_' || i, $4 || 'ac_' || i, 100 + i % 5000, 'KES',
         (CASE WHEN i % 10 = 0 THEN 'pending' WHEN i % 10 = 1 THEN 'failed' ELSE 'completed' END)::"TransactionStatus",
         CASE WHEN i % 2 = 0 THEN 'momo_stk' ELSE 'card' END,
         'payer' || (i % 5000) || '@example.com', '+2547' || lpad((i % ($3::int / 10))::text, 8, '0'),
         'ORDER-' || (i % ($3::int / 2)), CASE WHEN i % 2 = 0 THEN 'SBX' || upper(to_hex(i)) END, $2::int,
         CASE WHEN i % 10 = 3 AND $5::int IS NOT NULL THEN $5::int + i % 1000 END,
         now() - make_interval(secs => i * 31536000.0 / $3::int), now(), NULL
       FROM generate_series(1, $3::int) i`,
      [merchant, channel, rows, prefix, customerFirst],
    );
  await insert(hot.id, hot.channelId, ROWS, "m_", customers[0]!.first);
  customer = customers[0]!.first + 3;
  await insert(other.id, other.channelId, OTHER_ROWS, "o_", null);
  for (const index of indexes) await db.query(index.definition);
  await db.query("COMMIT");
  await db.query("VACUUM ANALYZE transactions");
}



describe(`finding a payment among ${ROWS.toLocaleString("en")} of one merchant's (EXPLAIN)`, () => {
  it("every filter and every kind of search term is an index lookup, never a Seq Scan over transactions", async () => {
    const cases: [string, string, number][] = [
      // [what, path, matches expected]
      ["client_reference", "/v1/transactions?client_reference=ORDER-4242", 2],
      ["client_reference + status + dates", `/v1/transactions?client_reference=ORDER-4242&status=completed&date_from=2000-01-01&date_to=2999-12-30`, 2],
      ["receipt", `/v1/transactions?receipt=SBX${(4242).toString(16).toUpperCase()}`, 1],
      ["phone 07...", "/v1/transactions?phone=0700004242", 10],
      ["phone 254...", "/v1/transactions?phone=254700004242", 10],
      ["phone +254...", "/v1/transactions?phone=%2B254700004242", 10],
      ["email", "/v1/transactions?email=PAYER42%40Example.com", 200],
      ["customer", `/v1/transactions?customer=${customer}`, 1000],
      ["search: our reference", "/v1/transactions?search=m_txn_4242", 1],
      ["search: client reference", "/v1/transactions?search=ORDER-4242", 2],
      ["search: receipt", `/v1/transactions?search=SBX${(4242).toString(16).toUpperCase()}`, 1],
      ["search: phone", "/v1/transactions?search=0700004242", 10],
      ["search: email", "/v1/transactions?search=payer42%40example.com", 200],
      ["search with a page", "/v1/transactions?search=payer42%40example.com&page=3&limit=50", 200],
      ["the dashboard's list (/api)", "/api/transactions/list?search=ORDER-4242", 2],
    ];
    const failures: string[] = [];
    const summary: string[] = [];
    const db = new pg.Client({ connectionString: gw.database.databaseUrl });
    await db.connect();
    try {
      const explain = async (what: string) => {
        for (const [text, values] of recorded) {
          if (!/\btransactions\b/.test(text) || !/^\s*(SELECT|WITH)\b/i.test(text)) continue;
          const [row] = (await db.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>({ text: `EXPLAIN (FORMAT JSON) ${text}`, values: values as unknown[] })).rows;
          const all = [...planNodes(row!["QUERY PLAN"][0].Plan)];
          const scanned = all.some((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "transactions");
          const indexes = [...new Set(all.filter((n) => n["Index Name"]).map((n) => n["Index Name"]!))];
          summary.push(`${scanned ? "SEQ SCAN" : "ok"}  ${what}: ${indexes.join(", ")}`);
          if (scanned) failures.push(`${what}: Seq Scan on transactions in ${text.replace(/\s+/g, " ").trim()}`);
        }
      };
      for (const [what, path, matches] of cases) {
        recorded.clear();
        recording = true;
        const res = await api.get(path);
        recording = false;
        expect(res.status, `${what}: ${res.text}`).toBe(200);
        expect(res.body.total, what).toBe(matches);
        await explain(what);
      }
      // GraphQL's page and connection, with the same filters and search.
      recorded.clear();
      recording = true;
      const gql = await api.post("/graphql", {
        query: `{
          a: transactionsPage(clientReference: "ORDER-4242", phone: "+254700004242") { ... on TransactionPage { total items { reference paymentDetail { method } } } }
          b: transactions(first: 5, search: "254700004242") { totalCount edges { node { reference } } }
          c: transactions(first: 5, email: "payer42@example.com", receipt: "SBX1092") { totalCount }
        }`,
      });
      recording = false;
      expect(gql.status, gql.text).toBe(200);
      expect(gql.body.errors, gql.text).toBeUndefined();
      expect(gql.body.data.b.totalCount).toBe(10);
      await explain("GraphQL");
    } finally {
      await db.end();
    }
    console.log(`${summary.length} statements EXPLAINed:\n${summary.join("\n")}`);
    expect(summary.length).toBeGreaterThan(cases.length);
    expect(failures, failures.join("\n\n")).toEqual([]);
  });
});
