import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDemoMerchantIfEmpty } from "../../src/demo.ts";
import { apiClient, bearerClient, paidTransaction, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { csvRecords } from "../support/csv.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";

/**
 * Issue 41, fees and net everywhere: a channel's fee schedule (percentage, fixed part, cap) fixes each payment's fee
 * when it completes; a later schedule never changes it. Fee and net read the same on verify, the /api list, GraphQL,
 * the balance transactions and the transactions CSV; the ledger stays clean (`ledger check`, after all).
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" };

let gw: TestGateway;
let merchant: TestMerchant;
let api: ReturnType<typeof apiClient>;
let channelId: number;

type Client = ReturnType<typeof apiClient>;
const gql = async (client: Client, query: string, variables?: Record<string, unknown>) => {
  const res = await client.post("/graphql", { query, variables });
  expect(res.status, res.text).toBe(200);
  return res.body as { data: any; errors?: { message: string; extensions?: { code?: string } }[] };
};

const UPDATE = `mutation($input: UpdatePaymentChannelInput!) {
  updatePaymentChannel(input: $input) { __typename ... on PaymentChannel { feePercentBps feeFixed feeCap name } ... on Error { code message } }
}`;
const PREVIEW = `query($amount: BigInt!, $bps: Int!, $fixed: BigInt!, $cap: BigInt) {
  feePreview(amount: $amount, feePercentBps: $bps, feeFixed: $fixed, feeCap: $cap) { __typename ... on FeePreview { amount fee net } ... on Error { code message } }
}`;

const pay = (amount: number) => paidTransaction(gw.url, merchant.testKey, { amount, email: "payer@example.com", currency: "KES" }, CARD);
const verify = async (reference: string) => {
  const res = await api.get(`/api/transactions/verify/${reference}`);
  expect(res.status, res.text).toBe(200);
  return res.body.transaction;
};

/** What each place says a payment's fee and net are: verify, the /api list, GraphQL, the balance transaction, the CSV row. */
async function feeEverywhere(reference: string) {
  const verified = await verify(reference);
  const listed = (await api.get(`/api/transactions/list?search=${reference}`)).body.data[0];
  const graph = (await gql(api, `query($r: String!) { transaction(reference: $r) { ... on Transaction { fee net } } }`, { r: reference })).data.transaction;
  const balance = (await api.get(`/v1/balance/transactions?limit=100&payment_channel_id=${channelId}`)).body.data.find((i: any) => i.source_reference === reference && i.type === "payment");
  const csv = csvRecords((await api.get(`/v1/reports/transactions.csv?search=${reference}`)).text)[0]!;
  return {
    verify: [verified.fee, verified.net],
    list: [listed.fee, listed.net],
    graphql: [graph.fee, graph.net],
    balance: [balance.fee, balance.net],
    csv: [Number(csv.fee), Number(csv.net)],
  };
}

const same = (fee: number, net: number) => ({ verify: [fee, net], list: [fee, net], graphql: [fee, net], balance: [fee, net], csv: [fee, net] });

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
  merchant = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
  // 1.5 % plus KES 10.00, never more than KES 20.00.
  const created = await api.post("/api/payment-channels/create", { name: "Cards", provider: "sandbox", config: {}, fee_percent_bps: 150, fee_fixed: 1_000, fee_cap: 2_000 });
  expect(created.status, created.text).toBe(201);
  expect(created.body.channel).toMatchObject({ fee_percent_bps: 150, fee_fixed: 1_000, fee_cap: 2_000 });
  channelId = created.body.channel.id;
});
afterAll(() => gw?.close());
afterAll(() => expectCleanLedger(gw));

describe("a channel's fee schedule", () => {
  it("feePreview computes as payments are charged: half away from zero, the fixed part added, the cap a ceiling", async () => {
    const preview = async (amount: number, bps: number, fixed: number, cap: number | null = null) =>
      (await gql(api, PREVIEW, { amount, bps, fixed, cap })).data.feePreview;
    expect(await preview(100_000, 150, 0)).toEqual({ __typename: "FeePreview", amount: 100_000, fee: 1_500, net: 98_500 });
    expect(await preview(100, 150, 0)).toMatchObject({ fee: 2 }); // 1.5 -> 2
    expect(await preview(33, 150, 0)).toMatchObject({ fee: 0 }); // 0.495 -> 0
    expect(await preview(100_000, 150, 1_000, 2_000)).toMatchObject({ fee: 2_000, net: 98_000 });
    expect(await preview(10_000, 150, 1_000, 2_000)).toMatchObject({ fee: 1_150 });
    expect(await preview(100_000, 150, 0, 0)).toMatchObject({ fee: 0 });
    expect(await preview(100, 10_001, 0)).toMatchObject({ __typename: "ValidationError", message: expect.stringContaining("fee_percent_bps") });
  });

  it("a payment's fee is capped, fixed when it completes, and read the same on verify, lists, GraphQL, balance transactions and the CSV", async () => {
    const big = await pay(100_000); // 1500 + 1000 = 2500, capped at 2000
    const small = await pay(10_000); // 150 + 1000 = 1150, under the cap
    expect(await feeEverywhere(big)).toEqual(same(2_000, 98_000));
    expect(await feeEverywhere(small)).toEqual(same(1_150, 8_850));

    // A new schedule: 3 %, no fixed part, no cap. The payments already made keep their fees; a new one uses it.
    const updated = await gql(api, UPDATE, { input: { id: channelId, feePercentBps: 300, feeFixed: 0, removeFeeCap: true } });
    expect(updated.data.updatePaymentChannel).toMatchObject({ __typename: "PaymentChannel", feePercentBps: 300, feeFixed: 0, feeCap: null });
    expect((await api.get("/api/payment-channels/list")).body.channels[0]).toMatchObject({ fee_percent_bps: 300, fee_fixed: 0, fee_cap: null });
    expect(await feeEverywhere(big)).toEqual(same(2_000, 98_000));
    expect(await feeEverywhere(small)).toEqual(same(1_150, 8_850));
    const after = await pay(100_000);
    expect(await feeEverywhere(after)).toEqual(same(3_000, 97_000));
    // net alone, beside a relation (a Prisma read, not the summary one), and in a page: still amount - fee.
    const alone = await gql(api, `query($r: String!) { transaction(reference: $r) { ... on Transaction { net channel { name } } } }`, { r: big });
    expect(alone.data.transaction).toEqual({ net: 98_000, channel: { name: "Cards" } });
    const page = await gql(api, `query($s: String) { transactionsPage(search: $s) { ... on TransactionPage { items { net } } } }`, { s: small });
    expect(page.data.transactionsPage.items).toEqual([{ net: 8_850 }]);

    // The balance's fees are the sum of the fees fixed on the payments.
    const balance = (await api.get(`/v1/balance?payment_channel_id=${channelId}`)).body.data[0];
    expect(balance).toMatchObject({ collected: 210_000, fees: 6_150, available: 203_850 });
  });

  it("verify adds fee and net after the published fields (and the gateway's other extras), null while pending", async () => {
    const init = await api.post("/api/transactions/initialize", { amount: 5_000, email: "payer@example.com", metadata: { order: 7 } });
    const pending = await verify(init.body.reference);
    expect(Object.keys(pending)).toEqual([
      "id", "reference", "amount", "status", "created_at", "payment_method", "currency", "client_reference", "provider_reference",
      "failure_code", "failure_reason", "amount_refunded", "refunded", "disputed", "dispute_status", "fee", "net", "metadata",
    ]);
    expect(pending).toMatchObject({ status: "pending", fee: null, net: null });
    const csv = await api.get(`/v1/reports/transactions.csv?search=${init.body.reference}`);
    expect(csv.text.split("\r\n")[0]!.split(",").slice(-2)).toEqual(["fee", "net"]);
    expect(csvRecords(csv.text)[0]).toMatchObject({ fee: "", net: "" });
  });

  it("the transaction.completed event carries the fee", async () => {
    const reference = await pay(20_000);
    const events = await gql(api, `query($r: String!) { transaction(reference: $r) { ... on Transaction { databaseId } } }`, { r: reference });
    const id = events.data.transaction.databaseId as number;
    const rows = await gw.gateway.db.prisma.event.findMany({ where: { transactionId: id, type: "transaction.completed" } });
    expect((rows[0]!.payload as any).transaction).toMatchObject({ reference, amount: 20_000, fee: 600 });
  });

  it("refuses a bad cap, and a cap set and removed at once", async () => {
    const bad = await gql(api, UPDATE, { input: { id: channelId, feeCap: -1 } });
    expect(bad.data.updatePaymentChannel).toMatchObject({ __typename: "ValidationError", message: "fee_cap: must be an integer from 0 to 10^12 (minor units)" });
    const both = await gql(api, UPDATE, { input: { id: channelId, feeCap: 5, removeFeeCap: true } });
    expect(both.data.updatePaymentChannel).toMatchObject({ __typename: "ValidationError", message: expect.stringContaining("fee_cap") });
  });

  it("name and fees are changed by those who may change the channel's credentials; a viewer may not; activate and deactivate are writes", async () => {
    const viewer = bearerClient(gw.url, await gw.signIn(merchant.id, "viewer"));
    const refused = await gql(viewer, UPDATE, { input: { id: channelId, feePercentBps: 0 } });
    expect(refused.errors?.[0]?.extensions?.code).toBe("forbidden");
    const owner = bearerClient(gw.url, await gw.signIn(merchant.id, "owner"));
    const renamed = await gql(owner, UPDATE, { input: { id: channelId, name: "Cards (sandbox)" } });
    expect(renamed.data.updatePaymentChannel).toMatchObject({ name: "Cards (sandbox)", feePercentBps: 300 });
    const off = await gql(owner, `mutation($id: Int!) { deactivatePaymentChannel(id: $id) { ... on PaymentChannel { isActive isDefault } } }`, { id: channelId });
    expect(off.data.deactivatePaymentChannel).toEqual({ isActive: false, isDefault: false });
    const on = await gql(owner, `mutation($id: Int!) { activatePaymentChannel(id: $id) { ... on PaymentChannel { isActive isDefault } } }`, { id: channelId });
    expect(on.data.activatePaymentChannel).toEqual({ isActive: true, isDefault: false });
    const viewerActivate = await gql(viewer, `mutation($id: Int!) { activatePaymentChannel(id: $id) { __typename } }`, { id: channelId });
    expect(viewerActivate.errors?.[0]?.extensions?.code).toBe("forbidden");
    await gql(owner, `mutation($id: Int!) { setDefaultPaymentChannel(id: $id) { __typename } }`, { id: channelId });
  });
});

describe("the demo merchant's sandbox channel", () => {
  it("charges 1.5 %, no fixed part, no cap: the first payment shows a fee", async () => {
    // The gateway's database already has merchants, so the demo is made in a fresh gateway of its own.
    const fresh = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    try {
      const demo = await createDemoMerchantIfEmpty(fresh.gateway.services);
      const demoApi = apiClient(fresh.url, demo!.testKey);
      expect((await demoApi.get("/api/payment-channels/list")).body.channels).toMatchObject([{ fee_percent_bps: 150, fee_fixed: 0, fee_cap: null }]);
      const reference = await paidTransaction(fresh.url, demo!.testKey, { amount: 100_000, email: "payer@example.com" }, CARD);
      expect((await demoApi.get(`/api/transactions/verify/${reference}`)).body.transaction).toMatchObject({ amount: 100_000, fee: 1_500, net: 98_500 });
      expect((await expectCleanLedger(fresh)) ?? "clean").toBe("clean");
    } finally {
      await fresh.close();
    }
  });
});
