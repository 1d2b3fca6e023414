import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Every route that takes a Kenyan phone takes it however it is written (254..., +254..., 07..., 01...,
 * with spaces), stores one number (E.164) and answers it as its resource documents: 254XXXXXXXXX on
 * transactions, mobile money and payouts, +254... on customers. Anything else is a 400 naming the field,
 * and nothing is written.
 */
let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let merchantId: number;
let channelId: number;
let seq = 0;
const prisma = () => gw.gateway.db.prisma;
const unique = () => `${Date.now().toString(36)}${++seq}`;

/** The same phone as people write it. */
const FORMS = ["254708374149", "+254708374149", "0708374149", "0708 374 149", "+254 708-374-149"];
const STORED = "+254708374149";
const ECHOED = "254708374149";
/** Safaricom's newer 01... range. */
const NEW_RANGE = [["0110374149", "+254110374149"], ["254110374149", "+254110374149"], ["+254110374149", "+254110374149"]] as const;
/** Not a Kenyan mobile number: a foreign number, a landline, a wrong length, a prefix M-Pesa has no numbers in. */
const NOT_MPESA = ["+255712345678", "254208374149", "070837414", "0808374149", "7083741490"];
const MSISDN_PROBLEM = "must be a Kenyan mobile number: 2547XXXXXXXX, +2547XXXXXXXX, 07XXXXXXXX or 01XXXXXXXX";

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "20", JOB_POLL_INTERVAL_MS: "3600000", STK_CALLBACK_OVERDUE_MS: "3600000" } });
  const merchant = await gw.createMerchant();
  merchantId = merchant.id;
  api = apiClient(gw.url, merchant.testKey);
  const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
  expect(channel.status, channel.text).toBe(201);
  channelId = channel.body.channel.id;
});
afterAll(async () => {
  await gw?.close();
});

const gql = async (query: string, variables: Record<string, unknown>) => {
  const res = await api.post("/graphql", { query, variables });
  expect(res.status, res.text).toBe(200);
  expect(res.body.errors, res.text).toBeUndefined();
  return res.body.data;
};
const transactionRow = (reference: string) => prisma().transaction.findUniqueOrThrow({ where: { reference } });
const counts = async () => ({
  transactions: await prisma().transaction.count({ where: { merchantId } }),
  payouts: await prisma().payout.count({ where: { merchantId } }),
  customers: await prisma().customer.count({ where: { merchantId } }),
});

describe("STK push", () => {
  it.each(FORMS)("POST /api/momo/stk-push takes %j, stores it once and answers 254XXXXXXXXX", async (phone) => {
    const res = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: phone, payment_channel_id: channelId });
    expect(res.status, res.text).toBe(200);
    expect(res.body.transaction.phone_number).toBe(ECHOED);
    expect((await transactionRow(res.body.transaction.reference)).phoneNumber).toBe(STORED);
  });

  it.each(NEW_RANGE)("takes the 01... range too: %j", async (phone, stored) => {
    const res = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: phone, payment_channel_id: channelId });
    expect(res.status, res.text).toBe(200);
    expect(res.body.transaction.phone_number).toBe(stored.slice(1));
    expect((await transactionRow(res.body.transaction.reference)).phoneNumber).toBe(stored);
  });

  it("POST /v1/collections/stk and GraphQL startStkPush take the local form", async () => {
    const v1 = await api.post("/v1/collections/stk", { amount: 1000, phone_number: "0708374149" });
    expect(v1.status, v1.text).toBe(201);
    expect(v1.body.data.phone_number).toBe(ECHOED);
    const data = await gql(
      `mutation($input: StartStkPushInput!) { startStkPush(input: $input) { __typename ... on StartStkPushPayload { transaction { reference phoneNumber } } ... on Error { message } } }`,
      { input: { amount: 1000, phoneNumber: "+254708374149" } },
    );
    expect(data.startStkPush.transaction.phoneNumber).toBe(ECHOED);
    expect((await transactionRow(data.startStkPush.transaction.reference)).phoneNumber).toBe(STORED);
  });
});

describe("initialize", () => {
  it.each(FORMS)("POST /api/transactions/initialize takes phone %j for the transaction and the payer's customer record", async (phone) => {
    const email = `payer-${unique()}@example.com`;
    const res = await api.post("/api/transactions/initialize", { amount: 5000, email, phone });
    expect(res.status, res.text).toBe(200);
    expect((await transactionRow(res.body.reference)).phoneNumber).toBe(STORED);
    expect((await prisma().customer.findFirstOrThrow({ where: { merchantId, email } })).phone).toBe(STORED);
    const data = await gql(`query($r: String!) { transaction(reference: $r) { ... on Transaction { phoneNumber } } }`, { r: res.body.reference });
    expect(data.transaction.phoneNumber).toBe(ECHOED);
  });

  it("GraphQL initializeTransaction takes the local form; a payer abroad keeps an international number", async () => {
    const local = await gql(
      `mutation($input: InitializeTransactionInput!) { initializeTransaction(input: $input) { __typename ... on InitializeTransactionPayload { reference } ... on Error { message } } }`,
      { input: { amount: 5000, email: `payer-${unique()}@example.com`, phone: "0110374149" } },
    );
    expect((await transactionRow(local.initializeTransaction.reference)).phoneNumber).toBe("+254110374149");
    const abroad = await api.post("/api/transactions/initialize", { amount: 5000, email: `payer-${unique()}@example.com`, phone: "+44 7911 123456" });
    expect(abroad.status, abroad.text).toBe(200);
    expect((await transactionRow(abroad.body.reference)).phoneNumber).toBe("+447911123456");
  });
});

describe("payouts", () => {
  it.each(FORMS)("POST /v1/payouts takes %j and answers 254XXXXXXXXX", async (phone) => {
    const res = await api.post("/v1/payouts", { amount: 150000, phone_number: phone, reference: `PO-${unique()}` });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.phone_number).toBe(ECHOED);
    expect((await prisma().payout.findUniqueOrThrow({ where: { id: res.body.data.id } })).phoneNumber).toBe(STORED);
  });

  it("GraphQL createPayout takes the 01... local form", async () => {
    const data = await gql(
      `mutation($input: CreatePayoutInput!) { createPayout(input: $input) { __typename ... on Payout { reference phoneNumber } ... on Error { message } } }`,
      { input: { amount: 150000, phoneNumber: "0110374149" } },
    );
    expect(data.createPayout.phoneNumber).toBe("254110374149");
    expect((await prisma().payout.findFirstOrThrow({ where: { reference: data.createPayout.reference } })).phoneNumber).toBe("+254110374149");
  });
});

describe("customers", () => {
  it.each(FORMS)("POST /api/customers/create takes %j and answers it with its + (the customer resource's format)", async (phone) => {
    const res = await api.post("/api/customers/create", { email: `c-${unique()}@example.com`, phone });
    expect(res.status, res.text).toBe(201);
    expect(res.body.customer.phone).toBe(STORED);
  });

  it("GraphQL createCustomer takes the local form", async () => {
    const data = await gql(
      `mutation($input: CreateCustomerInput!) { createCustomer(input: $input) { __typename ... on Customer { phone } ... on Error { message } } }`,
      { input: { email: `c-${unique()}@example.com`, phone: "0708374149" } },
    );
    expect(data.createCustomer.phone).toBe(STORED);
  });
});

describe("C2B simulation", () => {
  it.each(FORMS)("POST /api/momo/simulate-c2b takes %j and records the payment with the number", async (phone) => {
    const reference = `BILL-${unique()}`;
    const res = await api.post("/api/momo/simulate-c2b", { payment_channel_id: channelId, amount: 1000, phone_number: phone, reference });
    expect(res.status, res.text).toBe(200);
    expect(res.body.transaction).toEqual({ amount: 1000, phone_number: ECHOED, reference, status: "completed" });
    const row = await prisma().transaction.findFirstOrThrow({ where: { merchantId, clientReference: reference, paymentMethod: "momo_c2b" } });
    expect(row.phoneNumber).toBe(STORED);
  });

  it("GraphQL simulateC2b takes the local form", async () => {
    const data = await gql(
      `mutation($input: SimulateC2bInput!) { simulateC2b(input: $input) { __typename ... on SimulateC2bPayload { phoneNumber status } ... on Error { message } } }`,
      { input: { paymentChannelId: channelId, amount: 1000, phoneNumber: "0708374149", reference: `BILL-${unique()}` } },
    );
    expect(data.simulateC2b).toEqual({ __typename: "SimulateC2bPayload", phoneNumber: ECHOED, status: "completed" });
  });
});

describe("anything else is a 400 naming the field, and nothing is written", () => {
  const routes: [string, (phone: string) => Record<string, unknown>, string][] = [
    ["/api/momo/stk-push", (phone) => ({ amount: 1000, phone_number: phone }), "phone_number"],
    ["/v1/collections/stk", (phone) => ({ amount: 1000, phone_number: phone }), "phone_number"],
    ["/api/momo/simulate-c2b", (phone) => ({ amount: 1000, phone_number: phone, reference: "BILL-X" }), "phone_number"],
    ["/v1/payouts", (phone) => ({ amount: 150000, phone_number: phone }), "phone_number"],
  ];
  it.each(routes.flatMap(([path, body, field]) => NOT_MPESA.map((phone) => [path, phone, body, field] as const)))("%s refuses %j", async (path, phone, body, field) => {
    const before = await counts();
    const res = await api.post(path, body(phone));
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual({ status: "error", code: "validation_failed", message: `${field}: ${MSISDN_PROBLEM}`, errors: [{ field: field, message: MSISDN_PROBLEM }] });
    expect(await counts()).toEqual(before);
  });

  it.each([
    ["/api/transactions/initialize", { amount: 5000, email: "x@example.com" }],
    ["/api/customers/create", { email: "refused@example.com" }],
  ] as const)("%s refuses a phone that is neither Kenyan nor international", async (path, body) => {
    for (const phone of ["0808374149", "254208374149", "447911123456", "+2547"]) {
      const before = await counts();
      const res = await api.post(path, { ...body, phone });
      expect(res.status, `${phone}: ${res.text}`).toBe(400);
      expect(res.body.code).toBe("validation_failed");
      expect(res.body.message).toMatch(/^phone: must be a Kenyan mobile number: .*, or an international number with its leading \+/);
      expect(await counts()).toEqual(before);
    }
  });

  it("GraphQL names its own input field", async () => {
    const data = await gql(
      `mutation($input: CreatePayoutInput!) { createPayout(input: $input) { __typename ... on ValidationError { field message } } }`,
      { input: { amount: 150000, phoneNumber: "+255712345678" } },
    );
    expect(data.createPayout).toEqual({ __typename: "ValidationError", field: "phone_number", message: `phone_number: ${MSISDN_PROBLEM}` });
  });
});
