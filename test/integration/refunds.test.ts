import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";

/**
 * Refunds on the sandbox rail, over real HTTP: the documented shape, never more than was paid (decided in
 * the database, under concurrency), failures that give the amount back, the refusals, roles and tenants,
 * and the signed refund.completed / refund.failed webhooks.
 */
const REFUND_KEYS = [
  "id", "reference", "transaction_reference", "amount", "currency", "status", "method", "reason", "merchant_note", "customer_note",
  "provider_reference", "failure_code", "failure_reason", "created_at", "updated_at", "completed_at",
];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" });

let gw: TestGateway;
let receiver: WebhookReceiver;
let api: ReturnType<typeof apiClient>;
let liveApi: ReturnType<typeof apiClient>;
let otherApi: ReturnType<typeof apiClient>;
let merchantId: number;
let webhookSecret: string;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  gw = await startTestGateway({
    env: { SANDBOX_REFUND_DELAY_MS: "300", SANDBOX_STK_DELAY_MS: "50", JOB_POLL_INTERVAL_MS: "100", WEBHOOK_ALLOW_PRIVATE_URLS: "true", RATE_LIMIT_ENABLED: "false" },
  });
  const merchant = await gw.createMerchant();
  merchantId = merchant.id;
  api = apiClient(gw.url, merchant.testKey);
  liveApi = apiClient(gw.url, merchant.liveKey);
  otherApi = apiClient(gw.url, (await gw.createMerchant()).testKey);
  await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/refunds`, events: ["refund.completed", "refund.failed"] });
  expect(hook.status, hook.text).toBe(201);
  webhookSecret = hook.body.data.secret;
});

afterAll(async () => {
  await gw?.close();
  await receiver?.close();
});
afterAll(() => expectCleanLedger(gw));

/** A completed card payment of `amount`, paid on the hosted checkout with a sandbox test card. */
async function paidTransaction(amount = 10_000, number = "4242424242424242"): Promise<string> {
  const init = await api.post("/api/transactions/initialize", { amount, email: "payer@example.com", currency: "KES" });
  expect(init.status, init.text).toBe(200);
  const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card(number));
  expect(paid.status, paid.text).toBe(200);
  return init.body.reference;
}

const refund = (body: Record<string, unknown>, headers?: Record<string, string>) => api.post("/v1/refunds", body, headers);
const settled = (id: number | string) => until(() => api.get(`/v1/refunds/${id}`), (r) => r.body?.data?.status !== "pending");

describe("POST /v1/refunds and GET /v1/refunds/:id", () => {
  it("refunds all of a payment by default: 201 pending in the documented shape, then completed, with one signed webhook", async () => {
    const reference = await paidTransaction(10_000);
    const res = await refund({ transaction: reference, reason: "requested_by_customer", merchant_note: "order #7 returned" });
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body.data)).toEqual(REFUND_KEYS);
    const r = res.body.data;
    expect(r).toMatchObject({
      transaction_reference: reference, amount: 10_000, currency: "KES", status: "pending", method: "sandbox", reason: "requested_by_customer",
      merchant_note: "order #7 returned", customer_note: null, failure_code: null, failure_reason: null, completed_at: null,
    });
    expect(r.reference).toMatch(/^re_[0-9a-z]{20}$/);
    expect(r.created_at).toMatch(ISO_MS);

    const done = await settled(r.id);
    expect(done.body.data).toMatchObject({ id: r.id, status: "completed", provider_reference: expect.stringMatching(/^sbx_re_/) });
    expect(done.body.data.completed_at).toMatch(ISO_MS);
    expect((await api.get(`/v1/refunds/${r.reference}`)).body.data).toEqual(done.body.data);

    const events = await gw.gateway.db.prisma.event.findMany({ where: { refundId: r.id } });
    expect(events.map((e) => e.type)).toEqual(["refund.completed"]);
    const [delivery] = await until(async () => receiver.received.filter((d) => d.json?.data?.reference === r.reference), (d) => d.length === 1);
    // Verified as a merchant's receiver would, with the standardwebhooks package.
    expect(new Webhook(webhookSecret).verify(delivery!.body, delivery!.headers)).toMatchObject({ type: "refund.completed", data: done.body.data });
    expect(delivery!.headers["webhook-id"]).toBe(events[0]!.id.toString());

    // The payment stays completed; verify and the list say what went back.
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "completed", amount_refunded: 10_000, refunded: true });
    const listed = await api.get(`/api/transactions/list?search=${reference}`);
    expect(listed.body.data).toEqual([expect.objectContaining({ reference, status: "completed", amount_refunded: 10_000, refunded: true })]);

    // Nothing is left to refund.
    const more = await refund({ transaction: reference, amount: 1 });
    expect(more.status).toBe(409);
    expect(more.body).toMatchObject({ status: "error", code: "amount_exceeds_refundable" });
    expect(more.body.message).toBe(`amount: this payment (${reference}) has been fully refunded`);
  });

  it("refunds in parts, counting pending refunds, by the transaction's id too; the default takes what remains", async () => {
    const reference = await paidTransaction(10_000);
    const { id: transactionId } = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
    const first = await refund({ transaction: reference, amount: 3_000 });
    expect(first.status, first.text).toBe(201);
    await settled(first.body.data.id);
    // Part refunded: counted, not yet "refunded".
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction).toMatchObject({ amount_refunded: 3_000, refunded: false });
    const over = await refund({ transaction: transactionId, amount: 7_001 });
    expect(over.status).toBe(409);
    expect(over.body).toMatchObject({ code: "amount_exceeds_refundable", message: expect.stringContaining("at most KES 70.00 can still be refunded") });
    const rest = await refund({ transaction: transactionId });
    expect(rest.status, rest.text).toBe(201);
    expect(rest.body.data.amount).toBe(7_000);
    await settled(first.body.data.id);
    await settled(rest.body.data.id);
    const list = await api.get(`/v1/refunds?transaction=${reference}`);
    expect(list.body).toMatchObject({ status: "success", total: 2, page: 1, pages: 1 });
    expect(list.body.data.map((r: { id: number }) => r.id)).toEqual([rest.body.data.id, first.body.data.id]);
    expect(list.body.data.every((r: { status: string }) => r.status === "completed")).toBe(true);
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "completed", amount_refunded: 10_000, refunded: true });
  });

  it("a refund of the refund-failing test card fails with refund_failed, and its amount is refundable again", async () => {
    const reference = await paidTransaction(5_000, "4000000000005126");
    const res = await refund({ transaction: reference, amount: 2_000 });
    expect(res.status, res.text).toBe(201);
    const done = await settled(res.body.data.id);
    expect(done.body.data).toMatchObject({ status: "failed", failure_code: "refund_failed", completed_at: null });
    // A failed refund gives nothing back.
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction).toMatchObject({ amount_refunded: 0, refunded: false });
    const [delivery] = await until(async () => receiver.received.filter((d) => d.json?.data?.reference === res.body.data.reference), (d) => d.length === 1);
    expect(delivery!.json).toMatchObject({ type: "refund.failed", data: { failure_code: "refund_failed" } });
    const again = await refund({ transaction: reference });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.amount).toBe(5_000);
  });

  it("an STK payment from 254700005126 completes, but its refunds fail", async () => {
    const push = await api.post("/api/momo/stk-push", { amount: 3_000, phone_number: "254700005126" });
    expect(push.status, push.text).toBe(200);
    const reference: string = push.body.transaction.reference;
    await until(() => api.get(`/api/momo/stk-status/${reference}`), (r) => r.body?.transaction?.status === "completed");
    const res = await refund({ transaction: reference, amount: 1_000 });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.method).toBe("sandbox");
    const done = await settled(res.body.data.id);
    expect(done.body.data).toMatchObject({ status: "failed", failure_code: "refund_failed" });
  });

  it("50 concurrent refunds of a tenth each: exactly 10 accepted, never more than was paid", async () => {
    const reference = await paidTransaction(10_000);
    const answers = await Promise.all(Array.from({ length: 50 }, () => refund({ transaction: reference, amount: 1_000 })));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(10);
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused).toHaveLength(40);
    for (const a of refused) expect(a.body.code).toBe("amount_exceeds_refundable");
    const rows = await gw.gateway.db.prisma.refund.findMany({ where: { transactionReference: reference } });
    expect(rows.reduce((sum, r) => sum + r.amount, 0n)).toBe(10_000n);
  });

  it("an Idempotency-Key retry returns the same refund, and no second refund exists", async () => {
    const reference = await paidTransaction(4_000);
    const key = `re-${Date.now()}`;
    const first = await refund({ transaction: reference, amount: 1_000 }, { "idempotency-key": key });
    const second = await refund({ transaction: reference, amount: 1_000 }, { "idempotency-key": key });
    expect(second.status).toBe(201);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(await gw.gateway.db.prisma.refund.count({ where: { transactionReference: reference } })).toBe(1);
  });
});

describe("refusals", () => {
  it("a transaction that is not completed: 409 transaction_not_refundable", async () => {
    const init = await api.post("/api/transactions/initialize", { amount: 2_000, email: "p@example.com" });
    const res = await refund({ transaction: init.body.reference });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ status: "error", code: "transaction_not_refundable" });
  });

  it.each([
    [{ amount: 0 }, "amount"],
    [{ amount: -5 }, "amount"],
    [{ amount: 1.5 }, "amount"],
    [{ amount: "100" }, "amount"],
    [{ reason: "changed_mind" }, "reason"],
    [{ merchant_note: "x".repeat(256) }, "merchant_note"],
    [{ transaction: null }, "transaction"],
    [{ transaction: "bad\u0000ref" }, "transaction"],
  ])("%j is a 400 naming %s, and writes nothing", async (body, field) => {
    const reference = await paidTransaction(1_000);
    const res = await refund({ transaction: reference, ...body });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(res.body.message).toContain(field);
    expect(await gw.gateway.db.prisma.refund.count({ where: { transactionReference: reference } })).toBe(0);
  });

  it("an unknown transaction, another merchant's, or a test one seen with a live key: the 404 envelope", async () => {
    const reference = await paidTransaction(1_000);
    for (const [client, ref] of [[api, "txn-nope"], [otherApi, reference], [liveApi, reference]] as const) {
      const res = await client.post("/v1/refunds", { transaction: ref });
      expect(res.status, res.text).toBe(404);
      expect(res.body).toMatchObject({ status: "error", code: "not_found" });
    }
    const mine = await refund({ transaction: reference });
    for (const client of [otherApi, liveApi]) {
      expect((await client.get(`/v1/refunds/${mine.body.data.id}`)).status).toBe(404);
      expect((await client.get(`/v1/refunds/${mine.body.data.reference}`)).status).toBe(404);
      expect((await client.get("/v1/refunds")).body.data.map((r: { id: number }) => r.id)).not.toContain(mine.body.data.id);
    }
  });

  it("roles: a developer refunds in test mode, a viewer never, a developer not in live mode", async () => {
    const reference = await paidTransaction(3_000);
    const signIn = async (role: "developer" | "viewer", mode: "test" | "live") => {
      const user = await gw.createUser(merchantId, role);
      const res = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password, mode });
      expect(res.status, res.text).toBe(200);
      return bearerClient(gw.url, res.body.data.access_token);
    };
    const viewer = await signIn("viewer", "test");
    expect((await viewer.post("/v1/refunds", { transaction: reference, amount: 1_000 })).status).toBe(403);
    const liveDeveloper = await signIn("developer", "live");
    expect((await liveDeveloper.post("/v1/refunds", { transaction: reference, amount: 1_000 })).status).toBe(403);
    const developer = await signIn("developer", "test");
    const res = await developer.post("/v1/refunds", { transaction: reference, amount: 1_000 });
    expect(res.status, res.text).toBe(201);
  });
});

describe("GraphQL", () => {
  it("createRefund, refund and refundsPage answer what REST does", async () => {
    const reference = await paidTransaction(6_000);
    const gql = (query: string, variables: Record<string, unknown>) => api.post("/graphql", { query, variables });
    const created = await gql(
      `mutation($input: CreateRefundInput!) { createRefund(input: $input) { __typename ... on Refund { databaseId reference amount status method reason } ... on Error { code message } } }`,
      { input: { transaction: reference, amount: 2500, reason: "duplicate" } },
    );
    expect(created.body.data.createRefund).toMatchObject({ __typename: "Refund", amount: 2500, status: "pending", method: "sandbox", reason: "duplicate" });
    const { databaseId, reference: refundReference } = created.body.data.createRefund;
    await settled(databaseId);
    const one = await gql(`query($r: String) { refund(reference: $r) { ... on Refund { databaseId status transactionReference } } }`, { r: refundReference });
    expect(one.body.data.refund).toEqual({ databaseId, status: "completed", transactionReference: reference });
    const tx = await gql(`query($r: String!) { transaction(reference: $r) { ... on Transaction { amount amountRefunded refunded refunds { databaseId status } } } }`, { r: reference });
    expect(tx.body.data.transaction).toEqual({ amount: 6000, amountRefunded: 2500, refunded: false, refunds: [{ databaseId, status: "completed" }] });
    const connection = await gql(`query($t: String) { refunds(first: 1, transaction: $t) { totalCount edges { node { databaseId } } pageInfo { hasNextPage } } }`, { t: reference });
    expect(connection.body.data.refunds).toEqual({ totalCount: 1, edges: [{ node: { databaseId } }], pageInfo: { hasNextPage: false } });
    const none = await gql(`query { refunds(first: 5, transaction: "txn-nope") { totalCount edges { node { databaseId } } } }`, {});
    expect(none.body.data.refunds).toEqual({ totalCount: 0, edges: [] });
    const page = await gql(`query($t: String) { refundsPage(transaction: $t) { ... on RefundPage { total items { databaseId } } } }`, { t: reference });
    expect(page.body.data.refundsPage).toEqual({ total: 1, items: [{ databaseId }] });
    const tooMuch = await gql(
      `mutation($input: CreateRefundInput!) { createRefund(input: $input) { __typename ... on Error { code message } } }`,
      { input: { transaction: reference, amount: 3501 } },
    );
    expect(tooMuch.body.data.createRefund).toMatchObject({ code: "amount_exceeds_refundable" });
  });
});
