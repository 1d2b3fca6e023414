import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withPaystack, type PaystackBench } from "../support/benches.ts";
import { apiClient, bearerClient } from "../support/gateway.ts";
import { withSandboxMerchants, type SandboxMerchants } from "../support/sandbox-merchants.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";

/**
 * Charges of saved payment methods without the payer (POST /v1/charges) over real HTTP: an Idempotency-Key is
 * required and one key charges at most once (a retry replays; a retry after a lost answer asks the provider by
 * reference before any new charge); sandbox saved cards decide as their test cards; Paystack's charge_authorization
 * succeeds, declines or waits for the payer; M-Pesa methods push a prompt; detached methods are never charged.
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123", save_payment_method: true });
let keys = 0;
const key = () => ({ "idempotency-key": `charge-${process.pid}-${Date.now()}-${++keys}` });

describe("charges on the sandbox", () => {
  const bench = withSandboxMerchants();
  let { gw, api, otherApi, merchantId } = {} as SandboxMerchants;
  beforeAll(() => {
    ({ gw, api, otherApi, merchantId } = bench);
  });

  /** A customer (POST /v1/customers) with the card saved by paying once with it. */
  async function savedCard(number: string): Promise<{ customer: number; method: string }> {
    const created = await api.post("/v1/customers", { email: `c${++keys}@example.com`, first_name: "Achieng", metadata: { plan: "gold" } });
    expect(created.status, created.text).toBe(201);
    const customer = created.body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer });
    expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card(number))).status).toBe(200);
    const listed = await api.get(`/v1/customers/${customer}/payment-methods`);
    return { customer, method: listed.body.data[0].id };
  }

  it("/v1/customers: create with metadata, read by id; another merchant's is not found", async () => {
    const created = await api.post("/v1/customers", { email: "Amina@Example.com", first_name: "Amina", phone: "0712345678", metadata: { tier: 2 } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ id: expect.any(Number), email: "amina@example.com", first_name: "Amina", phone: "+254712345678", metadata: { tier: 2 } });
    const read = await api.get(`/v1/customers/${created.body.data.id}`);
    expect(read.body.data).toEqual(created.body.data);
    expect((await otherApi.get(`/v1/customers/${created.body.data.id}`)).status).toBe(404);
    expect((await api.post("/v1/customers", { email: "amina@example.com" })).status).toBe(409);
    expect((await api.post("/v1/customers", { email: "x@example.com", metadata: [1] })).status).toBe(400);
  });

  it("charges a saved card once per key: 400 without a key, 201 completed, the same answer replayed", async () => {
    const { customer, method } = await savedCard("4242424242424242");
    const body = { customer, payment_method: method, amount: 4_900, currency: "KES", reference: "inv-1", metadata: { invoice: 1 }, description: "March" };
    const keyless = await api.post("/v1/charges", body);
    expect(keyless.status, keyless.text).toBe(400);
    expect(keyless.body.message).toMatch(/Idempotency-Key/);

    const headers = key();
    const charged = await api.post("/v1/charges", body, headers);
    expect(charged.status, charged.text).toBe(201);
    expect(charged.body.data).toMatchObject({
      status: "completed", amount: 4_900, currency: "KES", payment_method: "card", customer, saved_payment_method: method,
      client_reference: "inv-1", metadata: { invoice: 1 }, description: "March", failure_code: null, next_action: null,
    });
    expect(charged.text).not.toMatch(/sbx_auth|sbx_sig/);
    const again = await api.post("/v1/charges", body, headers);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data.reference).toBe(charged.body.data.reference);
    const rows = await gw.gateway.db.prisma.transaction.findMany({ where: { customerId: customer, paymentMethod: "card", amount: 4_900n } });
    expect(rows).toHaveLength(1);
    const attempts = await gw.gateway.db.prisma.transactionAttempt.findMany({ where: { transactionId: rows[0]!.id } });
    expect(attempts).toMatchObject([{ method: "card", origin: "api", status: "succeeded", detail: "**** 4242" }]);
    const verify = await api.get(`/api/transactions/verify/${charged.body.data.reference}`);
    expect(verify.body.status).toBe("completed");
    expect(verify.body.transaction.amount).toBe(4_900);
  });

  it("the card 0341 saves on its first payment, and every later charge is declined", async () => {
    const { customer, method } = await savedCard("4000000000000341");
    for (const amount of [1_000, 2_000]) {
      const declined = await api.post("/v1/charges", { customer, payment_method: method, amount, currency: "KES" }, key());
      expect(declined.status, declined.text).toBe(201);
      expect(declined.body.data).toMatchObject({ status: "failed", failure_code: "card_declined" });
    }
  });

  it("a detached method is never charged; viewers cannot charge; other merchants and customers find nothing", async () => {
    const { customer, method } = await savedCard("5555555555554444");
    const body = { customer, payment_method: method, amount: 1_500, currency: "KES" };
    const viewer = bearerClient(gw.url, await gw.signIn(merchantId, "viewer"));
    expect((await viewer.post("/v1/charges", body, key())).status).toBe(403);
    expect((await otherApi.post("/v1/charges", body, key())).status).toBe(404);
    const someoneElse = (await api.post("/v1/customers", { email: `other${++keys}@example.com` })).body.data.id;
    expect((await api.post("/v1/charges", { ...body, customer: someoneElse }, key())).status).toBe(404);
    expect((await api.post("/v1/charges", { ...body, currency: "XYZ" }, key())).status).toBe(400);

    expect((await api.raw(`/v1/payment-methods/${method}`, { method: "DELETE" })).status).toBe(200);
    const refused = await api.post("/v1/charges", body, key());
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.code).toBe("payment_method_detached");
    expect(await gw.gateway.db.prisma.transaction.count({ where: { customerId: customer, amount: 1_500n } })).toBe(0);
  });

  it("an M-Pesa method sends a prompt to the saved phone and answers pending; the payer's approval completes it", async () => {
    const created = await api.post("/v1/customers", { email: `m${++keys}@example.com` });
    const customer = created.body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer });
    expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/mpesa`, { phone: "254708374149", save_payment_method: true })).status).toBe(202);
    const [method] = (await until(() => api.get(`/v1/customers/${customer}/payment-methods`), (r) => r.body?.data?.length === 1)).body.data;
    const charged = await api.post("/v1/charges", { customer, payment_method: method.id, amount: 3_000, currency: "KES" }, key());
    expect(charged.status, charged.text).toBe(201);
    expect(charged.body.data).toMatchObject({ status: "pending", payment_method: "momo_stk", customer, saved_payment_method: method.id, next_action: null });
    const settled = await until(() => api.get(`/api/transactions/verify/${charged.body.data.reference}`), (r) => r.body?.status === "completed");
    expect(settled.body.transaction.amount).toBe(3_000);
  });
});

describe("charges on a paystack channel", () => {
  let { fake, gw, api } = {} as PaystackBench;
  withPaystack({ env: { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" } }, (bench) => {
    ({ fake, gw, api } = bench);
  });
  afterAll(() => expectCleanLedger(gw));

  let customer: number;
  let method: string;
  let code: string;
  beforeAll(async () => {
    customer = (await api.post("/v1/customers", { email: "subscriber@example.com" })).body.data.id;
    const init = await api.post("/api/transactions/initialize", { amount: 10_000, currency: "NGN", customer, save_payment_method: true });
    await fake.pay(init.body.reference);
    const listed = await until(() => api.get(`/v1/customers/${customer}/payment-methods`), (r) => r.body?.data?.length === 1);
    method = listed.body.data[0].id;
    code = fake.transactions.get(init.body.reference)!.authorization!.authorization_code;
  });

  const charges = (reference: string) => fake.requests.filter((r) => r.path === "/transaction/charge_authorization" && r.body?.reference === reference);

  it("charges the authorization under the gateway's reference; failed and paused answers are failed and pending with next_action", async () => {
    const ok = await api.post("/v1/charges", { customer, payment_method: method, amount: 25_000, currency: "NGN" }, key());
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.data).toMatchObject({ status: "completed", payment_method: "card", provider_reference: expect.any(String) });
    expect(charges(ok.body.data.reference).map((r) => r.body)).toEqual([
      { authorization_code: code, email: "subscriber@example.com", amount: 25_000, currency: "NGN", reference: ok.body.data.reference },
    ]);
    expect(ok.text).not.toContain(code);
    expect(ok.text).not.toMatch(/AUTH_/);

    fake.switches.chargeOutcome = "failed";
    try {
      const failed = await api.post("/v1/charges", { customer, payment_method: method, amount: 25_000, currency: "NGN" }, key());
      expect(failed.body.data).toMatchObject({ status: "failed", failure_code: "card_declined", failure_reason: "Declined" });
    } finally {
      fake.switches.chargeOutcome = "success";
    }

    fake.switches.chargeOutcome = "paused";
    try {
      const paused = await api.post("/v1/charges", { customer, payment_method: method, amount: 25_000, currency: "NGN" }, key());
      expect(paused.body.data).toMatchObject({ status: "pending", next_action: { type: "redirect", url: `${gw.url}/payment/checkout/${paused.body.data.reference}` } });
      const page = await fetch(paused.body.data.next_action.url, { redirect: "manual" });
      expect(page.status).toBe(303);
      expect(page.headers.get("location")).toBe(`${fake.url}/checkout/${fake.transactions.get(paused.body.data.reference)!.access_code}`);
      // The payer approves at their bank; the gateway verifies and completes it.
      await fake.pay(paused.body.data.reference);
      await until(() => api.get(`/api/transactions/verify/${paused.body.data.reference}`), (r) => r.body?.status === "completed");
    } finally {
      fake.switches.chargeOutcome = "success";
    }
  });

  /** The key's stored answer gone and its lease lapsed: as when the instance died between Paystack's answer and our response. */
  async function loseAnswer(idempotencyKey: string) {
    await gw.gateway.db.prisma.idempotencyKey.updateMany({
      where: { key: idempotencyKey },
      data: { status: "in_flight", responseStatus: null, responseBody: null, responseContentType: null, lockedUntil: new Date(Date.now() - 1000) },
    });
  }

  it("an answer lost after Paystack charged: the retry verifies the reference and never charges again", async () => {
    const body = { customer, payment_method: method, amount: 31_000, currency: "NGN" };
    const headers = key();
    fake.switches.chargeReply = "error_after_create";
    let first;
    try {
      first = await api.post("/v1/charges", body, headers);
    } finally {
      fake.switches.chargeReply = "normal";
    }
    expect(first.status, first.text).toBe(201);
    expect(first.body.data.status).toBe("pending");
    const reference = first.body.data.reference as string;
    await loseAnswer(headers["idempotency-key"]);
    const retried = await api.post("/v1/charges", body, headers);
    expect(retried.status, retried.text).toBe(201);
    expect(retried.body.data).toMatchObject({ reference, status: "completed" });
    expect(charges(reference)).toHaveLength(1);
    expect(fake.requests.some((r) => r.path === `/transaction/verify/${reference}`)).toBe(true);
    expect(await gw.gateway.db.prisma.transaction.count({ where: { customerId: customer, amount: 31_000n } })).toBe(1);
    const attempts = await gw.gateway.db.prisma.transactionAttempt.findMany({ where: { transaction: { reference } } });
    expect(attempts).toMatchObject([{ status: "succeeded" }]);
  });

  it("Paystack refuses a charge as a duplicate reference (its charge under the reference stands): the payment takes that charge's outcome, never failed", async () => {
    const body = { customer, payment_method: method, amount: 33_000, currency: "NGN" };
    fake.switches.chargeReply = "duplicate_after_create";
    let charged;
    try {
      charged = await api.post("/v1/charges", body, key());
    } finally {
      fake.switches.chargeReply = "normal";
    }
    expect(charged.status, charged.text).toBe(201);
    const reference = charged.body.data.reference as string;
    expect(fake.transactions.get(reference)!.status).toBe("success");
    expect(charged.body.data).toMatchObject({ reference, status: "completed" });
    expect(fake.requests.some((r) => r.path === `/transaction/verify/${reference}`)).toBe(true);
    expect(charges(reference)).toHaveLength(1);
    const attempts = await gw.gateway.db.prisma.transactionAttempt.findMany({ where: { transaction: { reference } } });
    expect(attempts).toMatchObject([{ status: "succeeded" }]);
  });

  it("a charge that never reached Paystack: the retry finds the reference unknown and charges it then, once", async () => {
    const body = { customer, payment_method: method, amount: 32_000, currency: "NGN" };
    const headers = key();
    fake.switches.failNext = { path: "/transaction/charge_authorization", status: 503, body: { status: false, message: "Service unavailable" } };
    const first = await api.post("/v1/charges", body, headers);
    expect(first.body.data.status).toBe("pending");
    const reference = first.body.data.reference as string;
    expect(fake.transactions.has(reference)).toBe(false);
    await loseAnswer(headers["idempotency-key"]);
    const retried = await api.post("/v1/charges", body, headers);
    expect(retried.body.data).toMatchObject({ reference, status: "completed" });
    expect(fake.transactions.get(reference)!.status).toBe("success");
    expect(await gw.gateway.db.prisma.transaction.count({ where: { customerId: customer, amount: 32_000n } })).toBe(1);
  });
});
