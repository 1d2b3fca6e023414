import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { planNodes, type PlanNode } from "../support/plans.ts";

/**
 * Verify finds the payment through the reference's unique index whatever the statistics say. The gateway's hot reads
 * are prepared statements, so after five runs PostgreSQL may plan them once for any parameters (a generic plan). With
 * the scope (merchant, mode) beside the reference in one WHERE, and statistics from when the merchant had a few
 * payments, the generic plan took a (merchant_id, mode, ...) index and filtered the merchant's payments for the
 * reference: bench/billing.ts saw verify walk up to 100,000 rows a request while a billing run added payments, until
 * autoanalyze ran (seconds of backlog on the API). Here: statistics taken at a handful of rows, 30,000 of the merchant's
 * payments added after with autovacuum off, then every statement verify sent planned generically (EXPLAIN ANALYZE).
 */
const ADDED = 30_000;

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let recording = false;
const recorded = new Map<string, readonly unknown[]>();

beforeAll(async () => {
  gw = await startTestGateway({
    env: { RATE_LIMIT_ENABLED: "false" },
    onStatement: (text, values) => {
      if (recording && !recorded.has(text)) recorded.set(text, values);
    },
  });
}, 120_000);
afterAll(() => gw?.close());


describe("verify under stale statistics and a generic plan", () => {
  it("reads the payment through transactions_reference_key, not by filtering the merchant's payments", async () => {
    const merchant = await createSandboxMerchant(gw, "Stale statistics");
    api = apiClient(gw.url, merchant.testKey);
    const init = await api.post("/api/transactions/initialize", { amount: 2_500, email: "stale@example.com" });
    expect(init.status, init.text).toBe(200);
    const reference = init.body.reference as string;

    const db = new pg.Client({ connectionString: gw.database.databaseUrl });
    await db.connect();
    try {
      await db.query("ALTER TABLE transactions SET (autovacuum_enabled = false)");
      await db.query("ANALYZE transactions");
      // The merchant's payments arrive after the statistics, as a billing run's do.
      await db.query(
        `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, channel_id, created_at, updated_at)
         SELECT $1::int, 'test', 'stale_txn_' || i, 'stale_ac_' || i, 100 + i, 'KES', 'completed', $2::int, now(), now()
         FROM generate_series(1, $3::int) i`,
        [merchant.id, merchant.channelId, ADDED],
      );

      recording = true;
      const verified = await api.get(`/api/transactions/verify/${reference}`);
      recording = false;
      expect(verified.status, verified.text).toBe(200);
      expect(verified.body.transaction.reference).toBe(reference);
      // Another merchant's key never finds it: the scope still applies.
      const other = await createSandboxMerchant(gw, "Other");
      expect((await apiClient(gw.url, other.testKey).get(`/api/transactions/verify/${reference}`)).status).toBe(404);

      const byReference = [...recorded].filter(([text]) => /FROM transactions\b/.test(text) && /reference = \$1/.test(text));
      expect(byReference.length).toBeGreaterThan(0);
      await db.query("SET plan_cache_mode = force_generic_plan");
      for (const [i, [text, values]] of byReference.entries()) {
        await db.query(`PREPARE verify_${i} AS ${text}`);
        const args = values.map((v) => (v === null ? "NULL" : db.escapeLiteral(String(v)))).join(", ");
        const { rows } = await db.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE verify_${i}(${args})`);
        const scans = [...planNodes(rows[0]!["QUERY PLAN"][0].Plan)].filter((n) => n["Relation Name"] === "transactions");
        expect(scans.map((n) => [n["Node Type"], n["Index Name"], n["Rows Removed by Filter"] ?? 0]), text).toEqual([["Index Scan", "transactions_reference_key", 0]]);
      }
    } finally {
      await db.query("ALTER TABLE transactions RESET (autovacuum_enabled)").catch(() => undefined);
      await db.end();
    }
  }, 120_000);
});
