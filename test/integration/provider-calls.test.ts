import { expect, describe, it } from "vitest";
import { currentProviderCallScope, withProviderCallScope, type ProviderCallRecord, type ProviderCallScope } from "../../src/providers/call-record.ts";
import { PROVIDER_CALLS_KEPT_MS } from "../../src/modules/retention/service.ts";
import { graphql } from "../gql/index.ts";
import { useTestGateway } from "../support/fixture.ts";
import { apiClient, bearerClient, createSandboxMerchant, paidTransaction, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { assertNoSecrets } from "../support/provider-call-secrets.ts";

/**
 * Every provider call on record (issue 36), from the sink's end: what a connector's HTTP helper hands over inside a
 * scope becomes a row (written in batches, off the caller's path), shown on the transaction, refund and payout to
 * owners and developers only, and deleted after 30 days. The sandbox makes no HTTP calls, so the sink is driven here
 * as src/providers/http.ts drives it; provider-calls-daraja.test.ts follows a real STK push end to end.
 */
let gw: TestGateway;
let merchant: TestMerchant;
let api: ReturnType<typeof apiClient>;
let reference: string;
let transactionId: number;
const prisma = () => gw.gateway.db.prisma;
const calls = () => gw.gateway.services.providerCalls;

useTestGateway({ env: { RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "30" } }, async (started) => {
  gw = started;
  merchant = await createSandboxMerchant(gw);
  api = apiClient(gw.url, merchant.testKey);
  reference = await paidTransaction(gw.url, merchant.testKey, { amount: 5000, email: "payer@example.com" });
  transactionId = (await prisma().transaction.findUniqueOrThrow({ where: { reference } })).id;
});

const call = (operation: string, extra: Partial<ProviderCallRecord> = {}): ProviderCallRecord => ({
  connector: "mpesa",
  operation,
  method: "POST",
  path: `/mpesa/${operation}/v1`,
  statusCode: 200,
  durationMs: 42,
  requestBody: `{"op":"${operation}","Password":"[redacted]"}`,
  responseBody: '{"ResponseCode":"0"}',
  error: null,
  ...extra,
});

/** As the connectors' HTTP helper does: inside the core's scope, hand each exchange to the sink with the current scope. */
const makeCalls = (scope: ProviderCallScope, records: ProviderCallRecord[]) =>
  withProviderCallScope(scope, async () => {
    for (const record of records) calls().record(record, currentProviderCallScope());
  });

const V1_FIELDS = ["connector", "operation", "method", "path", "status_code", "duration_ms", "request_body", "response_body", "error", "created_at"];

describe("the sink", () => {
  it("writes a row for each call made in a scope, and the transaction's page lists them (its attempts' too), oldest first", async () => {
    const attempt = await prisma().transactionAttempt.findFirstOrThrow({ where: { transactionId } });
    await makeCalls({ merchantId: merchant.id, transactionId }, [call("stk_push"), call("stk_query", { statusCode: null, durationMs: 5000, responseBody: null, error: "timeout" })]);
    await makeCalls({ merchantId: merchant.id, transactionId, attemptId: attempt.id }, [call("card_charge", { connector: "paystack" })]);
    // Outside any scope: no merchant to show it to, so not kept.
    calls().record(call("unscoped_probe"), currentProviderCallScope());
    await calls().flush();

    const res = await api.get(`/v1/transactions/${reference}/provider-calls`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe("success");
    expect(res.body.data.map((c: { operation: string }) => c.operation)).toEqual(["stk_push", "stk_query", "card_charge"]);
    expect(Object.keys(res.body.data[0])).toEqual(V1_FIELDS);
    expect(res.body.data[1]).toMatchObject({ connector: "mpesa", method: "POST", path: "/mpesa/stk_query/v1", status_code: null, duration_ms: 5000, response_body: null, error: "timeout" });
    expect(res.body.data[0]).toMatchObject({ status_code: 200, request_body: '{"op":"stk_push","Password":"[redacted]"}', response_body: '{"ResponseCode":"0"}' });
    expect(await prisma().providerCall.count({ where: { operation: "unscoped_probe" } })).toBe(0);
    const rows = await prisma().providerCall.findMany({ where: { merchantId: merchant.id } });
    expect(rows.filter((r) => r.operation === "card_charge")).toMatchObject([{ attemptId: attempt.id, transactionId }]);
    assertNoSecrets(rows);
  });

  it("keeps at most 16 KiB of a body, and a burst of calls becomes rows, every one", async () => {
    const huge = `{"data":"${"x".repeat(40_000)}"}`;
    const burst = Array.from({ length: 250 }, (_, i) => call(`burst_${i}`, { responseBody: i === 0 ? huge : '{"ok":true}' }));
    const other = await paidTransaction(gw.url, merchant.testKey, { amount: 700, email: "burst@example.com" });
    const otherId = (await prisma().transaction.findUniqueOrThrow({ where: { reference: other } })).id;
    await makeCalls({ merchantId: merchant.id, transactionId: otherId }, burst);
    await calls().flush();
    const rows = await prisma().providerCall.findMany({ where: { transactionId: otherId }, orderBy: { id: "asc" } });
    expect(rows.map((r) => r.operation)).toEqual(burst.map((c) => c.operation));
    expect(Buffer.byteLength(rows[0]!.responseBody!)).toBeLessThanOrEqual(16 * 1024);
    expect(rows[0]!.responseBody!.endsWith("…[truncated]")).toBe(true);
    // The page shows the latest 200, oldest first.
    const page = await api.get(`/v1/transactions/${other}/provider-calls`);
    expect(page.body.data).toHaveLength(200);
    expect(page.body.data[0].operation).toBe("burst_50");
    expect(page.body.data.at(-1).operation).toBe("burst_249");
  });

  it("shows a refund's and a payout's calls on them (GraphQL providerCalls)", async () => {
    const refund = await api.post("/v1/refunds", { transaction: reference, amount: 100 });
    expect(refund.status, refund.text).toBe(201);
    const payout = await api.post("/v1/payouts", { amount: 150000, phone_number: "254708374149" });
    expect(payout.status, payout.text).toBe(201);
    await makeCalls({ merchantId: merchant.id, refundId: refund.body.data.id }, [call("reversal")]);
    await makeCalls({ merchantId: merchant.id, payoutId: payout.body.data.id }, [call("b2c"), call("b2c_status")]);
    await calls().flush();

    const res = await api.graphql(RefundAndPayoutCalls, { refund: refund.body.data.reference, payout: payout.body.data.reference });
    expect(res.body.errors).toBeUndefined();
    const refundCalls = res.body.data?.refund.__typename === "Refund" ? res.body.data.refund.providerCalls : undefined;
    const payoutCalls = res.body.data?.payout.__typename === "Payout" ? res.body.data.payout.providerCalls : undefined;
    expect(refundCalls?.map((c) => c.operation)).toEqual(["reversal"]);
    expect(payoutCalls?.map((c) => c.operation)).toEqual(["b2c", "b2c_status"]);
  });
});

const RefundAndPayoutCalls = graphql(`
  query ProviderCallsOfRefundAndPayout($refund: String!, $payout: String!) {
    refund(reference: $refund) {
      __typename
      ... on Refund { providerCalls { operation statusCode } }
    }
    payout(reference: $payout) {
      __typename
      ... on Payout { providerCalls { operation statusCode } }
    }
  }
`);

const TransactionWithCalls = graphql(`
  query ProviderCallsOfTransaction($reference: String!) {
    transaction(reference: $reference) {
      __typename
      ... on Transaction { reference providerCalls { operation } }
    }
  }
`);

describe("who may read them", () => {
  const path = () => `/v1/transactions/${reference}/provider-calls`;

  it("owners and developers, by key or signed in, in either mode of theirs", async () => {
    const developerKey = await gw.gateway.services.merchants.createKey(merchant.id, "test", { role: "developer" });
    for (const client of [
      api,
      apiClient(gw.url, developerKey.plaintext),
      bearerClient(gw.url, await gw.signIn(merchant.id, "owner")),
      bearerClient(gw.url, await gw.signIn(merchant.id, "developer")),
    ]) {
      const res = await client.get(path());
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.length).toBeGreaterThan(0);
    }
  });

  it("a viewer is refused (403), by key or signed in; over GraphQL the field is null with forbidden, the rest answered", async () => {
    const viewerKey = await gw.gateway.services.merchants.createKey(merchant.id, "test", { role: "viewer" });
    for (const client of [apiClient(gw.url, viewerKey.plaintext), bearerClient(gw.url, await gw.signIn(merchant.id, "viewer"))]) {
      const res = await client.get(path());
      expect(res.status, res.text).toBe(403);
      expect(res.body).toMatchObject({ status: "error", code: "forbidden" });
      expect(res.body.message).toMatch(/cannot read provider calls; an owner or developer can/);
      const gql = await client.graphql(TransactionWithCalls, { reference });
      expect(gql.body.data?.transaction).toEqual({ __typename: "Transaction", reference, providerCalls: null });
      expect(gql.body.errors?.map((e) => e.extensions?.code)).toEqual(["forbidden"]);
    }
  });

  it("another merchant's transaction, the other mode's, or an unknown reference is a 404", async () => {
    const other = await createSandboxMerchant(gw);
    for (const res of [
      await apiClient(gw.url, other.testKey).get(path()),
      await apiClient(gw.url, merchant.liveKey).get(path()),
      await api.get("/v1/transactions/txn-nothing-here/provider-calls"),
    ]) {
      expect(res.status, res.text).toBe(404);
      expect(res.body).toMatchObject({ status: "error", code: "not_found" });
    }
  });
});

describe("retention", () => {
  it("deletes records older than 30 days and keeps the rest", async () => {
    const day = 86_400_000;
    const base = { merchantId: merchant.id, connector: "mpesa", method: "POST", path: "/old", durationMs: 1, transactionId };
    await prisma().providerCall.createMany({
      data: [
        { ...base, operation: "retention_old", createdAt: new Date(Date.now() - PROVIDER_CALLS_KEPT_MS - day) },
        { ...base, operation: "retention_recent", createdAt: new Date(Date.now() - PROVIDER_CALLS_KEPT_MS + day) },
      ],
    });
    expect(PROVIDER_CALLS_KEPT_MS).toBe(30 * day);
    const run = await gw.gateway.services.retention.runNow();
    expect(run.deleted.provider_calls).toBeGreaterThanOrEqual(1);
    expect(await prisma().providerCall.count({ where: { operation: "retention_old" } })).toBe(0);
    expect(await prisma().providerCall.count({ where: { operation: "retention_recent" } })).toBe(1);
    // The newer ones of the tests above are still there.
    expect(await prisma().providerCall.count({ where: { operation: "stk_push", transactionId } })).toBe(1);
  });
});
