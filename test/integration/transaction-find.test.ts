import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * Issue 41, "find a payment the way the shop knows it": GET /v1/transactions and GraphQL's transactionsPage find a
 * payment by the shop's own order number (several may share one), the M-Pesa receipt, the payer's phone in any form
 * or e-mail in any case, or the customer; never another merchant's. STK pushes keep their metadata; /v1 bodies refuse
 * fields they do not take, naming them, while /api keeps accepting them.
 */
describe("finding a payment", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let otherApi: ReturnType<typeof apiClient>;
  /** References of the payments made below. */
  const refs = { order1: "", order2: "", stk: "", card: "", other: "" };
  let receipt = "";
  let customerId = 0;

  const list = (query: string) => api.get(`/v1/transactions?${query}`);
  const refsOf = (body: { data: { reference: string }[] }) => body.data.map((t) => t.reference).sort();
  const gqlPage = async (args: string) => {
    const res = await api.post("/graphql", {
      query: `{ transactionsPage(${args}) { __typename ... on TransactionPage { total items { reference } } ... on Error { code message } } }`,
    });
    expect(res.status, res.text).toBe(200);
    return res.body.data.transactionsPage as { __typename: string; total: number; items: { reference: string }[]; message?: string };
  };

  beforeAll(async () => {
    gw = await startTestGateway({ env: { SANDBOX_STK_DELAY_MS: "20", RATE_LIMIT_ENABLED: "false" } });
    const merchant = await createSandboxMerchant(gw, "Duka Find");
    const other = await createSandboxMerchant(gw, "Other Find");
    api = apiClient(gw.url, merchant.testKey);
    otherApi = apiClient(gw.url, other.testKey);

    // Two payments for one order number (a retried order), the payer's e-mail in mixed case and phone as 07...
    for (const key of ["order1", "order2"] as const) {
      const init = await api.post("/api/transactions/initialize", { amount: 2500, email: "Wanjiku@Example.com", phone: "0712345678", reference: "ORDER-1001" });
      expect(init.status, init.text).toBe(200);
      refs[key] = init.body.reference;
    }
    // A card payment, for the method's brand and last 4.
    refs.card = await paidTransaction(gw.url, merchant.testKey, { amount: 5000, email: "card@example.com", reference: "ORDER-2002" });
    // An M-Pesa STK push (the sandbox pays 254708374149) with metadata, for the receipt.
    const stk = await api.post("/v1/collections/stk", { amount: 1500, phone_number: "0708374149", reference: "ORDER-3003", metadata: { order: 3003, till: "A" } });
    expect(stk.status, stk.text).toBe(201);
    expect(stk.body.data.metadata).toEqual({ order: 3003, till: "A" });
    refs.stk = stk.body.data.reference;
    const paid = await until(() => api.get(`/api/transactions/verify/${refs.stk}`), (r) => r.body.transaction.status === "completed");
    receipt = paid.body.transaction.provider_reference;
    expect(receipt).toMatch(/^SBX/);
    // Another merchant's payment with the same order number, phone and e-mail: never found by this merchant.
    const theirs = await otherApi.post("/api/transactions/initialize", { amount: 2500, email: "wanjiku@example.com", phone: "0712345678", reference: "ORDER-1001" });
    expect(theirs.status, theirs.text).toBe(200);
    refs.other = theirs.body.reference;
    const customer = await api.post("/v1/customers", { email: "customer@example.com" });
    expect(customer.status, customer.text).toBe(201);
    customerId = customer.body.data.id;
    const customerPayment = await api.post("/api/transactions/initialize", { amount: 700, customer: customerId });
    expect(customerPayment.status, customerPayment.text).toBe(200);
  });
  afterAll(async () => {
    await gw?.close();
  });

  it("lists by client_reference: every payment of that order, newest first, the merchant's time zone named", async () => {
    const res = await list("client_reference=ORDER-1001");
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: "success", total: 2, page: 1, pages: 1, timezone: "UTC" });
    expect(res.body.data.map((t: { reference: string }) => t.reference)).toEqual([refs.order2, refs.order1]);
    expect(res.body.data[0]).toMatchObject({
      client_reference: "ORDER-1001",
      email: "wanjiku@example.com",
      phone_number: "254712345678",
      amount: 2500,
      currency: "KES",
      status: "pending",
      method: null,
    });
    expect(res.body.data[0].created_at).toEqual(expect.any(String));
    // Exact, not a prefix.
    expect((await list("client_reference=ORDER-100")).body.total).toBe(0);
  });

  it("lists by the M-Pesa receipt, showing M-Pesa with its receipt code and the STK push's metadata", async () => {
    const res = await list(`receipt=${receipt}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.total).toBe(1);
    expect(res.body.data[0]).toMatchObject({
      reference: refs.stk,
      client_reference: "ORDER-3003",
      phone_number: "254708374149",
      method: { type: "mpesa", receipt, card_brand: null, card_last4: null },
      metadata: { order: 3003, till: "A" },
      status: "completed",
    });
  });

  it("shows a card payment's brand and last 4", async () => {
    const res = await list("client_reference=ORDER-2002");
    expect(res.body.data[0]).toMatchObject({ reference: refs.card, method: { type: "card", card_brand: "Visa", card_last4: "4242", receipt: null } });
  });

  it("finds by the payer's phone in any form and e-mail in any case", async () => {
    for (const phone of ["0712345678", "254712345678", "+254712345678"]) {
      const res = await list(`phone=${encodeURIComponent(phone)}`);
      expect(res.status, res.text).toBe(200);
      expect(refsOf(res.body), phone).toEqual([refs.order1, refs.order2].sort());
    }
    const byEmail = await list(`email=${encodeURIComponent("WANJIKU@example.COM")}`);
    expect(refsOf(byEmail.body)).toEqual([refs.order1, refs.order2].sort());
    const bad = await list("phone=not-a-phone");
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/^phone: /);
  });

  it("combines filters (all must hold) and finds a customer's payments", async () => {
    expect((await list("client_reference=ORDER-1001&status=completed")).body.total).toBe(0);
    expect((await list("client_reference=ORDER-1001&status=pending&phone=0712345678")).body.total).toBe(2);
    const today = new Date().toISOString().slice(0, 10);
    expect((await list(`client_reference=ORDER-1001&date_from=${today}&date_to=${today}`)).body.total).toBe(2);
    const byCustomer = await list(`customer=${customerId}`);
    expect(byCustomer.body.total).toBe(1);
    expect(byCustomer.body.data[0]).toMatchObject({ customer: customerId, email: "customer@example.com" });
    expect((await list("customer=abc")).status).toBe(400);
  });

  it("pages like the other /v1 lists", async () => {
    const first = await list("client_reference=ORDER-1001&limit=1");
    expect(first.body).toMatchObject({ total: 2, page: 1, limit: 1, pages: 2 });
    const second = await list("client_reference=ORDER-1001&limit=1&page=2");
    expect(second.body.data.map((t: { reference: string }) => t.reference)).toEqual([refs.order1]);
  });

  it("the search finds one payment by each thing the shop knows it by", async () => {
    const cases: [string, string[]][] = [
      [refs.card, [refs.card]],
      ["ORDER-1001", [refs.order1, refs.order2]],
      [receipt, [refs.stk]],
      ["0708374149", [refs.stk]],
      ["254708374149", [refs.stk]],
      ["+254708374149", [refs.stk]],
      ["Wanjiku@EXAMPLE.com", [refs.order1, refs.order2]],
    ];
    for (const [term, expected] of cases) {
      const rest = await list(`search=${encodeURIComponent(term)}`);
      expect(refsOf(rest.body), term).toEqual([...expected].sort());
      const page = await gqlPage(`search: ${JSON.stringify(term)}`);
      expect(page.items.map((t) => t.reference).sort(), term).toEqual([...expected].sort());
    }
    // Not a substring.
    expect((await gqlPage(`search: "ORDER-10"`)).total).toBe(0);
  });

  it("GraphQL takes the same exact filters", async () => {
    expect((await gqlPage(`clientReference: "ORDER-1001"`)).total).toBe(2);
    expect((await gqlPage(`receipt: ${JSON.stringify(receipt)}`)).items).toEqual([{ reference: refs.stk }]);
    expect((await gqlPage(`phone: "+254712345678"`)).total).toBe(2);
    expect((await gqlPage(`email: "WANJIKU@example.com"`)).total).toBe(2);
    const connection = await api.post("/graphql", {
      query: `{ transactions(first: 5, clientReference: "ORDER-1001", phone: "0712345678") { totalCount edges { node { reference paymentDetail { method } } } } }`,
    });
    expect(connection.body.data.transactions.totalCount).toBe(2);
    const detail = await api.post("/graphql", { query: `{ transaction(reference: ${JSON.stringify(refs.card)}) { ... on Transaction { paymentDetail { method cardBrand cardLast4 receipt } } } }` });
    expect(detail.body.data.transaction.paymentDetail).toEqual({ method: "card", cardBrand: "Visa", cardLast4: "4242", receipt: null });
  });

  it("never finds another merchant's payment", async () => {
    const mine = await list("client_reference=ORDER-1001");
    expect(refsOf(mine.body)).not.toContain(refs.other);
    expect((await list(`search=${refs.other}`)).body.total).toBe(0);
    expect((await gqlPage(`search: ${JSON.stringify(refs.other)}`)).total).toBe(0);
    // And the other merchant finds only its own.
    const theirs = await otherApi.get("/v1/transactions?phone=0712345678");
    expect(refsOf(theirs.body)).toEqual([refs.other]);
    expect((await otherApi.get(`/v1/transactions?receipt=${receipt}`)).body.total).toBe(0);
  });

  it("/api/momo/stk-push keeps metadata too (read back by verify), and still accepts fields it does not know", async () => {
    const push = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: "254708374149", metadata: { cart: "c-9" }, shop_extra: "ignored" });
    expect(push.status, push.text).toBe(200);
    // The published answer is unchanged.
    expect(Object.keys(push.body.transaction)).toEqual(["id", "reference", "amount", "phone_number", "status", "checkout_request_id", "created_at"]);
    const verify = await api.get(`/api/transactions/verify/${push.body.transaction.reference}`);
    expect(verify.body.transaction.metadata).toEqual({ cart: "c-9" });
    const v1 = await api.get(`/v1/collections/stk/${push.body.transaction.reference}`);
    expect(v1.body.data.metadata).toEqual({ cart: "c-9" });
    // Metadata is checked as initialize checks it.
    const bad = await api.post("/v1/collections/stk", { amount: 1000, phone_number: "254708374149", metadata: ["not", "an", "object"] });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/^metadata: /);
    // /api/transactions/initialize keeps accepting unknown fields.
    expect((await api.post("/api/transactions/initialize", { amount: 100, email: "x@example.com", subaccount: "ACCT_1" })).status).toBe(200);
  });

  it("refuses unknown fields in /v1 bodies with a 400 naming every one of them", async () => {
    const stk = await api.post("/v1/collections/stk", { amount: 1000, phone_number: "254708374149", metdata: { a: 1 }, channel: 3 });
    expect(stk.status).toBe(400);
    expect(stk.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(stk.body.message).toMatch(/^Unknown fields: metdata, channel \(this route takes amount, phone_number, payment_channel_id, reference, description, metadata\)$/);
    const refund = await api.post("/v1/refunds", { transaction: refs.card, note: "x" });
    expect(refund.status).toBe(400);
    expect(refund.body.message).toContain("Unknown field: note");
    // A route without a body takes no fields at all.
    const receiptMail = await api.post(`/v1/transactions/${refs.card}/receipt`, { to: "x@example.com" });
    expect(receiptMail.status).toBe(400);
    expect(receiptMail.body.message).toContain("Unknown field: to (this route takes no body fields)");
    // Nothing was created by the refused push.
    expect((await list("search=254708374149")).body.total).toBe(2);
  });
});
