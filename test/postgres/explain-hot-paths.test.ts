import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { parse } from "graphql";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { collect, wsClient } from "../support/subscriptions.ts";
import { until } from "../support/wait.ts";
import { planNodes, type PlanNode } from "../support/plans.ts";

/**
 * Issue 27: every statement the gateway sends on a hot path uses an index. The hot tables get ~100,000 rows each
 * (generate_series: one merchant's 60 days in every status, plus another merchant's), the gateway serves the hot
 * paths over HTTP with a recorder on its pool (OpenOptions.onStatement), and each distinct statement is then
 * EXPLAINed with the parameters it was sent with. A Seq Scan over a hot table fails the test, naming the statement.
 */
const HOT_TABLES = ["transactions", "events", "jobs", "webhook_deliveries", "payouts", "refunds", "ledger_entries", "ledger_postings", "idempotency_keys"];
const ROWS = 100_000;

/**
 * Statements allowed to scan a hot table, each with why. Small tables (merchants, api_keys, payment_channels,
 * webhook_endpoints, ledger_accounts...) are never checked: a scan of a few rows is the right plan.
 */
const ALLOWED: { pattern: RegExp; why: string }[] = [
  // The /metrics scrape's queue gauges count failed jobs by kind, exactly: a count of every failed job (kept
  // JOB_RETENTION_DAYS), once a scrape, not per request. The queued and due figures alone would fit jobs_due_idx.
  { pattern: /^SELECT kind, status::text AS status, count\(\*\)::int AS jobs, .* FROM jobs GROUP BY kind, status$/, why: "the metrics scrape's failed-jobs gauge" },
];

let gw: TestGateway;
let receiver: WebhookReceiver;
let daraja: FakeDaraja;
let api: ReturnType<typeof apiClient>;
let hotKey: string;
let hotChannel: number;
const recorded = new Map<string, readonly unknown[]>();

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  daraja = await startFakeDaraja();
  gw = await startTestGateway({
    env: {
      ...darajaGatewayEnv(daraja),
      SANDBOX_STK_DELAY_MS: "30",
      SANDBOX_REFUND_DELAY_MS: "30",
      JOB_POLL_INTERVAL_MS: "100",
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      RATE_LIMIT_ENABLED: "false",
    },
    onStatement: (text, values) => {
      if (!recorded.has(text)) recorded.set(text, values);
    },
  });
  daraja.switches.callbackOrigin = gw.url;
  const hot = await gw.createMerchant("Hot merchant");
  const other = await gw.createMerchant("Other merchant");
  hotKey = hot.testKey;
  api = apiClient(gw.url, hot.testKey);
  const otherApi = apiClient(gw.url, other.testKey);
  hotChannel = (await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).body.channel.id as number;
  const otherChannel = (await otherApi.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).body.channel.id as number;
  const hotHook = await api.post("/v1/webhooks", { url: `${receiver.url}/hot` });
  expect(hotHook.status, hotHook.text).toBe(201);
  const otherHook = await otherApi.post("/v1/webhooks", { url: `${receiver.url}/other` });
  expect(otherHook.status, otherHook.text).toBe(201);

  const db = new pg.Client({ connectionString: gw.database.databaseUrl });
  await db.connect();
  try {
    const started = Date.now();
    await seed(db, { hot: hot.id, other: other.id, hotChannel, otherChannel, hotEndpoint: hotHook.body.data.id, otherEndpoint: otherHook.body.data.id });
    console.log(`seeded ${ROWS.toLocaleString("en")} rows a hot table in ${Date.now() - started} ms`);
  } finally {
    await db.end();
  }
});

afterAll(async () => {
  await gw?.close();
  await receiver?.close();
  await daraja?.close();
});

interface SeedIds {
  hot: number;
  other: number;
  hotChannel: number;
  otherChannel: number;
  hotEndpoint: number;
  otherEndpoint: number;
}

/**
 * Rows as the gateway would have written them: 4 in 5 the hot merchant's, spread over 60 days, mostly settled.
 * Jobs are mostly failed (done jobs are deleted), deliveries mostly delivered, idempotency keys mostly expired.
 */
async function seed(db: pg.Client, ids: SeedIds) {
  const params = [ids.hot, ids.other, ids.hotChannel, ids.otherChannel, ROWS];
  // $1 hot merchant, $2 other, $3/$4 their channels, $5 rows; i % 5 = 0 is the other merchant's.
  const merchant = "CASE WHEN i % 5 = 0 THEN $2::int ELSE $1::int END";
  const channel = "CASE WHEN i % 5 = 0 THEN $4::int ELSE $3::int END";
  const status = `(CASE WHEN i % 10 = 0 THEN 'pending' WHEN i % 10 = 1 THEN 'failed' ELSE 'completed' END)::"TransactionStatus"`;
  const at = "now() - make_interval(secs => i * 5184000.0 / $5::int)";
  // Bulk load as a restore would: the tables' own indexes (as the migrations define them) are dropped and built again
  // after the rows are in, and foreign-key triggers skipped (session_replication_role): the same rows and indexes, faster.
  const { rows: indexes } = await db.query<{ name: string; definition: string }>(
    `SELECT i.indexname AS name, i.indexdef AS definition FROM pg_indexes i
     WHERE i.schemaname = 'public' AND i.tablename = ANY($1) AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
    [HOT_TABLES],
  );
  await db.query("BEGIN");
  await db.query("SET LOCAL session_replication_role = replica");
  for (const index of indexes) await db.query(`DROP INDEX "${index.name}"`);
  await db.query(
    `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, payment_method, email, phone_number,
       client_reference, provider_reference, channel_id, created_at, updated_at, completed_at)
     SELECT ${merchant}, 'test', 'seed_txn_' || i, 'seed_ac_' || i, 100 + i % 5000, 'KES', ${status}, 'card',
       'payer' || (i % 5000) || '@example.com', '+2547' || lpad((i % 100000000)::text, 8, '0'), 'ORDER-' || i, 'SEED' || i, ${channel},
       ${at}, ${at}, CASE WHEN i % 10 > 1 THEN ${at} END
     FROM generate_series(1, $5::int) i`,
    params,
  );
  await db.query(
    `INSERT INTO events (merchant_id, mode, type, transaction_id, payload, created_at)
     SELECT t.merchant_id, t.mode, 'transaction.' || t.status, t.id, '{}'::jsonb, t.created_at FROM transactions t WHERE t.reference LIKE 'seed_txn_%'`,
  );
  await db.query(
    `INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, mode, status, attempts, last_status_code, next_attempt_at, delivered_at, created_at, updated_at)
     SELECT CASE WHEN e.merchant_id = $1::int THEN $2::int ELSE $3::int END, e.id, e.merchant_id, e.mode,
       (CASE WHEN e.id % 100 = 0 THEN 'pending' WHEN e.id % 100 = 1 THEN 'failed' ELSE 'succeeded' END)::"WebhookDeliveryStatus", 1, 200,
       CASE WHEN e.id % 100 = 0 THEN now() + interval '1 hour' END, CASE WHEN e.id % 100 > 1 THEN e.created_at END, e.created_at, e.created_at
     FROM events e WHERE e.payload = '{}'::jsonb`,
    [ids.hot, ids.hotEndpoint, ids.otherEndpoint],
  );
  // Done jobs are deleted: what stays is failed (kept for operators) and a few queued for later.
  await db.query(
    `INSERT INTO jobs (kind, payload, status, run_at, attempts, last_error, created_at, updated_at)
     SELECT 'webhook.deliver', jsonb_build_object('deliveryId', -i), (CASE WHEN i % 20 = 0 THEN 'queued' ELSE 'failed' END)::"JobStatus",
       CASE WHEN i % 20 = 0 THEN now() + interval '1 day' ELSE ${at.replace("$5", "$1")} END, 8, 'HTTP 500', ${at.replace("$5", "$1")}, ${at.replace("$5", "$1")}
     FROM generate_series(1, $1::int) i`,
    [ROWS],
  );
  await db.query(
    `INSERT INTO payouts (merchant_id, mode, reference, amount, currency, phone_number, status, command_id, channel_id, provider_request_id,
       created_at, updated_at, completed_at)
     SELECT ${merchant}, 'test', 'seed_po_' || i, 100 + i % 5000, 'KES', '+254708374149', ${status}, 'BusinessPayment', ${channel}, 'seed_pr_' || i,
       ${at}, ${at}, CASE WHEN i % 10 > 1 THEN ${at} END
     FROM generate_series(1, $5::int) i`,
    params,
  );
  await db.query(
    `INSERT INTO refunds (merchant_id, mode, reference, transaction_id, transaction_reference, channel_id, amount, currency, status, method,
       provider_request_id, created_at, updated_at, completed_at)
     SELECT t.merchant_id, t.mode, 'seed_re_' || t.id, t.id, t.reference, t.channel_id, 50, 'KES', 'completed', 'sandbox', 'seed_rr_' || t.id,
       t.created_at, t.created_at, t.created_at
     FROM transactions t WHERE t.reference LIKE 'seed_txn_%'`,
  );
  await db.query(
    `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, created_at)
     SELECT t.merchant_id, t.mode, t.channel_id, 'KES', 'payment', 'transaction', t.id, t.reference, t.amount, t.created_at
     FROM transactions t WHERE t.reference LIKE 'seed_txn_%'`,
  );
  // Two legs an entry: what the merchant holds (available) against the outside world (payers).
  await db.query(
    `WITH accounts AS (
       SELECT mc.merchant_id, mc.channel_id, leg.sign, ledger_account(mc.merchant_id, 'test', mc.channel_id, 'KES', leg.kind) AS id
       FROM (VALUES ($1::int, $2::int), ($3::int, $4::int)) AS mc(merchant_id, channel_id), (VALUES ('available', 1), ('payers', -1)) AS leg(kind, sign)
     )
     INSERT INTO ledger_postings (entry_id, account_id, amount)
     SELECT e.id, a.id, a.sign * e.amount FROM ledger_entries e JOIN accounts a USING (merchant_id, channel_id) WHERE e.source_reference LIKE 'seed_txn_%'`,
    [ids.hot, ids.hotChannel, ids.other, ids.otherChannel],
  );
  await db.query(
    `INSERT INTO idempotency_keys (merchant_id, mode, principal, key, request_fingerprint, status, response_status, created_at, expires_at)
     SELECT ${merchant}, 'test', 'key:' || (i % 7), 'seed-' || i, 'fp', 'completed', 200, ${at.replace("$5", "$3")}, ${at.replace("$5", "$3")} + interval '24 hours'
     FROM generate_series(1, $3::int) i`,
    [ids.hot, ids.other, ROWS],
  );
  for (const index of indexes) await db.query(index.definition);
  await db.query("COMMIT");
  // What autovacuum does on its own soon enough: statistics (and the visibility map) for the planner.
  await db.query(`VACUUM ANALYZE ${HOT_TABLES.join(", ")}`);
  // Statistics of 100,000 rows until the EXPLAINs: retention's run (below) deletes most failed jobs, finished
  // deliveries and expired keys, and an autovacuum ANALYZE after it would plan the rest against what is left.
  for (const table of HOT_TABLES) await db.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
}

/** The plan's nodes, depth first (init plans, sub plans and CTEs are children too). */


const card = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };

describe("every statement on a hot path uses an index (EXPLAIN over 100,000 rows a table)", () => {
  it("drives the hot paths over HTTP and GraphQL, then finds no Seq Scan over a hot table in any statement's plan", async () => {
    recorded.clear();
    const checkout = apiClient(gw.url);
    const initialize = async (body: Record<string, unknown> = {}, headers?: Record<string, string>) => {
      const res = await api.post("/api/transactions/initialize", { amount: 2_500, email: "hot@example.com", ...body }, headers);
      expect(res.status, res.text).toBe(200);
      return res.body.reference as string;
    };

    // A live subscription to the merchant's events, open while they happen.
    const subscriber = wsClient(gw.url, hotKey);
    const events = collect(subscriber, parse("subscription { transactionEvents(ready: true) { type } }") as TypedDocumentNode<{ transactionEvents: { type: string } }>);
    await events.ready();

    // Initialize, the checkout page, a card payment on it, verify.
    const paid = await initialize({ reference: "EXPLAIN-1" });
    expect((await checkout.get(`/payment/checkout/${paid}`)).status).toBe(200);
    const pay = await checkout.post(`/payment/checkout/${paid}/pay`, card);
    expect(pay.status, pay.text).toBe(200);
    const verified = await api.get(`/api/transactions/verify/${paid}`);
    expect(verified.body.transaction.status, verified.text).toBe("completed");

    // Idempotent retries: the first answer replayed.
    const first = await initialize({}, { "idempotency-key": "explain-retry" });
    expect(await initialize({}, { "idempotency-key": "explain-retry" })).toBe(first);

    // STK push on the sandbox (its simulated callback) and on Daraja with its real callback.
    const push = await api.post("/api/momo/stk-push", { amount: 3_000, phone_number: "254708374149" });
    expect(push.status, push.text).toBe(200);
    await until(() => api.get(`/api/momo/stk-status/${push.body.transaction.reference}`), (r) => r.body?.transaction?.status === "completed");
    const mpesa = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig() });
    expect(mpesa.status, mpesa.text).toBe(201);
    const darajaPush = await api.post("/api/momo/stk-push", { amount: 150_000, phone_number: "254708374149", payment_channel_id: mpesa.body.channel.id });
    expect(darajaPush.status, darajaPush.text).toBe(200);
    const ack = await daraja.sendStkCallback(darajaPush.body.transaction.checkout_request_id, { receipt: "NLJ7RT61SV" });
    expect(ack.status).toBe(200);
    expect((await api.get(`/api/momo/stk-status/${darajaPush.body.transaction.reference}`)).body.transaction.status).toBe("completed");

    // A refund of the card payment and a payout, both settled by the job runner.
    const refund = await api.post("/v1/refunds", { transaction: paid, amount: 1_000 });
    expect(refund.status, refund.text).toBe(201);
    await until(() => api.get(`/v1/refunds/${refund.body.data.id}`), (r) => r.body?.data?.status !== "pending");
    const payout = await api.post("/v1/payouts", { amount: 1_000, phone_number: "254708374149" });
    expect(payout.status, payout.text).toBe(201);
    await until(() => api.get(`/v1/payouts/${payout.body.data.id}`), (r) => r.body?.data?.status !== "pending");

    // Webhooks delivered to the loopback receiver by the job poller; the events reached the subscriber.
    await until(() => receiver.received.filter((w) => w.json?.data?.reference === paid), (w) => w.length > 0);
    await events.waitFor(2);
    events.dispose();
    await subscriber.dispose();

    // The gateway's side of a reconciliation: the channel's payments of a day.
    const reconciliation = await api.post("/v1/reconciliations", { payment_channel_id: hotChannel, date: new Date().toISOString().slice(0, 10) });
    expect(reconciliation.status, reconciliation.text).toBe(201);

    // Balance, lists with filters, and GraphQL.
    expect((await api.get("/v1/balance")).status).toBe(200);
    const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
    for (const path of [
      "/api/transactions/list",
      "/api/transactions/list?status=completed",
      "/api/transactions/list?status=pending&page=3",
      `/api/transactions/list?date_from=${day(30)}&date_to=${day(23)}`,
      "/api/transactions/list?page=500",
      "/v1/payouts",
      "/v1/refunds",
      "/v1/balance/transactions",
    ]) {
      const res = await api.get(path);
      expect(res.status, `${path}: ${res.text}`).toBe(200);
    }
    const gql = await api.post("/graphql", {
      query: `{
        transactions(first: 5, status: completed) { totalCount edges { node { reference amount } } }
        transactionsPage(limit: 5, page: 2) { ... on TransactionPage { items { reference } } }
        payouts(first: 5) { edges { node { reference } } }
        refunds(first: 5) { edges { node { reference } } }
        transaction(reference: "${paid}") { ... on Transaction { reference status events { type } } }
        webhookDeliveries(limit: 5) { status attempts }
      }`,
    });
    expect(gql.status, gql.text).toBe(200);
    expect(gql.body.errors, gql.text).toBeUndefined();
    for (const path of ["/api/customers/list", "/v1/webhooks", "/v1/status"]) expect((await api.get(path)).status, path).toBe(200);
    // Prometheus' scrape reads the queue's gauges.
    expect((await checkout.get("/metrics")).status).toBe(200);

    // Retention's hourly run, made due now: its batch deletes, over the seeded backlog (most failed jobs, finished
    // deliveries and expired keys are past their retention), are statements a hot table sees every hour.
    const db = new pg.Client({ connectionString: gw.database.databaseUrl });
    await db.connect();
    const retained = ["webhook_deliveries", "events", "jobs", "idempotency_keys", "refresh_tokens", "provider_calls", "mail_messages"];
    const retentionDeletes = () => retained.filter((table) => [...recorded.keys()].some((text) => new RegExp(`^\\s*DELETE FROM ${table} WHERE id`).test(text)));
    const failures: string[] = [];
    const summary: string[] = [];
    try {
      const due = await db.query("UPDATE jobs SET run_at = now() WHERE kind = 'retention.run' AND status = 'queued'");
      expect(due.rowCount).toBe(1);
      await until(retentionDeletes, (tables) => tables.length === retained.length, 180_000);

      for (const [text, values] of recorded) {
        if (!/^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(text)) continue;
        const [row] = (await db.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>({ text: `EXPLAIN (FORMAT JSON) ${text}`, values: values as unknown[] })).rows;
        const all = [...planNodes(row!["QUERY PLAN"][0].Plan)];
        const scanned = all.filter((n) => n["Node Type"] === "Seq Scan" && HOT_TABLES.includes(n["Relation Name"] ?? "")).map((n) => n["Relation Name"]!);
        // An index scan without an Index Cond walks the whole index (for its order); "full:" marks it in the summary.
        const indexes = all.filter((n) => n["Index Name"]).map((n) => `${n["Index Cond"] || n["Node Type"] === "Bitmap Index Scan" ? "" : "full:"}${n["Index Name"]!}`);
        const oneLine = text.replace(/\s+/g, " ").trim();
        const allowed = ALLOWED.find((a) => a.pattern.test(oneLine));
        const verdict = scanned.length ? (allowed ? `allowed (${allowed.why})` : "SEQ SCAN") : "ok";
        summary.push(`${verdict.padEnd(8)} ${[...new Set([...scanned.map((t) => `seq:${t}`), ...indexes])].join(",") || "-"}  ${oneLine.slice(0, 160)}`);
        if (scanned.length && !allowed) failures.push(`Seq Scan on ${[...new Set(scanned)].join(", ")} in: ${oneLine}`);
      }
    } finally {
      await db.end();
    }
    console.log(`${summary.length} statements EXPLAINed:\n${summary.join("\n")}`);
    expect(summary.length).toBeGreaterThan(30);
    expect(failures, failures.join("\n\n")).toEqual([]);
  });
});
