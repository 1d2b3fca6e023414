import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withPaystack, type PaystackBench } from "../support/benches.ts";
import { apiClient, bearerClient } from "../support/gateway.ts";
import { withSandboxMerchants, type SandboxMerchants } from "../support/sandbox-merchants.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";

/**
 * Saved payment methods over real HTTP: a card or M-Pesa phone is saved with the payer's consent when the payment
 * succeeds (the merchant's save_payment_method, which the payer may untick), one card once, listed per customer and
 * detached for good; the provider's token never appears in any answer; other merchants and viewers are refused.
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const card = (number: string, save?: boolean) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123", ...(save === undefined ? {} : { save_payment_method: save }) });
const PAYS = "254708374149";

describe("saved payment methods on the sandbox", () => {
  const bench = withSandboxMerchants();
  let { gw, api, otherApi, merchantId } = {} as SandboxMerchants;
  beforeAll(() => {
    ({ gw, api, otherApi, merchantId } = bench);
  });

  async function customer(email: string): Promise<number> {
    const created = await api.post("/api/customers/create", { email, first_name: "Wanjiru", last_name: "Kamau", phone: "+254712345678" });
    expect(created.status, created.text).toBe(201);
    return created.body.customer.id;
  }

  async function payByCard(body: Record<string, unknown>, cardBody: Record<string, unknown>) {
    const init = await api.post("/api/transactions/initialize", { amount: 2_500, currency: "KES", ...body });
    expect(init.status, init.text).toBe(200);
    const pay = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, cardBody);
    expect(pay.status, pay.text).toBe(200);
    return init.body.reference as string;
  }

  const methods = async (customerId: number) => {
    const listed = await api.get(`/v1/customers/${customerId}/payment-methods`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.text).not.toMatch(/sbx_auth|sbx_sig|token|fingerprint/);
    return listed.body.data as Record<string, any>[];
  };

  it("saves the card the merchant asked to save, once however often it pays, and never shows its token", async () => {
    const id = await customer("saver@example.com");
    await payByCard({ customer: id, save_payment_method: true }, card("4242424242424242"));
    const [saved, ...more] = await methods(id);
    expect(more).toEqual([]);
    expect(saved).toEqual({
      id: expect.stringMatching(/^pm_[0-9a-z]{20}$/), type: "card", customer: id, reusable: true, mpesa: null, detached_at: null, created_at: expect.any(String),
      card: { brand: "visa", last4: "4242", exp_month: 12, exp_year: NEXT_YEAR, bank: "Sandbox Bank" },
    });
    // The same card again (the payer ticking the box themselves): the same method.
    await payByCard({ email: "saver@example.com" }, card("4242424242424242", true));
    expect((await methods(id)).map((m) => m.id)).toEqual([saved!.id]);
    // Stored sealed: the row holds no token in clear.
    const row = await gw.gateway.db.prisma.paymentMethod.findUniqueOrThrow({ where: { reference: saved!.id } });
    expect(row.tokenEncrypted).toMatch(/^v1\./);
    expect(row.tokenEncrypted).not.toContain("sbx_auth");
    expect(row.fingerprint).not.toContain("4242");
  });

  it("saves nothing without consent: the merchant did not ask, or the payer unticked the box", async () => {
    const id = await customer("private@example.com");
    await payByCard({ customer: id }, card("5555555555554444"));
    await payByCard({ customer: id, save_payment_method: true }, card("5555555555554444", false));
    expect(await methods(id)).toEqual([]);
    // A declined card saves nothing either.
    const init = await api.post("/api/transactions/initialize", { amount: 2_500, currency: "KES", customer: id, save_payment_method: true });
    const declined = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card("4000000000000002"));
    expect(declined.status).toBe(402);
    expect(await methods(id)).toEqual([]);
  });

  it("initialize takes a customer instead of an e-mail, and refuses one that is not the caller's", async () => {
    const id = await customer("named@example.com");
    const init = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer: id });
    expect(init.status, init.text).toBe(200);
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
    expect(row).toMatchObject({ email: "named@example.com", customerId: id, savePaymentMethod: false });
    const foreign = await otherApi.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer: id });
    expect(foreign.status, foreign.text).toBe(404);
    const mismatch = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer: id, email: "someone@example.com" });
    expect(mismatch.status).toBe(400);
    const neither = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES" });
    expect(neither.status).toBe(400);
    expect(neither.body.message).toMatch(/^email/);
  });

  it("saves the payer's M-Pesa phone with consent, shown masked", async () => {
    const id = await customer("mpesa@example.com");
    const init = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer: id });
    const push = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/mpesa`, { phone: PAYS, save_payment_method: true });
    expect(push.status, push.text).toBe(202);
    await until(() => api.get(`/api/transactions/verify/${init.body.reference}`), (r) => r.body?.transaction?.status === "completed" || r.body?.status === "completed");
    const listed = await until(() => methods(id), (m) => m.length === 1);
    expect(listed[0]).toMatchObject({ type: "mpesa", card: null, mpesa: { phone: "2547*****149" }, reusable: true });
    expect(JSON.stringify(listed)).not.toContain(PAYS);
  });

  it("detaches for good; viewers and other merchants cannot, and other merchants see nothing", async () => {
    const id = await customer("detach@example.com");
    await payByCard({ customer: id, save_payment_method: true }, card("4084084084084081"));
    const [method] = await methods(id);
    const viewer = bearerClient(gw.url, await gw.signIn(merchantId, "viewer"));
    expect((await viewer.get(`/v1/customers/${id}/payment-methods`)).body.data).toHaveLength(1);
    const refused = await viewer.raw(`/v1/payment-methods/${method!.id}`, { method: "DELETE" });
    expect(refused.status, refused.text).toBe(403);
    expect((await otherApi.raw(`/v1/payment-methods/${method!.id}`, { method: "DELETE" })).status).toBe(404);
    expect((await otherApi.get(`/v1/customers/${id}/payment-methods`)).status).toBe(404);

    const detached = await api.raw(`/v1/payment-methods/${method!.id}`, { method: "DELETE" });
    expect(detached.status, detached.text).toBe(200);
    expect(detached.body.data).toMatchObject({ id: method!.id, detached_at: expect.any(String) });
    expect(await methods(id)).toEqual([]);
    // Paying with the same card again does not bring it back.
    await payByCard({ customer: id, save_payment_method: true }, card("4084084084084081"));
    expect(await methods(id)).toEqual([]);
    const again = await api.raw(`/v1/payment-methods/${method!.id}`, { method: "DELETE" });
    expect(again.body.data.detached_at).toBe(detached.body.data.detached_at);
    expect((await api.raw("/v1/payment-methods/pm_nope", { method: "DELETE" })).status).toBe(404);
  });
});

describe("saved payment methods on a paystack channel", () => {
  let { fake, gw, api } = {} as PaystackBench;
  withPaystack({ env: { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" } }, (bench) => {
    ({ fake, gw, api } = bench);
  });
  afterAll(() => expectCleanLedger(gw));

  it("saves the paid card's authorization (strings read as integers, the brand trimmed), one card once, reusable as Paystack says", async () => {
    const created = await api.post("/api/customers/create", { email: "ps@example.com" });
    const id = created.body.customer.id as number;
    const pay = async () => {
      const init = await api.post("/api/transactions/initialize", { amount: 50_000, currency: "NGN", customer: id, save_payment_method: true });
      expect(init.status, init.text).toBe(200);
      await fake.pay(init.body.reference);
      await until(() => api.get(`/api/transactions/verify/${init.body.reference}`), (r) => r.body?.status === "completed");
      return init.body.reference as string;
    };
    const reference = await pay();
    const listed = await until(() => api.get(`/v1/customers/${id}/payment-methods`), (r) => r.body?.data?.length === 1);
    expect(listed.body.data[0]).toMatchObject({ type: "card", reusable: true, card: { brand: "visa", last4: "4081", exp_month: 12, exp_year: 2030, bank: "TEST BANK" } });
    const code = fake.transactions.get(reference)!.authorization!.authorization_code;
    expect(listed.text).not.toContain(code);
    expect(listed.text).not.toMatch(/AUTH_|SIG_/);
    await pay();
    expect((await api.get(`/v1/customers/${id}/payment-methods`)).body.data).toHaveLength(1);

    // An authorization Paystack will not charge again is kept as not reusable.
    fake.switches.authorizationReusable = false;
    try {
      const other = (await api.post("/api/customers/create", { email: "ps-once@example.com" })).body.customer.id as number;
      const init = await api.post("/api/transactions/initialize", { amount: 50_000, currency: "NGN", customer: other, save_payment_method: true });
      await fake.pay(init.body.reference);
      const once = await until(() => api.get(`/v1/customers/${other}/payment-methods`), (r) => r.body?.data?.length === 1);
      expect(once.body.data[0].reusable).toBe(false);
    } finally {
      fake.switches.authorizationReusable = true;
    }
  });
});
