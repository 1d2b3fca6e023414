import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver, type WebhookResponder } from "../fakes/webhook-receiver.ts";
import { apiClient as plainApiClient, createSandboxMerchant, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";
import { inParallel } from "../support/load.ts";
import { retrying } from "../support/retry.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

/**
 * Webhooks end to end over HTTP: endpoint management (REST and GraphQL), signed deliveries to loopback
 * receivers, retries on the durable job runner, secret rotation, resend, tenant and mode isolation.
 * Signatures are checked only with the `standardwebhooks` package, as a merchant's receiver would.
 */
type Api = ReturnType<typeof apiClient>;

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/;
const SUCCESS_CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: 2040, cvc: "123" };
const DECLINED_CARD = { ...SUCCESS_CARD, card_number: "4000000000000002" };
const PHONE = "254708374149";
/** Four attempts, 200 ms apart: WEBHOOK_RETRY_SCHEDULE below. */
const ATTEMPTS = 4;
const RETRY_GAP_MS = 200;
/** Long enough for any extra attempt to have arrived: three retry gaps plus a poll interval. */
const QUIET_MS = 3 * RETRY_GAP_MS + 200;
const PUBLIC_HTTPS = "https://93.184.215.14/hooks"; // a public IP literal: valid in live mode without DNS, never called
const DATA_KEYS = [
  "id",
  "reference",
  "client_reference",
  "amount",
  "currency",
  "status",
  "payment_method",
  "phone_number",
  "checkout_request_id",
  "provider_reference",
  "failure_code",
  "failure_reason",
  "metadata",
  "created_at",
  "completed_at",
];

let gw: TestGateway;
const receivers: WebhookReceiver[] = [];
/** Shared by the retry, resend and isolation tests: merchant A's endpoints and one delivered event. */
interface MerchantA {
  a: Shop;
  /** Answers 500 twice, then 200. */
  retried: { id: number; secret: string; receiver: WebhookReceiver };
  /** Subscribed to other event types only. */
  otherTypes: { id: number; receiver: WebhookReceiver };
  reference: string;
  /** The completed payment's event, as its first delivery attempt named it. */
  eventId: string;
}
let merchantA_: Promise<MerchantA> | undefined;

/** Made once, by whichever of those tests runs first, so each of them also runs alone (vitest -t). */
function merchantA(): Promise<MerchantA> {
  merchantA_ ??= (async () => {
    const a = await newShop();
    const r = await receiver((_req, index) => (index < 2 ? 500 : 200));
    const endpoint = await createEndpoint(a.api, { url: `${r.url}/orders`, events: ["transaction.completed"] });
    const other = await receiver();
    const otherTypes = { id: (await createEndpoint(a.api, { url: `${other.url}/others`, events: ["transaction.failed", "transaction.pending"] })).id, receiver: other };
    const reference = await completedPayment(a.api);
    const [first] = await r.waitFor(3);
    const eventId = first!.headers["webhook-id"]!;
    // Settled (two 500s, then 200) before any test looks at the endpoint, whose failingSince that clears.
    await until(
      () => deliveries(a.api, { eventId }),
      (d) => d[0]?.status === "succeeded",
    );
    return { a, retried: { ...endpoint, receiver: r }, otherTypes, reference, eventId };
  })();
  return merchantA_;
}

async function receiver(respond?: WebhookResponder): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(respond ? { respond } : {});
  receivers.push(r);
  return r;
}

/** Runs a GraphQL operation that must not fail at the GraphQL level; returns `data`. */
async function gql(api: Api, query: string, variables?: Record<string, unknown>): Promise<any> {
  const res = await api.post("/graphql", { query, variables });
  expect(res.status, res.text).toBe(200);
  expect(res.body.errors, res.text).toBeUndefined();
  return res.body.data;
}

interface Shop {
  merchant: TestMerchant;
  api: Api;
  live: Api;
  channelId: number;
}

async function newShop(): Promise<Shop> {
  const { channelId, ...merchant } = await createSandboxMerchant(gw);
  return { merchant, api: apiClient(gw.url, merchant.testKey), live: apiClient(gw.url, merchant.liveKey), channelId };
}

async function createEndpoint(api: Api, body: Record<string, unknown>): Promise<{ id: number; secret: string }> {
  const res = await api.post("/v1/webhooks", body);
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, secret: res.body.data.secret };
}

/** A sandbox card payment through the hosted checkout; returns the reference and the pay answer's status. */
async function payByCard(api: Api, card = SUCCESS_CARD): Promise<{ reference: string; status: number }> {
  const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "a@b.test" });
  expect(init.status, init.text).toBe(200);
  const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card);
  return { reference: init.body.reference, status: paid.status };
}

async function completedPayment(api: Api): Promise<string> {
  const { reference, status } = await payByCard(api);
  expect(status).toBe(200);
  return reference;
}

function verifyWith(secret: string, delivery: ReceivedWebhook): unknown {
  return new Webhook(secret).verify(delivery.body, delivery.headers);
}

const DELIVERIES = `query Deliveries($endpointId: Int, $eventId: ID, $limit: Int) {
  webhookDeliveries(endpointId: $endpointId, eventId: $eventId, limit: $limit) {
    id eventId eventType status attempts lastStatusCode lastError lastLatencyMs nextAttemptAt deliveredAt endpoint { databaseId }
  }
}`;

const ENDPOINTS = `{ webhookEndpoints { id databaseId url events description enabled disabledReason failingSince createdAt } }`;

async function deliveries(api: Api, filters: { endpointId?: number; eventId?: string; limit?: number }): Promise<any[]> {
  return (await gql(api, DELIVERIES, filters)).webhookDeliveries;
}

const UPDATE = `mutation Update($input: UpdateWebhookEndpointInput!) {
  updateWebhookEndpoint(input: $input) { __typename ... on WebhookEndpoint { databaseId url enabled } ... on Error { code message } }
}`;
const DELETE = `mutation Delete($id: Int!) {
  deleteWebhookEndpoint(id: $id) { __typename ... on WebhookEndpoint { databaseId } ... on Error { code message } }
}`;
const ROTATE = `mutation Rotate($id: Int!) {
  rotateWebhookSecret(id: $id) { __typename ... on WebhookEndpointWithSecret { secret endpoint { databaseId } } ... on Error { code message } }
}`;
const RESEND = `mutation Resend($eventId: ID!, $endpointId: Int) {
  resendEvent(eventId: $eventId, endpointId: $endpointId) {
    __typename ... on ResendEventPayload { deliveries { id status endpoint { databaseId } } } ... on Error { code message }
  }
}`;

beforeAll(async () => {
  gw = await startTestGateway({
    env: {
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      WEBHOOK_RETRY_SCHEDULE: `0,${RETRY_GAP_MS}ms,${RETRY_GAP_MS}ms,${RETRY_GAP_MS}ms`,
      JOB_POLL_INTERVAL_MS: "200",
      RATE_LIMIT_ENABLED: "false",
      SANDBOX_STK_DELAY_MS: "50",
    },
  });
});

afterAll(async () => {
  await gw?.close();
  await Promise.all(receivers.map((r) => r.close()));
});

describe("endpoint management", () => {
  it("POST /v1/webhooks answers 201 with the secret once; GET and GraphQL list without it", async () => {
    const { api } = await newShop();
    const r = await receiver();

    const minimal = await api.post("/v1/webhooks", { url: `${r.url}/minimal` });
    expect(minimal.status, minimal.text).toBe(201);
    expect(Object.keys(minimal.body)).toEqual(["status", "data"]);
    expect(minimal.body.status).toBe("success");
    expect(Object.keys(minimal.body.data)).toEqual(["id", "url", "events", "description", "enabled", "allow_local_urls", "secret", "created_at"]);
    expect(minimal.body.data).toEqual({
      id: expect.any(Number),
      url: `${r.url}/minimal`,
      events: [],
      description: null,
      enabled: true,
      allow_local_urls: false,
      secret: expect.stringMatching(SECRET),
      created_at: expect.stringMatching(ISO_MS),
    });
    // Standard Webhooks asks for 24 to 64 random bytes.
    const keyBytes = Buffer.from(minimal.body.data.secret.slice("whsec_".length), "base64").length;
    expect(keyBytes).toBeGreaterThanOrEqual(24);
    expect(keyBytes).toBeLessThanOrEqual(64);

    const full = await api.post("/v1/webhooks", {
      url: `${r.url}/full`,
      events: ["transaction.failed", "transaction.completed"],
      description: "Order service",
      enabled: false,
    });
    expect(full.status, full.text).toBe(201);
    expect(full.body.data).toMatchObject({ url: `${r.url}/full`, events: ["transaction.failed", "transaction.completed"], description: "Order service", enabled: false });
    expect(full.body.data.secret).toMatch(SECRET);
    expect(full.body.data.secret).not.toBe(minimal.body.data.secret);

    const list = await api.get("/v1/webhooks");
    expect(list.status).toBe(200);
    expect(Object.keys(list.body)).toEqual(["status", "data"]);
    expect(list.body.status).toBe("success");
    expect(list.body.data).toHaveLength(2);
    for (const item of list.body.data) {
      expect(Object.keys(item)).toEqual(["id", "url", "events", "description", "enabled", "allow_local_urls", "created_at", "disabled_reason"]);
    }
    const { secret: _s1, ...minimalListed } = minimal.body.data;
    const { secret: _s2, ...fullListed } = full.body.data;
    expect(list.body.data).toEqual([
      { ...minimalListed, disabled_reason: null },
      { ...fullListed, disabled_reason: null },
    ]);
    for (const secret of [minimal.body.data.secret, full.body.data.secret]) {
      expect(list.text).not.toContain(secret);
      expect(list.text).not.toContain(secret.slice("whsec_".length));
    }
    expect(list.text).not.toMatch(/secret|whsec_/i);

    const viaGraphql = await gql(api, ENDPOINTS);
    expect(viaGraphql.webhookEndpoints).toEqual([
      { id: expect.any(String), databaseId: minimal.body.data.id, url: `${r.url}/minimal`, events: [], description: null, enabled: true, disabledReason: null, failingSince: null, createdAt: minimal.body.data.created_at },
      {
        id: expect.any(String),
        databaseId: full.body.data.id,
        url: `${r.url}/full`,
        events: ["transaction.failed", "transaction.completed"],
        description: "Order service",
        enabled: false,
        disabledReason: null,
        failingSince: null,
        createdAt: full.body.data.created_at,
      },
    ]);
    // The schema has no way to read a secret back.
    const secretField = await api.post("/graphql", { query: "{ webhookEndpoints { databaseId secret } }" });
    expect(secretField.body.data).toBeUndefined();
    expect(secretField.body.errors?.[0]?.message).toMatch(/secret/);
  });

  it("refuses unknown event types, malformed URLs and (live, or test without the opt-in) non-public or plain-http URLs with 400, storing nothing", async () => {
    const { api, live } = await newShop();
    const r = await receiver();
    const countBefore = await gw.gateway.db.prisma.webhookEndpoint.count();

    const refused = async (client: Api, body: Record<string, unknown>, field: "url" | "events") => {
      const res = await client.post("/v1/webhooks", body);
      expect(res.status, `${JSON.stringify(body)} -> ${res.text}`).toBe(400);
      expect(Object.keys(res.body)).toEqual(["status", "message", "code", "errors"]);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message.startsWith(`${field}:`), res.body.message).toBe(true);
      expect(res.text).not.toMatch(/whsec_/);
    };

    await refused(api, { url: `${r.url}/x`, events: ["transaction.refunded"] }, "events");
    await refused(api, { url: `${r.url}/x`, events: ["transaction.completed", "*"] }, "events");
    await refused(api, { url: "not a url" }, "url");
    await refused(api, { url: "ftp://93.184.215.14/hooks" }, "url");
    await refused(live, { url: "http://93.184.215.14/hooks" }, "url");
    await refused(live, { url: "https://127.0.0.1/hooks" }, "url");
    await refused(live, { url: "https://169.254.169.254/latest/meta-data" }, "url");
    // ALLOW_PRIVATE_URLS is a test-mode switch: a live key still may not point at loopback.
    await refused(live, { url: r.url.replace("http:", "https:") }, "url");

    // The same refusals through GraphQL are typed ValidationErrors.
    const viaGraphql = await gql(
      live,
      `mutation { createWebhookEndpoint(input: { url: "https://169.254.169.254/" }) { __typename ... on Error { code message } ... on WebhookEndpointWithSecret { secret } } }`,
    );
    expect(viaGraphql.createWebhookEndpoint).toMatchObject({ __typename: "ValidationError", code: "validation_failed", message: expect.stringMatching(/^url:/) });

    expect((await api.get("/v1/webhooks")).body.data).toEqual([]);
    expect((await live.get("/v1/webhooks")).body.data).toEqual([]);
    expect(await gw.gateway.db.prisma.webhookEndpoint.count()).toBe(countBefore);

    // A gateway without ALLOW_PRIVATE_URLS refuses loopback and private addresses for test keys too.
    const strict = await startTestGateway({ env: { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await strict.createMerchant();
      const strictApi = apiClient(strict.url, merchant.testKey);
      await refused(strictApi, { url: `${r.url}/hooks` }, "url");
      await refused(strictApi, { url: "http://localhost:8080/hooks" }, "url");
      await refused(strictApi, { url: "http://10.1.2.3/hooks" }, "url");
      await refused(strictApi, { url: "http://169.254.169.254/latest/meta-data" }, "url");
      // The test-mode refusal says how to allow it; live mode, where nothing allows it, does not.
      const loopback = await strictApi.post("/v1/webhooks", { url: `${r.url}/hooks` });
      expect(loopback.body.message).toBe('url: must not point to a private, loopback or reserved address; tick "Allow local URLs (test mode only)" on the endpoint (allow_local_urls: true) to allow it in test mode');
      const liveLoopback = await apiClient(strict.url, merchant.liveKey).post("/v1/webhooks", { url: "https://127.0.0.1/hooks" });
      expect(liveLoopback.body.message).toBe("url: must not point to a private, loopback or reserved address");
      expect((await strictApi.get("/v1/webhooks")).body.data).toEqual([]);
      // http:// is fine in test mode when the address is public.
      const ok = await strictApi.post("/v1/webhooks", { url: "http://93.184.215.14/hooks" });
      expect(ok.status, ok.text).toBe(201);
    } finally {
      await strict.close();
    }
  });
});

describe("delivery", () => {
  it("retries a 500 until a 2xx: the same event, body and webhook-id every time, each attempt validly signed", async () => {
    const { a, retried, otherTypes, reference, eventId } = await merchantA();
    const { receiver: r, ...endpoint } = retried;
    const other = otherTypes.receiver;
    const attempts = await r.waitFor(3);
    expect(eventId).toMatch(/^\d+$/);
    for (const attempt of attempts) {
      expect(attempt.path).toBe("/orders");
      expect(attempt.headers["webhook-id"]).toBe(eventId);
      expect(attempt.headers["content-type"]).toMatch(/^application\/json/);
      expect(attempt.headers["webhook-timestamp"]).toMatch(/^\d+$/);
      expect(Math.abs(Number(attempt.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(60);
      expect(attempt.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
      expect(verifyWith(endpoint.secret, attempt)).toEqual(JSON.parse(attempt.body));
      expect(attempt.body).toBe(attempts[0]!.body);
    }
    expect(attempts[0]!.json).toMatchObject({ type: "transaction.completed", data: { reference, status: "completed" } });
    // The schedule's 200 ms (±10 % jitter) separates the attempts.
    expect(attempts[1]!.receivedAt - attempts[0]!.receivedAt).toBeGreaterThanOrEqual(150);
    expect(attempts[2]!.receivedAt - attempts[1]!.receivedAt).toBeGreaterThanOrEqual(150);

    const [delivery] = await until(
      () => deliveries(a.api, { endpointId: endpoint.id }),
      (d) => d[0]?.status === "succeeded",
    );
    expect(delivery).toEqual({
      id: expect.any(String),
      eventId,
      eventType: "transaction.completed",
      status: "succeeded",
      attempts: 3,
      lastStatusCode: 200,
      lastError: null,
      lastLatencyMs: expect.any(Number),
      nextAttemptAt: null,
      deliveredAt: expect.stringMatching(ISO_MS),
      endpoint: { databaseId: endpoint.id },
    });
    expect(r.received).toHaveLength(3);

    // Fan-out happened when the event was recorded: the endpoint for other types has no delivery at all.
    expect(await deliveries(a.api, { endpointId: otherTypes.id })).toEqual([]);
    expect(other.received).toEqual([]);
  });

  it("resendEvent delivers the same event again with the same webhook-id, to one endpoint or to every subscribed one", async () => {
    const { a, retried, otherTypes, eventId } = await merchantA();
    const r = retried.receiver;
    const before = r.received.length;
    const one = await gql(a.api, RESEND, { eventId, endpointId: retried.id });
    expect(one.resendEvent).toEqual({ __typename: "ResendEventPayload", deliveries: [{ id: expect.any(String), status: "pending", endpoint: { databaseId: retried.id } }] });
    const [again] = (await r.waitFor(before + 1)).slice(before);
    expect(again!.headers["webhook-id"]).toBe(eventId);
    expect(again!.body).toBe(r.received[0]!.body);
    expect(verifyWith(retried.secret, again!)).toEqual(JSON.parse(again!.body));
    // A fresh round of attempts on the same delivery record.
    const [delivery] = await until(
      () => deliveries(a.api, { eventId }),
      (d) => d.length === 1 && d[0].status === "succeeded",
    );
    expect(delivery).toMatchObject({ id: one.resendEvent.deliveries[0].id, attempts: 1, lastStatusCode: 200 });

    // Without an endpoint: every enabled endpoint subscribed to the event's type, so not the other-types one.
    const all = await gql(a.api, RESEND, { eventId });
    expect(all.resendEvent.deliveries).toEqual([{ id: expect.any(String), status: "pending", endpoint: { databaseId: retried.id } }]);
    const [third] = (await r.waitFor(before + 2)).slice(before + 1);
    expect(third!.headers["webhook-id"]).toBe(eventId);
    await until(
      () => deliveries(a.api, { eventId }),
      (d) => d[0]?.status === "succeeded",
    );
    expect(otherTypes.receiver.received).toEqual([]);

    const unknown = await gql(a.api, RESEND, { eventId: "999999999" });
    expect(unknown.resendEvent).toMatchObject({ __typename: "NotFoundError", code: "not_found" });
  });

  it("sends the documented body for transaction.completed, transaction.failed and an STK push's transaction.pending", async () => {
    const shop = await newShop();
    const r = await receiver();
    const { secret } = await createEndpoint(shop.api, { url: `${r.url}/all` });

    const completed = await completedPayment(shop.api);
    const declined = await payByCard(shop.api, DECLINED_CARD);
    expect(declined.status).toBe(402);
    const push = await shop.api.post("/api/momo/stk-push", { amount: 10000, phone_number: PHONE, payment_channel_id: shop.channelId });
    expect(push.status, push.text).toBe(200);
    const stk = push.body.transaction;

    // Four events: completed and failed card payments, the push's pending and (after 50 ms) its completion.
    const received = await r.waitFor(4);
    for (const delivery of received) {
      expect(verifyWith(secret, delivery)).toEqual(delivery.json);
      expect(Object.keys(delivery.json)).toEqual(["type", "timestamp", "data"]);
      expect(delivery.json.timestamp).toMatch(ISO_MS);
      // A payment settled on the hosted checkout also carries the attempt that settled it (issue 25); an STK push's has none.
      expect(Object.keys(delivery.json.data)).toEqual(delivery.json.data.payment_method === "card" ? [...DATA_KEYS, "attempt"] : DATA_KEYS);
    }
    const find = (type: string, reference: string) => {
      const matches = received.filter((d) => d.json.type === type && d.json.data.reference === reference);
      expect(matches, `${type} for ${reference}`).toHaveLength(1);
      return matches[0]!.json.data;
    };
    expect(new Set(received.map((d) => d.headers["webhook-id"])).size).toBe(4);

    expect(find("transaction.completed", completed)).toEqual({
      id: expect.any(Number),
      reference: completed,
      client_reference: null,
      amount: 1000,
      currency: "KES",
      status: "completed",
      payment_method: "card",
      phone_number: null,
      checkout_request_id: null,
      provider_reference: expect.any(String),
      failure_code: null,
      failure_reason: null,
      metadata: null,
      created_at: expect.stringMatching(ISO_MS),
      completed_at: expect.stringMatching(ISO_MS),
      attempt: { method: "card", code: null, reason: null, number: 1 },
    });
    expect(find("transaction.failed", declined.reference)).toEqual({
      id: expect.any(Number),
      reference: declined.reference,
      client_reference: null,
      amount: 1000,
      currency: "KES",
      status: "failed",
      payment_method: "card",
      phone_number: null,
      checkout_request_id: null,
      provider_reference: null,
      failure_code: "card_declined",
      failure_reason: expect.any(String),
      metadata: null,
      created_at: expect.stringMatching(ISO_MS),
      completed_at: null,
      attempt: { method: "card", code: "card_declined", reason: expect.any(String), number: 1 },
    });
    const pending = find("transaction.pending", stk.reference);
    expect(pending).toEqual({
      id: stk.id,
      reference: stk.reference,
      client_reference: null,
      amount: 10000,
      currency: "KES",
      status: "pending",
      payment_method: "momo_stk",
      phone_number: PHONE,
      // Recorded with the row, before the provider was asked (docs/mpesa.md, STK push): no checkout request id yet.
      checkout_request_id: null,
      provider_reference: null,
      failure_code: null,
      failure_reason: null,
      metadata: null,
      created_at: stk.created_at,
      completed_at: null,
    });
    expect(find("transaction.completed", stk.reference)).toMatchObject({ id: stk.id, status: "completed", payment_method: "momo_stk", phone_number: PHONE, checkout_request_id: stk.checkout_request_id, completed_at: expect.stringMatching(ISO_MS) });
  });

  it("gives up after the schedule's attempts when the receiver always fails: status failed, lastStatusCode 500", async () => {
    const shop = await newShop();
    const r = await receiver(() => 500);
    const { id, secret } = await createEndpoint(shop.api, { url: `${r.url}/down` });
    await completedPayment(shop.api);

    const [delivery] = await until(
      () => deliveries(shop.api, { endpointId: id }),
      (d) => d[0]?.status === "failed",
    );
    expect(delivery).toMatchObject({ eventType: "transaction.completed", status: "failed", attempts: ATTEMPTS, lastStatusCode: 500, lastError: expect.stringContaining("500"), nextAttemptAt: null, deliveredAt: null });
    expect(r.received).toHaveLength(ATTEMPTS);
    expect(new Set(r.received.map((d) => d.headers["webhook-id"]))).toEqual(new Set([delivery.eventId]));
    for (const attempt of r.received) verifyWith(secret, attempt);
    // Nothing more is scheduled: no fifth attempt arrives.
    await expectNothingMoreWithin(QUIET_MS, () => r.received.length, "no fifth attempt");
    expect(r.received).toHaveLength(ATTEMPTS);
    expect((await gql(shop.api, ENDPOINTS)).webhookEndpoints[0]).toMatchObject({ enabled: true, failingSince: expect.stringMatching(ISO_MS) });
  });

  it("rotateWebhookSecret: the next delivery carries two v1 signatures, valid with the old and the new secret", async () => {
    const shop = await newShop();
    const r = await receiver();
    const { id, secret: oldSecret } = await createEndpoint(shop.api, { url: `${r.url}/rotating` });

    await completedPayment(shop.api);
    const [beforeRotation] = await r.waitFor(1);
    expect(beforeRotation!.headers["webhook-signature"]!.split(" ")).toHaveLength(1);
    verifyWith(oldSecret, beforeRotation!);

    const rotated = (await gql(shop.api, ROTATE, { id })).rotateWebhookSecret;
    expect(rotated).toEqual({ __typename: "WebhookEndpointWithSecret", secret: expect.stringMatching(SECRET), endpoint: { databaseId: id } });
    const newSecret: string = rotated.secret;
    expect(newSecret).not.toBe(oldSecret);
    expect((await shop.api.get("/v1/webhooks")).text).not.toContain(newSecret);

    await completedPayment(shop.api);
    const [, afterRotation] = await r.waitFor(2);
    const signatures = afterRotation!.headers["webhook-signature"]!.split(" ");
    expect(signatures).toHaveLength(2);
    for (const signature of signatures) expect(signature).toMatch(/^v1,/);
    expect(verifyWith(oldSecret, afterRotation!)).toEqual(afterRotation!.json);
    expect(verifyWith(newSecret, afterRotation!)).toEqual(afterRotation!.json);
    // Each secret matches exactly one of the two signatures.
    for (const secret of [oldSecret, newSecret]) {
      const matching = signatures.filter((s) => {
        try {
          verifyWith(secret, { ...afterRotation!, headers: { ...afterRotation!.headers, "webhook-signature": s } });
          return true;
        } catch {
          return false;
        }
      });
      expect(matching).toHaveLength(1);
    }
    // And a secret that never belonged to the endpoint verifies nothing.
    expect(() => verifyWith(`whsec_${randomBytes(32).toString("base64")}`, afterRotation!)).toThrow();
  });

  it("updateWebhookEndpoint enabled=false stops deliveries to that endpoint only", async () => {
    const shop = await newShop();
    const control = await receiver();
    const target = await receiver();
    await createEndpoint(shop.api, { url: `${control.url}/control` });
    const { id } = await createEndpoint(shop.api, { url: `${target.url}/target` });

    await completedPayment(shop.api);
    await control.waitFor(1);
    await target.waitFor(1);

    const updated = await gql(shop.api, UPDATE, { input: { id, enabled: false } });
    expect(updated.updateWebhookEndpoint).toEqual({ __typename: "WebhookEndpoint", databaseId: id, url: `${target.url}/target`, enabled: false });
    expect((await shop.api.get("/v1/webhooks")).body.data.find((e: { id: number }) => e.id === id)).toMatchObject({ enabled: false });

    await completedPayment(shop.api);
    const [, second] = await control.waitFor(2);
    expect(target.received).toHaveLength(1);
    const targetDeliveries = await deliveries(shop.api, { endpointId: id });
    expect(targetDeliveries).toHaveLength(1);
    expect(targetDeliveries[0].eventId).not.toBe(second!.headers["webhook-id"]);
  });
});

describe("isolation", () => {
  it("merchant B's key sees none of A's endpoints or deliveries and cannot change A's endpoint or resend A's event", async () => {
    const { a, retried, eventId } = await merchantA();
    const b = await newShop();
    const bReceiver = await receiver();
    const own = await createEndpoint(b.api, { url: `${bReceiver.url}/b` });
    const aEndpoints = await gql(a.api, ENDPOINTS);
    const aGlobalId = aEndpoints.webhookEndpoints.find((e: { databaseId: number }) => e.databaseId === retried.id).id;

    const list = await b.api.get("/v1/webhooks");
    expect(list.body.data.map((e: { id: number }) => e.id)).toEqual([own.id]);
    expect((await gql(b.api, ENDPOINTS)).webhookEndpoints.map((e: { databaseId: number }) => e.databaseId)).toEqual([own.id]);
    expect(await deliveries(b.api, {})).toEqual([]);
    expect(await deliveries(b.api, { endpointId: retried.id })).toEqual([]);
    expect(await deliveries(b.api, { eventId })).toEqual([]);
    // Relay's node(id) finds nothing for B (see report: it currently also adds a masked "Unexpected error.").
    const node = await b.api.post("/graphql", { query: `query Node($id: ID!) { node(id: $id) { __typename ... on WebhookEndpoint { url } } }`, variables: { id: aGlobalId } });
    expect(node.status).toBe(200);
    expect(node.body.data).toEqual({ node: null });
    expect(node.text).not.toContain(retried.receiver.url);

    const notFound = { code: "not_found", __typename: "NotFoundError" };
    expect((await gql(b.api, UPDATE, { input: { id: retried.id, enabled: false, url: `${bReceiver.url}/stolen` } })).updateWebhookEndpoint).toMatchObject(notFound);
    expect((await gql(b.api, ROTATE, { id: retried.id })).rotateWebhookSecret).toMatchObject(notFound);
    expect((await gql(b.api, DELETE, { id: retried.id })).deleteWebhookEndpoint).toMatchObject(notFound);
    expect((await gql(b.api, RESEND, { eventId })).resendEvent).toMatchObject(notFound);
    expect((await gql(b.api, RESEND, { eventId, endpointId: own.id })).resendEvent).toMatchObject(notFound);

    // A's endpoint is untouched and still delivers, signed with its original secret.
    expect(await gql(a.api, ENDPOINTS)).toEqual(aEndpoints);
    const before = retried.receiver.received.length;
    await completedPayment(a.api);
    const [next] = (await retried.receiver.waitFor(before + 1)).slice(before);
    verifyWith(retried.secret, next!);
    expect(next!.path).toBe("/orders");
    expect(bReceiver.received).toEqual([]);
  });

  it("a live key sees only live endpoints, and a test key only test ones", async () => {
    const { a, retried, eventId } = await merchantA();
    const testIds = (await a.api.get("/v1/webhooks")).body.data.map((e: { id: number }) => e.id);
    expect(testIds.length).toBeGreaterThan(0);
    expect((await a.live.get("/v1/webhooks")).body.data).toEqual([]);
    expect((await gql(a.live, ENDPOINTS)).webhookEndpoints).toEqual([]);
    expect(await deliveries(a.live, {})).toEqual([]);
    expect(await deliveries(a.live, { eventId })).toEqual([]);
    expect((await gql(a.live, ROTATE, { id: retried.id })).rotateWebhookSecret).toMatchObject({ __typename: "NotFoundError", code: "not_found" });
    expect((await gql(a.live, RESEND, { eventId })).resendEvent).toMatchObject({ __typename: "NotFoundError", code: "not_found" });

    const liveEndpoint = await createEndpoint(a.live, { url: PUBLIC_HTTPS });
    expect((await a.live.get("/v1/webhooks")).body.data.map((e: { id: number }) => e.id)).toEqual([liveEndpoint.id]);
    expect((await a.api.get("/v1/webhooks")).body.data.map((e: { id: number }) => e.id)).toEqual(testIds);
    expect((await gql(a.api, UPDATE, { input: { id: liveEndpoint.id, enabled: false } })).updateWebhookEndpoint).toMatchObject({ __typename: "NotFoundError" });
  });
});

describe("under load", () => {
  it("200 concurrent payments to one endpoint: every event delivered, each webhook-id acknowledged exactly once", async () => {
    const shop = await newShop();
    const acks = new Map<string, number>();
    const r = await receiver((req) => {
      const id = req.headers["webhook-id"]!;
      acks.set(id, (acks.get(id) ?? 0) + 1);
      return 200;
    });
    const { id, secret } = await createEndpoint(shop.api, { url: `${r.url}/load` });

    const total = 200;
    const references = await inParallel(total, 20, () => completedPayment(shop.api));
    expect(new Set(references).size).toBe(total);

    const received = await r.waitFor(total, 40_000);
    expect(new Set(received.map((d) => d.json.data.reference))).toEqual(new Set(references));
    expect(received.every((d) => d.json.type === "transaction.completed")).toBe(true);
    for (const delivery of received.slice(0, 10)) verifyWith(secret, delivery);

    // Every delivery recorded as succeeded on its first attempt (the 100 newest are listed; the rest spot-checked by event).
    const newest = await until(
      () => deliveries(shop.api, { endpointId: id, limit: 100 }),
      (d) => d.length === 100 && d.every((x) => x.status === "succeeded"),
    );
    expect(newest.every((x) => x.attempts === 1 && x.lastStatusCode === 200)).toBe(true);
    const oldest = received[0]!.headers["webhook-id"]!;
    await until(
      () => deliveries(shop.api, { eventId: oldest }),
      (d) => d[0]?.status === "succeeded",
    );

    // No duplicates trail in after the fact.
    await expectNothingMoreWithin(QUIET_MS, () => r.received.length, "no duplicate delivery");
    expect(r.received).toHaveLength(total);
    expect(acks.size).toBe(total);
    expect([...acks.values()].filter((n) => n !== 1)).toEqual([]);
  });
});
