import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * One rule for text, checked before anything reaches a service or the database: a control character
 * (NUL above all, which PostgreSQL cannot store) or an absurd length is a 400 naming the field, on REST
 * bodies, query strings and path parameters, GraphQL variables and literals, the checkout and provider
 * callbacks (in Daraja's format), and nothing is written.
 */
describe("text validation", () => {
  let gw: TestGateway;
  let fake: FakeDaraja;
  let api: ReturnType<typeof apiClient>;
  let merchantId: number;

  beforeAll(async () => {
    fake = await startFakeDaraja();
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", ...darajaGatewayEnv(fake) } });
    fake.switches.callbackOrigin = gw.url;
    const merchant = await gw.createMerchant();
    merchantId = merchant.id;
    api = apiClient(gw.url, merchant.testKey);
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" })).status).toBe(201);
  });
  afterAll(async () => {
    await gw?.close();
    await fake?.close();
  });

  const transactions = () => gw.gateway.db.prisma.transaction.count({ where: { merchantId } });
  const NUL_PROBLEM = "must not contain control characters such as NUL (\\u0000)";
  const refused = (field: string) => ({ status: "error", code: "validation_failed", message: `${field}: ${NUL_PROBLEM}`, errors: [{ field, message: NUL_PROBLEM }] });

  it("REST body fields, nested config keys, query strings and path parameters name the field", async () => {
    const before = await transactions();
    expect((await api.post("/api/transactions/initialize", { amount: 100, email: "a@b.test", description: "a\u0000b" })).body).toEqual(refused("description"));
    expect((await api.post("/api/transactions/initialize", { amount: 100, email: "a@b.test", first_name: "bell\u0007" })).body).toEqual(refused("first_name"));
    const channel = await api.post("/api/payment-channels/create", { name: "P", provider: "paystack", config: { public_key: "pk_test_x", secret_key: "sk_test_\u0000" } });
    expect(channel.status).toBe(400);
    expect(channel.body).toEqual(refused("config.secret_key"));
    expect(channel.text).not.toContain("sk_test_");
    expect((await api.get("/api/customers/list?search=%00")).body).toEqual(refused("search"));
    expect((await api.get("/api/transactions/verify/%00")).body).toEqual(refused("reference"));
    expect((await api.get("/api/momo/stk-status/a%1Fb")).body).toEqual(refused("reference"));
    // Tabs and line breaks are ordinary text.
    const ok = await api.post("/api/transactions/initialize", { amount: 100, email: "a@b.test", description: "line one\nline\ttwo" });
    expect(ok.status, ok.text).toBe(200);
    expect(await transactions()).toBe(before + 1);
  });

  it("absurdly long text is refused by length before any service sees it", async () => {
    const res = await api.post("/api/customers/create", { email: "long@b.test", first_name: "x".repeat(10_001) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ status: "error", code: "validation_failed", message: "first_name: must be at most 10000 characters", errors: [{ field: "first_name", message: "must be at most 10000 characters" }] });
  });

  it("GraphQL variables and literals are refused before execution, naming where", async () => {
    const viaVariable = await api.post("/graphql", {
      query: `mutation($input: InitializeTransactionInput!) { initializeTransaction(input: $input) { __typename } }`,
      variables: { input: { amount: 100, email: "a@b.test", description: "x\u0000" } },
    });
    expect(viaVariable.body).toEqual({ errors: [{ message: "input.description: must not contain control characters such as NUL (\\u0000)", extensions: { code: "validation_failed" } }] });
    const viaLiteral = await api.post("/graphql", { query: `{ transaction(reference: "a\\u0000b") { __typename } }` });
    expect(viaLiteral.body).toEqual({ errors: [{ message: "reference: must not contain control characters such as NUL (\\u0000)", extensions: { code: "validation_failed" } }] });
  });

  it("the checkout: an impossible reference is the not-found page, a card field with NUL a 400", async () => {
    const page = await apiClient(gw.url).get("/payment/checkout/%00");
    expect(page.status).toBe(404);
    expect(page.headers.get("content-type")).toMatch(/text\/html/);
    const init = await api.post("/api/transactions/initialize", { amount: 100, email: "a@b.test" });
    const pay = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, { card_number: "4242\u0000", expiry_month: 12, expiry_year: 2040, cvc: "123" });
    expect(pay.body).toEqual(refused("card_number"));
  });

  it("a Daraja callback with a control character is refused in Daraja's format and applies nothing", async () => {
    const mpesa = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: fake.channelConfig() });
    const push = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: "254708374149", payment_channel_id: mpesa.body.channel.id });
    expect(push.status, push.text).toBe(200);
    const checkoutRequestId: string = push.body.transaction.checkout_request_id;
    const callbackUrl = String((fake.requests.find((r) => r.path.includes("stkpush"))?.body as { CallBackURL: string }).CallBackURL).replace("https://pay.gateway.test", gw.url);
    const res = await fetch(callbackUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ Body: { stkCallback: { MerchantRequestID: "m", CheckoutRequestID: `${checkoutRequestId}\u0000`, ResultCode: 0, ResultDesc: "ok" } } }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ ResultCode: 1, ResultDesc: "Rejected: Body.stkCallback.CheckoutRequestID: must not contain control characters such as NUL (\\u0000)" });
    expect((await api.get(`/api/momo/stk-status/${push.body.transaction.reference}`)).body.transaction.status).toBe("pending");
  });
});
