import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";
import { LONG_TEST_TIMEOUT_MS } from "../support/timing.ts";
import { planNodes, type PlanNode } from "../support/plans.ts";

/**
 * Issue 27: the job poller, webhook dispatch and idempotency lookups cost the same with a million finished rows as
 * with none. A million failed jobs (kept for operators, their run_at in the past), a million delivered webhook
 * deliveries and a million expired Idempotency-Key records are loaded, the gateway serves a keyed payment whose
 * webhook the poller delivers, and each of those statements, as the gateway sent it, is run again under
 * EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back: the pages it touches must be a handful, not a number
 * that grows with the finished rows (a plan property, not a timing).
 */
const FINISHED = 1_000_000;
/** Pages a statement may touch: index descents and the few rows it works on (a walk over the finished rows is thousands). */
const MAX_BUFFERS = 100;

let gw: TestGateway;
let receiver: WebhookReceiver;
let api: ReturnType<typeof apiClient>;
/** Each statement's text and its latest parameters of each shape (a claim's, by each kind it claimed for). */
const recorded = new Map<string, Map<string, readonly unknown[]>>();

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  gw = await startTestGateway({
    env: { JOB_POLL_INTERVAL_MS: "100", WEBHOOK_ALLOW_PRIVATE_URLS: "true", RATE_LIMIT_ENABLED: "false" },
    onStatement: (text, values) => {
      const samples = recorded.get(text) ?? new Map<string, readonly unknown[]>();
      // A claim names its kind, or (a pass over every kind: claimDueKinds) the array of its kinds: a sample for each.
      const kinds = /^\s*UPDATE jobs SET status = 'running'/.test(text) ? [values[3]].flat().map(String) : [""];
      for (const kind of kinds) samples.set(kind, values);
      recorded.set(text, samples);
    },
  });
  const merchant = await gw.createMerchant();
  const other = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
  expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
  expect((await api.post("/v1/webhooks", { url: `${receiver.url}/hooks` })).status).toBe(201);

  const started = Date.now();
  const [key] = await gw.gateway.db.prisma.apiKey.findMany({ where: { merchantId: merchant.id, mode: "test" } });
  await load(gw.database.databaseUrl!, { merchant: merchant.id, principal: `key:${key!.id}`, other: other.id });
  console.log(`loaded ${FINISHED.toLocaleString("en")} failed jobs, delivered deliveries and expired keys in ${Date.now() - started} ms`);
}, LONG_TEST_TIMEOUT_MS);

afterAll(async () => {
  await gw?.close();
  await receiver?.close();
});

/** Loads the three tables at once, each on a connection of its own. */
async function load(url: string, ids: { merchant: number; principal: string; other: number }) {
  await Promise.all([
    // The worst case for the poller: failed jobs of the kind it claims, all of them past their run_at.
    bulkLoad(url, "jobs", [
      [
        `INSERT INTO jobs (kind, payload, status, run_at, attempts, last_error, created_at, updated_at)
         SELECT 'webhook.deliver', jsonb_build_object('deliveryId', -i), 'failed', now() - make_interval(secs => i), 8, 'HTTP 500', now(), now()
         FROM generate_series(1, $1::int) i`,
        [FINISHED],
      ],
    ]),
    // Delivered deliveries: 1,000 events of another merchant, each to 1,000 endpoints of its.
    bulkLoad(url, "webhook_deliveries", [
      [
        `INSERT INTO webhook_endpoints (merchant_id, mode, url, events, enabled, secret_encrypted, created_at, updated_at)
         SELECT $1::int, 'test', 'https://hooks.example.com/' || i, '{}', false, 'sealed', now(), now() FROM generate_series(1, 1000) i`,
        [ids.other],
      ],
      [`INSERT INTO events (merchant_id, mode, type, payload) SELECT $1::int, 'test', 'transaction.completed', '{}' FROM generate_series(1, 1000)`, [ids.other]],
      [
        `INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, mode, status, attempts, last_status_code, next_attempt_at, delivered_at)
         SELECT ep.id, ev.id, $1::int, 'test', 'succeeded', 1, 200, NULL, now()
         FROM webhook_endpoints ep JOIN events ev ON ev.merchant_id = ep.merchant_id WHERE ep.merchant_id = $1::int`,
        [ids.other],
      ],
    ]),
    // Expired keys of the very caller whose keyed requests are looked up below.
    bulkLoad(url, "idempotency_keys", [
      [
        `INSERT INTO idempotency_keys (merchant_id, mode, principal, key, request_fingerprint, status, response_status, created_at, expires_at)
         SELECT $1::int, 'test', $2, 'expired-' || i, 'fp', 'completed', 200, now() - interval '3 days', now() - interval '2 days'
         FROM generate_series(1, $3::int) i`,
        [ids.merchant, ids.principal, FINISHED],
      ],
    ]),
  ]);
}

/**
 * Bulk load as a restore would: the table's own indexes (as the migrations define them) are dropped and built again
 * after the rows are in, and foreign-key triggers are skipped (session_replication_role), several times faster than
 * maintaining them row by row; the rows and indexes end up the same.
 */
async function bulkLoad(url: string, table: string, statements: [string, unknown[]][]) {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows: indexes } = await db.query<{ name: string; definition: string }>(
      `SELECT i.indexname AS name, i.indexdef AS definition FROM pg_indexes i
       WHERE i.schemaname = 'public' AND i.tablename = $1 AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
      [table],
    );
    await db.query("BEGIN");
    await db.query("SET LOCAL session_replication_role = replica");
    for (const index of indexes) await db.query(`DROP INDEX "${index.name}"`);
    for (const [text, values] of statements) await db.query(text, values);
    for (const index of indexes) await db.query(index.definition);
    await db.query("COMMIT");
    await db.query(`VACUUM ANALYZE ${table}`);
  } finally {
    await db.end();
  }
}



describe("due work stays constant-time with a million finished rows", () => {
  it("the poller's claim, a delivery's dispatch and an Idempotency-Key's claim, lookup and stored response each touch a handful of pages", async () => {
    recorded.clear();
    const init = (key: string) =>
      api.post("/api/transactions/initialize", { amount: 2_500, email: "due@example.com" }, { "idempotency-key": key });
    const first = await init("due-work-1");
    expect(first.status, first.text).toBe(200);
    const replay = await init("due-work-1");
    expect(replay.body.reference).toBe(first.body.reference);
    const card = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };
    const paid = await apiClient(gw.url).post(`/payment/checkout/${first.body.reference}/pay`, card);
    expect(paid.status, paid.text).toBe(200);
    await until(() => receiver.received.filter((w) => w.json?.data?.reference === first.body.reference), (w) => w.length > 0);

    const statements: { what: string; pattern: RegExp; kind?: string; setup?: string[] }[] = [
      // The runner polls each kind with the same text; the failed million are webhook deliveries.
      { what: "the poller's claim", pattern: /^\s*UPDATE jobs SET status = 'running'/, kind: "webhook.deliver" },
      // Its plan must not hang on the planner's guess of how many rows the LIMITs give: with a large queue (200,000
      // e-mails, bench/billing.ts) a guess in the thousands joined them to a scan of the whole table. Made to dislike
      // nested loops, the planner still reaches the claimed rows by their ids.
      {
        what: "the poller's claim, joins costed otherwise",
        pattern: /^\s*UPDATE jobs SET status = 'running'/,
        kind: "webhook.deliver",
        // A job due for it to claim, due before the recorded claim's time (in the transaction rolled back: no instance sees
        // it): with nothing to claim, a join ends early.
        setup: ["SET LOCAL enable_nestloop = off", `INSERT INTO jobs (kind, payload, run_at) VALUES ('webhook.deliver', '{"deliveryId": -1}', now() - interval '1 hour')`],
      },
      // Deliveries run in batches (src/modules/webhooks/dispatch.ts): one load, one recording of the successes.
      { what: "a delivery batch's load", pattern: /FROM webhook_deliveries d\s+JOIN webhook_endpoints ep/ },
      { what: "a delivery batch's settlement", pattern: /^\s*UPDATE webhook_deliveries d SET status = 'succeeded'/ },
      { what: "a done job's delete", pattern: /^\s*DELETE FROM jobs WHERE id = / },
      // Claims and stored responses go in batches (src/idempotency/store.ts): the batch's rows from a JSON parameter.
      { what: "an Idempotency-Key's claim", pattern: /^\s*WITH input AS .*INSERT INTO idempotency_keys/s },
      { what: "an Idempotency-Key's stored response", pattern: /^\s*UPDATE idempotency_keys SET status = 'completed'/ },
      { what: "an Idempotency-Key's lookup", pattern: /^\s*SELECT .* FROM "public"."idempotency_keys" WHERE/s },
    ];
    const db = new pg.Client({ connectionString: gw.database.databaseUrl });
    await db.connect();
    const report: string[] = [];
    const tooMany: string[] = [];
    try {
      for (const { what, pattern, kind, setup } of statements) {
        const found = [...recorded].filter(([text]) => pattern.test(text)).map(([text, samples]) => [text, samples.get(kind ?? "")] as const);
        expect(found.length, `${what}: no statement recorded matching ${pattern}`).toBeGreaterThan(0);
        for (const [text, values] of found) {
          expect(values, `${what}: no sample${kind ? ` of ${kind}` : ""}`).toBeDefined();
          // ANALYZE runs it: in a transaction rolled back, so nothing is claimed, written or deleted for real.
          await db.query("BEGIN");
          try {
            for (const statement of setup ?? []) await db.query(statement);
            const { rows } = await db.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>({ text: `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values: values as unknown[] });
            const plan = rows[0]!["QUERY PLAN"][0].Plan;
            // A node's count includes its children's; the largest is the statement's (a CTE run after the main query
            // is not under the top node, so every node is looked at).
            const buffers = Math.max(...[...planNodes(plan)].map((n) => (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0)));
            const used = [...new Set([...planNodes(plan)].map((n) => n["Index Name"]).filter(Boolean))].join(",") || "-";
            report.push(`${what}: ${buffers} buffers (${used})`);
            if (buffers > MAX_BUFFERS) tooMany.push(`${what} touched ${buffers} pages: ${text.replace(/\s+/g, " ").trim()}`);
          } finally {
            await db.query("ROLLBACK");
          }
        }
      }
    } finally {
      await db.end();
    }
    console.log(report.join("\n"));
    expect(tooMany, tooMany.join("\n\n")).toEqual([]);
  });
});
