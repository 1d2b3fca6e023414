import parsePrometheusTextFormat, { type PrometheusFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { freePort } from "../support/local-server.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { wsClient } from "../support/subscriptions.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * /metrics as Prometheus scrapes it, parsed with a public text-format parser (parse-prometheus-text-format,
 * whose sample parser is ported from Prometheus' Python client), and its numbers moving with what the test
 * does: requests, payments, payouts, webhook deliveries, refusals, live connections and queued jobs. Then
 * where it is served: METRICS_TOKEN, METRICS_PORT, production.
 */
const SUCCESS_CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: 2040, cvc: "123" };
const DECLINED_CARD = { ...SUCCESS_CARD, card_number: "4000000000000002" };

/**
 * The families of a /metrics text. The parser folds every series of a labelled histogram into one, losing
 * their labels and _count (its open issue #13); read without the histograms' TYPE lines, each of
 * <name>_bucket, _sum and _count is a family of its own with its labels, which is how histogram counts
 * are read here. The declared types are checked on a plain parse (declaredTypes).
 */
function parseMetrics(text: string): PrometheusFamily[] {
  const histogramTypeLines = new Set(declaredTypes(text).filter((f) => f.type === "HISTOGRAM").map((f) => `# TYPE ${f.name} histogram`));
  return parsePrometheusTextFormat(text.split("\n").filter((line) => !histogramTypeLines.has(line)).join("\n"));
}

function declaredTypes(text: string): { name: string; type: PrometheusFamily["type"] }[] {
  return parsePrometheusTextFormat(text).map(({ name, type }) => ({ name, type }));
}

async function scrape(url: string, headers: Record<string, string> = {}): Promise<PrometheusFamily[]> {
  const res = await fetch(`${url}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseMetrics(await res.text());
}

/**
 * The value of the series with these labels; 0 when it does not exist yet. A histogram's count is <name>_count
 * (prom-client writes each label set's _bucket, _sum and _count lines together, so untyped they come as
 * several families of one name: all are searched).
 */
function sample(families: PrometheusFamily[], name: string, labels: Record<string, string> = {}): number {
  const series = families.filter((f) => f.name === name).flatMap((f) => f.metrics);
  const match = series.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return match ? Number(match.value) : 0;
}

describe("GET /metrics", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true", SANDBOX_STK_DELAY_MS: "30", JOB_POLL_INTERVAL_MS: "100" } });
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
    receiver = await startWebhookReceiver();
    expect((await api.post("/v1/webhooks", { url: receiver.url, events: ["transaction.completed", "transaction.failed"] })).status).toBe(201);
  });
  afterAll(async () => {
    await gw?.close();
    await receiver?.close();
  });

  it("is Prometheus text with every family the gateway promises, and no secret in it", async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    const families = parseMetrics(text);
    const types = Object.fromEntries(declaredTypes(text).map((f) => [f.name, f.type]));
    for (const name of [
      "gateway_http_request_duration_seconds",
      "gateway_payments_total",
      "gateway_payouts_total",
      "gateway_webhook_delivery_attempts_total",
      "gateway_webhook_delivery_lag_seconds",
      "gateway_rate_limit_refusals_total",
      "gateway_jobs_queued",
      "gateway_jobs_oldest_due_age_seconds",
      "gateway_jobs_failed",
      "gateway_live_connections_open",
      "gateway_subscription_groups",
      "process_cpu_seconds_total",
      "nodejs_eventloop_lag_seconds",
    ]) {
      expect(types).toHaveProperty([name]);
    }
    expect(text).not.toMatch(/sk_(test|live)_|whsec_/);
    expect(types).toMatchObject({
      gateway_http_request_duration_seconds: "HISTOGRAM",
      gateway_webhook_delivery_lag_seconds: "HISTOGRAM",
      gateway_payments_total: "COUNTER",
      gateway_rate_limit_refusals_total: "COUNTER",
      gateway_jobs_queued: "GAUGE",
      gateway_live_connections_open: "GAUGE",
    });
    // PostgreSQL has a pool to watch; the embedded PGlite is one in-process connection.
    if (gw.gateway.db.backend === "postgres") {
      expect(sample(families, "gateway_db_pool_connections", { state: "total" })).toBeGreaterThanOrEqual(1);
      expect(sample(families, "gateway_db_pool_connections", { state: "waiting" })).toBe(0);
    } else expect(types).not.toHaveProperty(["gateway_db_pool_connections"]);
  });

  it("counts requests by route template, method and status", async () => {
    const before = await scrape(gw.url);
    const reference = (await api.post("/api/transactions/initialize", { amount: 100, email: "m@example.com" })).body.reference;
    for (let i = 0; i < 3; i++) expect((await api.get(`/api/transactions/verify/${reference}`)).status).toBe(200);
    expect((await api.get("/api/transactions/verify/txn_nope")).status).toBe(404);
    expect((await api.get(`/api/no-such-route/${reference}`)).status).toBe(404);
    const afterText = await (await fetch(`${gw.url}/metrics`)).text();
    const after = parseMetrics(afterText);
    const delta = (labels: Record<string, string>) =>
      sample(after, "gateway_http_request_duration_seconds_count", labels) - sample(before, "gateway_http_request_duration_seconds_count", labels);
    const route = { route: "/api/transactions/verify/:reference", method: "GET" };
    expect(delta({ ...route, status: "200" })).toBe(3);
    expect(delta({ ...route, status: "404" })).toBe(1);
    expect(delta({ route: "unmatched", method: "GET", status: "404" })).toBe(1);
    // Neither the reference nor the unknown path is in any label: routes are templates.
    expect(afterText).not.toContain(reference);
    expect(afterText).not.toContain("no-such-route");
  });

  it("counts payments by status and provider, once per status change, and webhook deliveries with their lag", async () => {
    const before = await scrape(gw.url);
    const paid = [];
    const references: string[] = [];
    for (const card of [SUCCESS_CARD, SUCCESS_CARD, DECLINED_CARD]) {
      const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "pay@example.com" });
      references.push(init.body.reference);
      paid.push(await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card));
    }
    expect(paid.map((r) => r.status)).toEqual([200, 200, 402]);
    await until(() => receiver.received.length, (n) => n >= 3);
    let after = before;
    await until(
      async () => (after = await scrape(gw.url)),
      (families) => sample(families, "gateway_webhook_delivery_attempts_total", { outcome: "succeeded" }) - sample(before, "gateway_webhook_delivery_attempts_total", { outcome: "succeeded" }) === 3,
    );
    const delta = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    expect(delta("gateway_payments_total", { status: "pending", provider: "sandbox" })).toBe(3);
    expect(delta("gateway_payments_total", { status: "completed", provider: "sandbox" })).toBe(2);
    expect(delta("gateway_payments_total", { status: "failed", provider: "sandbox" })).toBe(1);
    expect(delta("gateway_webhook_delivery_lag_seconds_count", {})).toBe(3);
    // Payers' e-mails and references stay out of the metrics.
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    expect(text).not.toContain("pay@example.com");
    for (const reference of references) expect(text).not.toContain(reference);
  });

  it("counts payouts by status and provider once they settle", async () => {
    const before = await scrape(gw.url);
    const created = await api.post("/v1/payouts", { amount: 150000, phone_number: "254708374149", reference: `M-${Date.now()}` });
    expect(created.status, created.text).toBe(201);
    await until(() => api.get(`/v1/payouts/${created.body.data.id}`), (r) => r.body?.data?.status === "completed");
    let after = before;
    await until(
      async () => (after = await scrape(gw.url)),
      (f) => sample(f, "gateway_payouts_total", { status: "completed", provider: "sandbox" }) - sample(before, "gateway_payouts_total", { status: "completed", provider: "sandbox" }) === 1,
    );
    expect(sample(after, "gateway_payouts_total", { status: "pending", provider: "sandbox" }) - sample(before, "gateway_payouts_total", { status: "pending", provider: "sandbox" })).toBe(1);
    expect(sample(after, "gateway_payouts_total", { status: "failed", provider: "sandbox" })).toBe(sample(before, "gateway_payouts_total", { status: "failed", provider: "sandbox" }));
  });

  it("shows an open graphql-ws connection, and drops it when it closes", async () => {
    const merchant = await gw.createMerchant();
    const client = wsClient(gw.url, merchant.testKey);
    const open = () => scrape(gw.url).then((f) => sample(f, "gateway_live_connections_open", { transport: "websocket" }));
    const base = await open();
    const stop = client.subscribe({ query: "subscription { transactionEvents { type } }" }, { next() {}, error() {}, complete() {} });
    await until(open, (n) => n === base + 1);
    // transactionEvents is executed once per event for all its identical subscribers: one group for this merchant.
    const groups = () => scrape(gw.url).then((f) => sample(f, "gateway_subscription_groups", { count: "groups" }));
    await until(groups, (n) => n >= 1);
    stop();
    await client.dispose();
    await until(open, (n) => n === base);
  });

  it("shows an open SSE subscription stream, and drops it when the client goes", async () => {
    const merchant = await gw.createMerchant();
    const open = () => scrape(gw.url).then((f) => sample(f, "gateway_live_connections_open", { transport: "sse" }));
    const base = await open();
    const aborted = new AbortController();
    const stream = await fetch(`${gw.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", "x-api-key": merchant.testKey },
      body: JSON.stringify({ query: "subscription { transactionEvents { type } }" }),
      signal: aborted.signal,
    });
    expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/);
    await until(open, (n) => n === base + 1);
    aborted.abort();
    await until(open, (n) => n === base);
  });
});

describe("the refusals counter", () => {
  it("counts 429s by the budget that ran out: a key's, an IP's, a sign-in e-mail's", async () => {
    // A gateway of its own: the bad keys below get this IP refused for a while.
    const gw = await startTestGateway({ env: { RATE_LIMIT_PER_MINUTE: "3", RATE_LIMIT_IP_PER_MINUTE: "3", LOGIN_FAILURES_PER_EMAIL: "2" } });
    try {
      const merchant = await gw.createMerchant();
      const user = await gw.createUser(merchant.id, "viewer");
      const before = await scrape(gw.url);
      const refused = (labels: Record<string, string>, families: PrometheusFamily[]) =>
        sample(families, "gateway_rate_limit_refusals_total", labels) - sample(before, "gateway_rate_limit_refusals_total", labels);

      const keyed = apiClient(gw.url, merchant.testKey);
      const keyedStatuses = [];
      for (let i = 0; i < 5; i++) keyedStatuses.push((await keyed.get("/v1/status")).status);
      expect(keyedStatuses).toEqual([200, 200, 200, 429, 429]);

      const signIns = [];
      for (let i = 0; i < 3; i++) signIns.push((await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: "not-the-password" })).status);
      expect(signIns).toEqual([401, 401, 429]);

      const bad = apiClient(gw.url, "sk_test_notarealkeynotarealkeynotareal");
      const badStatuses = [];
      for (let i = 0; i < 5; i++) badStatuses.push((await bad.get("/v1/status")).status);
      expect(badStatuses).toEqual([401, 401, 401, 429, 429]);

      const after = await scrape(gw.url);
      expect(refused({ limiter: "api_key" }, after)).toBe(2);
      expect(refused({ limiter: "login_email" }, after)).toBe(1);
      expect(refused({ limiter: "login_ip" }, after)).toBe(0);
      expect(refused({ limiter: "ip" }, after)).toBe(2);
      // The same refusals, seen by route: the request histogram counts the 429s too.
      const route = { route: "/v1/status", method: "GET", status: "429" };
      expect(sample(after, "gateway_http_request_duration_seconds_count", route) - sample(before, "gateway_http_request_duration_seconds_count", route)).toBe(4);
    } finally {
      await gw.close();
    }
  });
});

describe("the job queue gauges", () => {
  it("show a queued webhook delivery by kind, and its wait, while no runner works the queue", async () => {
    const gw = await startTestGateway({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true", JOBS_ENABLED: "false" } });
    const receiver = await startWebhookReceiver();
    try {
      const api = apiClient(gw.url, (await gw.createMerchant()).testKey);
      await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
      await api.post("/v1/webhooks", { url: receiver.url, events: ["transaction.completed"] });
      const kind = { kind: "webhook.deliver" };
      const before = sample(await scrape(gw.url), "gateway_jobs_queued", kind);
      const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "q@example.com" });
      expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, SUCCESS_CARD)).status).toBe(200);
      const families = await scrape(gw.url);
      expect(sample(families, "gateway_jobs_queued", kind)).toBe(before + 1);
      expect(sample(families, "gateway_jobs_failed", kind)).toBe(0);
      // The delivery is due and nobody runs it: the oldest due job's wait grows while it waits.
      const waited = await until(
        () => scrape(gw.url).then((f) => sample(f, "gateway_jobs_oldest_due_age_seconds", kind)),
        (seconds) => seconds >= 1,
      );
      // Seconds since it fell due, moments ago (however busy the machine): not since 1970, nor since another job's.
      expect(waited).toBeLessThan(EVENTUALLY_MS / 1000);
      expect(receiver.received).toHaveLength(0);
    } finally {
      await gw.close();
      await receiver.close();
    }
  });
});

describe("where /metrics is served", () => {
  it("METRICS_TOKEN: 401 without it or with another, 200 with it", async () => {
    const token = "metrics-token-0123456789abcdef";
    const gw = await startTestGateway({ env: { METRICS_TOKEN: token } });
    try {
      const none = await fetch(`${gw.url}/metrics`);
      expect(none.status).toBe(401);
      expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(await none.json()).toMatchObject({ status: "error", code: "invalid_token" });
      for (const authorization of [`Bearer ${token.slice(0, -1)}X`, `Bearer ${token}X`, `Bearer ${token.slice(0, -1)}`, token, `Basic ${token}`]) {
        expect((await fetch(`${gw.url}/metrics`, { headers: { authorization } })).status, authorization).toBe(401);
      }
      expect((await scrape(gw.url, { authorization: `Bearer ${token}` })).length).toBeGreaterThan(0);
      // The scheme is case-insensitive, as HTTP says.
      expect((await scrape(gw.url, { authorization: `bearer ${token}` })).length).toBeGreaterThan(0);
      // Not an API route: no API key asked for, no rate-limit headers.
      expect((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).headers.get("x-ratelimit-limit")).toBeNull();
    } finally {
      await gw.close();
    }
  });

  it("METRICS_PORT: served on its own port only (with METRICS_TOKEN there too), and closed with the gateway", async () => {
    const port = await freePort();
    const token = "metrics-port-token-0123456789";
    const gw = await startTestGateway({ env: { METRICS_PORT: String(port), METRICS_TOKEN: token } });
    const metricsUrl = `http://127.0.0.1:${port}`;
    try {
      expect((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(404);
      const refused = await fetch(`${metricsUrl}/metrics`);
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ status: "error", code: "invalid_token" });
      const families = await scrape(metricsUrl, { authorization: `Bearer ${token}` });
      expect(sample(families, "gateway_live_connections_open", { transport: "sse" })).toBe(0);
      expect((await fetch(`${metricsUrl}/other`)).status).toBe(404);
      expect((await fetch(`${metricsUrl}/metrics`, { method: "POST" })).status).toBe(405);
    } finally {
      await gw.close();
    }
    await expect(fetch(`${metricsUrl}/metrics`)).rejects.toThrow();
  });

  it("production without a token or a port of its own: not served", async () => {
    const gw = await startTestGateway({ env: { NODE_ENV: "production" } });
    try {
      expect((await fetch(`${gw.url}/metrics`)).status).toBe(404);
    } finally {
      await gw.close();
    }
  });

  it("production with METRICS_TOKEN: served on the API port behind it", async () => {
    const token = "production-metrics-token-01234";
    const gw = await startTestGateway({ env: { NODE_ENV: "production", METRICS_TOKEN: token } });
    try {
      expect((await fetch(`${gw.url}/metrics`)).status).toBe(401);
      expect((await scrape(gw.url, { authorization: `Bearer ${token}` })).length).toBeGreaterThan(0);
    } finally {
      await gw.close();
    }
  });
});
