import parsePrometheusTextFormat, { type PrometheusFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { freePort } from "../support/local-server.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { wsClient } from "../support/subscriptions.ts";
import { until } from "../support/wait.ts";

/**
 * /metrics as Prometheus scrapes it, parsed with a public text-format parser (parse-prometheus-text-format),
 * and its numbers moving with what the test does: requests, payments, webhook deliveries, refusals,
 * live connections and queued jobs. Then where it is served: METRICS_TOKEN, METRICS_PORT, production.
 */
const SUCCESS_CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: 2040, cvc: "123" };
const DECLINED_CARD = { ...SUCCESS_CARD, card_number: "4000000000000002" };

async function scrape(url: string, headers: Record<string, string> = {}): Promise<PrometheusFamily[]> {
  const res = await fetch(`${url}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusTextFormat(await res.text());
}

/** The value of one sample (a counter or gauge), or a histogram's count; 0 when the series does not exist yet. */
function sample(families: PrometheusFamily[], name: string, labels: Record<string, string> = {}): number {
  const family = families.find((f) => f.name === name);
  if (!family) return 0;
  const match = family.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (!match) return 0;
  return Number(family.type === "HISTOGRAM" ? match.count : match.value);
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
    const names = parsePrometheusTextFormat(text).map((f) => f.name);
    for (const name of [
      "gateway_http_request_duration_seconds",
      "gateway_jobs_queued",
      "gateway_jobs_oldest_due_age_seconds",
      "gateway_live_connections_open",
      "gateway_http_requests_total",
      "gateway_process_cpu_seconds_total",
    ]) {
      expect(names).toContain(name);
    }
    expect(text).not.toMatch(/sk_(test|live)_|whsec_/);
    // PostgreSQL has a pool to watch; the embedded PGlite is one in-process connection.
    const pool = parsePrometheusTextFormat(text).find((f) => f.name === "gateway_db_pool_connections");
    if (gw.gateway.db.backend === "postgres") expect(Number(pool?.metrics.find((m) => m.labels?.state === "total")?.value)).toBeGreaterThanOrEqual(1);
    else expect(pool).toBeUndefined();
  });

  it("counts requests by route template, method and status", async () => {
    const before = await scrape(gw.url);
    const reference = (await api.post("/api/transactions/initialize", { amount: 100, email: "m@example.com" })).body.reference;
    for (let i = 0; i < 3; i++) expect((await api.get(`/api/transactions/verify/${reference}`)).status).toBe(200);
    expect((await api.get("/api/transactions/verify/txn_nope")).status).toBe(404);
    const after = await scrape(gw.url);
    const route = { route: "/api/transactions/verify/:reference", method: "GET" };
    expect(sample(after, "gateway_http_requests_total", { ...route, status: "200" }) - sample(before, "gateway_http_requests_total", { ...route, status: "200" })).toBe(3);
    expect(sample(after, "gateway_http_requests_total", { ...route, status: "404" }) - sample(before, "gateway_http_requests_total", { ...route, status: "404" })).toBe(1);
    expect(after.find((f) => f.name === "gateway_http_request_duration_seconds")?.type).toBe("HISTOGRAM");
    // The reference is in no label: routes are templates.
    expect(JSON.stringify(after)).not.toContain(reference);
  });

  it("counts payments by status and provider, once per status change, and webhook deliveries with their lag", async () => {
    const before = await scrape(gw.url);
    const paid = [];
    for (const card of [SUCCESS_CARD, SUCCESS_CARD, DECLINED_CARD]) {
      const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "pay@example.com" });
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
    expect(delta("gateway_webhook_delivery_lag_seconds", {})).toBe(3);
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
  it("counts 429s by limiter", async () => {
    // A gateway of its own: the bad keys below get this IP refused for a while.
    const gw = await startTestGateway({ env: { RATE_LIMIT_IP_PER_MINUTE: "3" } });
    try {
      const before = await scrape(gw.url);
      const bad = apiClient(gw.url, "sk_test_notarealkeynotarealkeynotareal");
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await bad.get("/v1/status")).status);
      expect(statuses).toContain(429);
      const after = await scrape(gw.url);
      const refusals = statuses.filter((s) => s === 429).length;
      expect(sample(after, "gateway_rate_limit_refusals_total", { limiter: "rest" }) - sample(before, "gateway_rate_limit_refusals_total", { limiter: "rest" })).toBe(refusals);
    } finally {
      await gw.close();
    }
  });
});

describe("the job queue gauge", () => {
  it("shows a queued webhook delivery by kind while no runner works the queue", async () => {
    const gw = await startTestGateway({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true", JOBS_ENABLED: "false" } });
    const receiver = await startWebhookReceiver();
    try {
      const api = apiClient(gw.url, (await gw.createMerchant()).testKey);
      await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
      await api.post("/v1/webhooks", { url: receiver.url, events: ["transaction.completed"] });
      const before = sample(await scrape(gw.url), "gateway_jobs_queued", { kind: "webhook.deliver" });
      const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "q@example.com" });
      expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, SUCCESS_CARD)).status).toBe(200);
      const families = await scrape(gw.url);
      expect(sample(families, "gateway_jobs_queued", { kind: "webhook.deliver" })).toBe(before + 1);
      expect(families.find((f) => f.name === "gateway_jobs_oldest_due_age_seconds")).toBeDefined();
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
      expect(await none.json()).toMatchObject({ status: "error", code: "invalid_token" });
      expect((await fetch(`${gw.url}/metrics`, { headers: { authorization: "Bearer metrics-token-0123456789abcdeX" } })).status).toBe(401);
      expect((await scrape(gw.url, { authorization: `Bearer ${token}` })).length).toBeGreaterThan(0);
    } finally {
      await gw.close();
    }
  });

  it("METRICS_PORT: served on its own port only, and closed with the gateway", async () => {
    const port = await freePort();
    const gw = await startTestGateway({ env: { METRICS_PORT: String(port) } });
    const metricsUrl = `http://127.0.0.1:${port}`;
    try {
      expect((await fetch(`${gw.url}/metrics`)).status).toBe(404);
      expect(sample(await scrape(metricsUrl), "gateway_live_connections_open", { transport: "sse" })).toBe(0);
      expect((await fetch(`${metricsUrl}/other`)).status).toBe(404);
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
});
