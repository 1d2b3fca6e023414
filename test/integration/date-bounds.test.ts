import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, bearerClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Issue 35 item 12: a date filter outside what the database holds (accepted: 0001-01-01 to 9999-12-30, both ends
 * included) is a 400 naming the field on every REST route that takes one, and GraphQL's validation error on every
 * field, never a 500 or an internal error; the bounds themselves work.
 */
let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let owner: ReturnType<typeof bearerClient>;
let channelId: number;

beforeAll(async () => {
  // Some 200 requests from one key: no rate limit in the way.
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
  const merchant = await createSandboxMerchant(gw);
  channelId = merchant.channelId;
  api = apiClient(gw.url, merchant.testKey);
  await paidTransaction(gw.url, merchant.testKey, { amount: 1000, email: "payer@example.com", currency: "KES" });
  const user = await gw.createUser(merchant.id, "owner");
  const login = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password, mode: "test" });
  expect(login.status, login.text).toBe(200);
  owner = bearerClient(gw.url, login.body.data.access_token);
});
afterAll(async () => {
  await gw?.close();
});

const REST_LISTS = [
  "/api/transactions/list",
  "/v1/refunds",
  "/v1/payouts",
  "/v1/balance/transactions",
  "/v1/reports/transactions.csv",
  "/v1/reports/balance-transactions.csv",
];

/** Refused values: the day before the first (year 0), the day after the last, and year 10000. */
const OUT_OF_RANGE: [string, RegExp][] = [
  ["0000-01-01", /must be between 0001-01-01 and 9999-12-30/],
  ["0000-12-31", /must be between 0001-01-01 and 9999-12-30/],
  ["9999-12-31", /must be between 0001-01-01 and 9999-12-30/],
  ["10000-01-01", /must be a date in YYYY-MM-DD format/],
];

describe("REST date filters", () => {
  for (const path of REST_LISTS) {
    for (const field of ["date_from", "date_to"]) {
      it(`${path}?${field}= out of range is a 400 naming ${field}`, async () => {
        for (const [value, message] of OUT_OF_RANGE) {
          const res = await api.get(`${path}?${field}=${value}`);
          expect(res.status, `${value}: ${res.text}`).toBe(400);
          expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
          expect(res.body.message).toMatch(new RegExp(`^${field}: ${message.source}`));
        }
      });
    }

    it(`${path} accepts the first and the last day`, async () => {
      const whole = await api.get(`${path}?date_from=0001-01-01&date_to=9999-12-30`);
      expect(whole.status, whole.text).toBe(200);
      for (const query of ["date_from=0001-01-01&date_to=0001-01-01", "date_from=9999-12-30", "date_to=0001-01-01"]) {
        expect((await api.get(`${path}?${query}`)).status, query).toBe(200);
      }
      // The paid transaction (and its balance transaction) is inside the whole range.
      if (path === "/api/transactions/list" || path === "/v1/balance/transactions") expect(whole.body.total).toBeGreaterThan(0);
    });
  }

  it("POST /v1/reconciliations refuses the day before the first as a 400 naming date", async () => {
    const res = await owner.post("/v1/reconciliations", { payment_channel_id: channelId, date: "0000-12-31" });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual({ status: "error", code: "validation_failed", message: "date: must not be before 0001-01-01", errors: [{ field: "date", message: "must not be before 0001-01-01" }] });
    const future = await owner.post("/v1/reconciliations", { payment_channel_id: channelId, date: "9999-12-31" });
    expect(future.status, future.text).toBe(400);
    expect(future.body.message).toBe("date: must not be in the future");
  });
});

describe("GraphQL date filters", () => {
  const connections = ["transactions", "refunds", "payouts", "balanceTransactions"];
  const pages = ["transactionsPage", "refundsPage", "payoutsPage", "balanceTransactionsPage"];

  for (const field of connections) {
    it(`${field}(dateFrom/dateTo) out of range is a validation error naming the field`, async () => {
      for (const [argument, name] of [["dateFrom", "date_from"], ["dateTo", "date_to"]] as const) {
        for (const [value, message] of OUT_OF_RANGE) {
          const res = await api.post("/graphql", { query: `query($d: String) { ${field}(first: 1, ${argument}: $d) { totalCount } }`, variables: { d: value } });
          expect(res.status, res.text).toBe(200);
          expect(res.body.errors?.[0], `${argument}=${value}: ${res.text}`).toMatchObject({ extensions: { code: "validation_failed" } });
          expect(res.body.errors[0].message).toMatch(new RegExp(`^${name}: ${message.source}`));
        }
      }
      const bounds = await api.post("/graphql", { query: `{ ${field}(first: 1, dateFrom: "0001-01-01", dateTo: "9999-12-30") { totalCount } }` });
      expect(bounds.body.errors, bounds.text).toBeUndefined();
    });
  }

  for (const field of pages) {
    it(`${field}(dateFrom/dateTo) out of range is a ValidationError result naming the field`, async () => {
      for (const [argument, name] of [["dateFrom", "date_from"], ["dateTo", "date_to"]] as const) {
        for (const [value, message] of OUT_OF_RANGE) {
          const res = await api.post("/graphql", { query: `query($d: String) { ${field}(${argument}: $d) { __typename ... on Error { code message } } }`, variables: { d: value } });
          expect(res.body.errors, res.text).toBeUndefined();
          expect(res.body.data[field]).toMatchObject({ __typename: "ValidationError", code: "validation_failed" });
          expect(res.body.data[field].message).toMatch(new RegExp(`^${name}: ${message.source}`));
        }
      }
      const bounds = await api.post("/graphql", { query: `{ ${field}(dateFrom: "0001-01-01", dateTo: "9999-12-30") { __typename } }` });
      expect(bounds.body.data?.[field]?.__typename, bounds.text).toMatch(/Page$/);
    });
  }

  it("runReconciliation refuses year 0 as a ValidationError result naming date", async () => {
    const res = await owner.post("/graphql", {
      query: `mutation($input: RunReconciliationInput!) { runReconciliation(input: $input) { __typename ... on Error { code message } } }`,
      variables: { input: { paymentChannelId: channelId, date: "0000-12-31" } },
    });
    expect(res.body.errors, res.text).toBeUndefined();
    expect(res.body.data.runReconciliation).toEqual({ __typename: "ValidationError", code: "validation_failed", message: "date: must not be before 0001-01-01" });
  });
});
