import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, bearerClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Payment links over /v1 and GraphQL: the documented shape, every bad input a 400 naming its field, ids that
 * name nothing, isolation between merchants and modes, Idempotency-Key, roles, and what the public POST makes.
 */
const LINK_KEYS = [
  "id", "url", "slug", "active", "amount", "min_amount", "currency", "description", "reusable", "expires_at", "callback_url",
  "payment_channel_id", "payments_count", "created_at",
];
const PUBLIC_URL = "https://pay.example.test";

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let liveApi: ReturnType<typeof apiClient>;
let otherApi: ReturnType<typeof apiClient>;
let merchantId: number;

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", PUBLIC_BASE_URL: PUBLIC_URL } });
  const merchant = await createSandboxMerchant(gw);
  merchantId = merchant.id;
  api = apiClient(gw.url, merchant.testKey);
  liveApi = apiClient(gw.url, merchant.liveKey);
  otherApi = apiClient(gw.url, (await createSandboxMerchant(gw)).testKey);
});
afterAll(() => gw?.close());

const create = (body: Record<string, unknown>, headers?: Record<string, string>) => api.post("/v1/payment-links", body, headers);
const gql = (client: ReturnType<typeof apiClient>, query: string, variables?: Record<string, unknown>) => client.post("/graphql", { query, variables });

describe("POST /v1/payment-links", () => {
  it("creates a fixed-amount link: 201 in the documented shape, with an unguessable slug and its public URL", async () => {
    const res = await create({ amount: 2500, currency: "kes", description: "  Order #12  ", callback_url: "https://shop.example/done" });
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body.data)).toEqual(LINK_KEYS);
    const link = res.body.data;
    expect(link).toMatchObject({
      active: true, amount: 2500, min_amount: 1, currency: "KES", description: "Order #12", reusable: false, expires_at: null,
      callback_url: "https://shop.example/done", payment_channel_id: null, payments_count: 0,
    });
    expect(link.slug).toMatch(/^[0-9A-Za-z]{24}$/);
    expect(link.url).toBe(`${PUBLIC_URL}/pay/${link.slug}`);
    expect((await api.get(`/v1/payment-links/${link.id}`)).body.data).toEqual(link);
    const another = await create({ amount: 2500, description: "Order #12" });
    expect(another.body.data.slug).not.toBe(link.slug);
  });

  it("creates an open-amount reusable link that expires", async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const res = await create({ min_amount: 500, description: "Donations", reusable: true, expires_at: expiresAt });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ amount: null, min_amount: 500, currency: "KES", reusable: true, expires_at: expiresAt });
  });

  it("refuses every bad input with a 400 naming the field, and creates nothing", async () => {
    const before = (await api.get("/v1/payment-links")).body.total;
    const cases: [Record<string, unknown>, string][] = [
      [{ amount: 100 }, "description"],
      [{ amount: 100, description: "   " }, "description"],
      [{ amount: 100, description: "x".repeat(501) }, "description"],
      [{ amount: 100, description: 7 }, "description"],
      [{ amount: 0, description: "d" }, "amount"],
      [{ amount: 10.5, description: "d" }, "amount"],
      [{ amount: "100", description: "d" }, "amount"],
      [{ min_amount: -3, description: "d" }, "min_amount"],
      [{ amount: 100, min_amount: 50, description: "d" }, "min_amount"],
      [{ amount: 100, description: "d", currency: "KESX" }, "currency"],
      [{ amount: 100, description: "d", reusable: "yes" }, "reusable"],
      [{ amount: 100, description: "d", expires_at: "2001-01-01T00:00:00Z" }, "expires_at"],
      [{ amount: 100, description: "d", expires_at: "tomorrow" }, "expires_at"],
      [{ amount: 100, description: "d", expires_at: "2099-01-01" }, "expires_at"],
      [{ amount: 100, description: "d", callback_url: "javascript:alert(1)" }, "callback_url"],
      [{ amount: 100, description: "d", callback_url: "https://u:p@shop.example/" }, "callback_url"],
      [{ amount: 100, description: "d", payment_channel_id: "1" }, "payment_channel_id"],
      [{ amount: 100, description: "d", payment_channel_id: -1 }, "payment_channel_id"],
    ];
    for (const [body, field] of cases) {
      const res = await create(body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message, JSON.stringify(body)).toMatch(new RegExp(`^${field}: `));
    }
    const unsupported = await create({ amount: 100, description: "d", currency: "EUR" });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body).toMatchObject({ code: "unsupported_currency", message: expect.stringMatching(/^currency: /) });
    const foreignChannel = await create({ amount: 100, description: "d", payment_channel_id: 999999 });
    expect(foreignChannel.status).toBe(404);
    expect((await api.get("/v1/payment-links")).body.total).toBe(before);
  });

  it("honours Idempotency-Key: the same link again, one row", async () => {
    const key = `pl-${Date.now()}`;
    const first = await create({ amount: 700, description: "Once" }, { "idempotency-key": key });
    const second = await create({ amount: 700, description: "Once" }, { "idempotency-key": key });
    expect(first.status, first.text).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body).toEqual(first.body);
    const other = await create({ amount: 701, description: "Once" }, { "idempotency-key": key });
    expect(other.status).toBe(422);
  });
});

describe("GET /v1/payment-links, GET /v1/payment-links/:id, deactivate", () => {
  it("lists newest first by page, filters by active, and deactivates", async () => {
    const a = (await create({ amount: 111, description: "List A" })).body.data;
    const b = (await create({ amount: 222, description: "List B" })).body.data;
    const page = await api.get("/v1/payment-links?limit=2");
    expect(page.status, page.text).toBe(200);
    expect(page.body).toMatchObject({ status: "success", page: 1, limit: 2 });
    expect(page.body.data.map((l: { id: number }) => l.id)).toEqual([b.id, a.id]);
    expect(page.body.pages).toBe(Math.ceil(page.body.total / 2));

    const off = await api.post(`/v1/payment-links/${a.id}/deactivate`, {});
    expect(off.status, off.text).toBe(200);
    expect(off.body.data).toMatchObject({ id: a.id, active: false });
    const inactive = await api.get("/v1/payment-links?active=false");
    expect(inactive.body.data.map((l: { id: number }) => l.id)).toEqual([a.id]);
    const active = await api.get("/v1/payment-links?active=true&limit=100");
    expect(active.body.data.some((l: { id: number }) => l.id === a.id)).toBe(false);
    expect(active.body.data.some((l: { id: number }) => l.id === b.id)).toBe(true);
    // Deactivating again changes nothing and is not an error.
    expect((await api.post(`/v1/payment-links/${a.id}/deactivate`, {})).body.data.active).toBe(false);
  });

  it("refuses bad query parameters and answers 404 for ids that name none of the caller's links", async () => {
    for (const q of ["active=maybe", "limit=0", "limit=101", "page=x"]) {
      const res = await api.get(`/v1/payment-links?${q}`);
      expect(res.status, `${q}: ${res.text}`).toBe(400);
      expect(res.body.message).toMatch(new RegExp(`^${q.split("=")[0]}: `));
    }
    for (const id of ["999999", "abc", "-1", "1.5", "0x10", "%20"]) {
      expect((await api.get(`/v1/payment-links/${id}`)).status, id).toBe(404);
      expect((await api.post(`/v1/payment-links/${id}/deactivate`, {})).status, id).toBe(404);
    }
    expect((await api.get(`/v1/payment-links/${"9".repeat(5000)}`)).status).toBe(414);
  });

  it("keeps merchants and modes apart: another merchant or the live key neither sees nor deactivates a test link", async () => {
    const link = (await create({ amount: 333, description: "Mine" })).body.data;
    for (const client of [otherApi, liveApi]) {
      expect((await client.get(`/v1/payment-links/${link.id}`)).status).toBe(404);
      expect((await client.post(`/v1/payment-links/${link.id}/deactivate`, {})).status).toBe(404);
      const list = await client.get("/v1/payment-links?limit=100");
      expect(list.body.data.some((l: { id: number }) => l.id === link.id)).toBe(false);
    }
    expect((await liveApi.get("/v1/payment-links")).body.total).toBe(0);
    expect((await api.get(`/v1/payment-links/${link.id}`)).body.data.active).toBe(true);
  });

  it("viewers read but cannot create or deactivate", async () => {
    const link = (await create({ amount: 444, description: "Roles" })).body.data;
    const viewer = await gw.createUser(merchantId, "viewer");
    const session = await apiClient(gw.url).post("/v1/auth/login", { email: viewer.email, password: viewer.password });
    expect(session.status, session.text).toBe(200);
    const asViewer = bearerClient(gw.url, session.body.data.access_token);
    expect((await asViewer.get(`/v1/payment-links/${link.id}`)).status).toBe(200);
    expect((await asViewer.post("/v1/payment-links", { amount: 1, description: "no" })).status).toBe(403);
    expect((await asViewer.post(`/v1/payment-links/${link.id}/deactivate`, {})).status).toBe(403);
  });
});

describe("GraphQL", () => {
  it("createPaymentLink, paymentLink, paymentLinks (connection) and deactivatePaymentLink", async () => {
    const created = await gql(api, `mutation { createPaymentLink(input: { amount: 1500, description: "GQL", reusable: true }) {
      __typename ... on PaymentLink { id databaseId url slug amount minAmount currency reusable active paymentsCount } ... on Error { code message } } }`);
    const link = created.body.data.createPaymentLink;
    expect(link, created.text).toMatchObject({ __typename: "PaymentLink", amount: 1500, minAmount: 1, currency: "KES", reusable: true, active: true, paymentsCount: 0 });
    const one = await gql(api, `query($id: String!) { paymentLink(id: $id) { ... on PaymentLink { id slug } } }`, { id: String(link.databaseId) });
    expect(one.body.data.paymentLink).toEqual({ id: link.id, slug: link.slug });
    const node = await gql(api, `query($id: ID!) { node(id: $id) { __typename id } }`, { id: link.id });
    expect(node.body.data.node).toEqual({ __typename: "PaymentLink", id: link.id });
    expect((await gql(otherApi, `query($id: ID!) { node(id: $id) { id } }`, { id: link.id })).body.data.node).toBeNull();

    const conn = await gql(api, `{ paymentLinks(first: 2, active: true) { totalCount edges { node { databaseId active } } pageInfo { hasNextPage endCursor } } }`);
    expect(conn.body.data.paymentLinks.edges[0].node).toEqual({ databaseId: link.databaseId, active: true });
    expect(conn.body.data.paymentLinks.totalCount).toBeGreaterThanOrEqual(2);
    const next = await gql(api, `query($after: String) { paymentLinks(first: 2, after: $after) { edges { node { databaseId } } } }`, { after: conn.body.data.paymentLinks.pageInfo.endCursor });
    expect(next.body.data.paymentLinks.edges[0].node.databaseId).toBeLessThan(link.databaseId);

    const off = await gql(api, `mutation($id: String!) { deactivatePaymentLink(id: $id) { ... on PaymentLink { active } } }`, { id: String(link.databaseId) });
    expect(off.body.data.deactivatePaymentLink).toEqual({ active: false });
    const bad = await gql(api, `mutation { createPaymentLink(input: { description: "x", minAmount: 0 }) { __typename ... on Error { code message } } }`);
    expect(bad.body.data?.createPaymentLink ?? bad.body.errors?.[0], bad.text).toMatchObject({ message: expect.stringMatching(/^minAmount|^min_amount/) });
    const missing = await gql(api, `{ paymentLink(id: "nope") { __typename ... on Error { code } } }`);
    expect(missing.body.data.paymentLink).toEqual({ __typename: "NotFoundError", code: "not_found" });
  });
});
