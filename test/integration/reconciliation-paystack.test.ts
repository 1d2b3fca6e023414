import { describe, expect, it } from "vitest";
import { BENCH_ENV, withPaystack, type PaystackBench } from "../support/benches.ts";
import { apiClient, type TestGateway } from "../support/gateway.ts";
import { runCli } from "../support/process.ts";
import { until } from "../support/wait.ts";

/**
 * Reconciliation of a Paystack channel against the loopback Paystack's GET /transaction (paged) and GET /settlement:
 * each kind of difference made by a real difference between the two records, the payment pending here that
 * Paystack settled completed through verify once (one event, one merchant webhook), a provider that cannot be
 * read, tenants, the CLI run as its own process, and a payment Paystack reversed by a chargeback the gateway has not
 * recorded as lost. Jobs run only when a test runs them.
 */
const EMAIL = "payer@example.com";
const today = () => new Date().toISOString().slice(0, 10);

/** Bound when the bench is up (beforeAll). */
let { fake, receiver, gw, api, channelId, webhookUrl } = {} as PaystackBench;
let otherApi: ReturnType<typeof apiClient>;
let liveApi: ReturnType<typeof apiClient>;
const prisma = () => gw.gateway.db.prisma;
const row = (reference: string) => prisma().transaction.findUniqueOrThrow({ where: { reference } });

async function initialize(amount = 250_000) {
  const res = await api.post("/api/transactions/initialize", { amount, email: EMAIL, currency: "NGN", payment_channel_id: channelId });
  expect(res.status, res.text).toBe(200);
  return res.body.reference as string;
}

/** Paid at Paystack, and completed here by its charge.success webhook (verified). */
async function paid(amount = 250_000) {
  const reference = await initialize(amount);
  await fake.pay(reference);
  await until(() => row(reference), (t) => t.status === "completed");
  return reference;
}

withPaystack({ merchant: "Lagos Books", webhooks: [{ path: "/hooks" }], env: { PAYSTACK_TIMEOUT_MS: "1500", ...BENCH_ENV } }, async (bench) => {
  ({ fake, receiver, gw, api, channelId, webhookUrl } = bench);
  liveApi = apiClient(gw.url, bench.merchant.liveKey);
  otherApi = apiClient(gw.url, (await gw.createMerchant("Other")).testKey);
});

describe("a Paystack channel's day", () => {
  let reportId: number;
  let settledHere: string;

  it("finds every kind of difference, pages through Paystack's list, sums its settlements, and settles a payment Paystack completed through verify", async () => {
    const matched = await paid(250_000);
    const amountDiffers = await paid(300_000);
    fake.transactions.get(amountDiffers)!.amount = 290_000; // Paystack recorded another amount
    const reversedThere = await paid(120_000);
    fake.transactions.get(reversedThere)!.status = "failed"; // Paystack says it failed; the gateway completed it
    const lostThere = await paid(80_000);
    fake.transactions.delete(lostThere); // Paystack has no record of it
    const outside = fake.inject({ reference: "paid-on-paystack-page", amount: 55_000 }); // paid at Paystack, unknown here
    const unpaid = await initialize(10_000); // pending on both sides: not a difference
    // Paid at Paystack with no webhook: pending here, success there.
    fake.switches.chargeWebhooks = false;
    settledHere = await initialize(70_000);
    await fake.pay(settledHere);
    fake.switches.chargeWebhooks = true;
    expect((await row(settledHere)).status).toBe("pending");
    fake.addSettlement({ total_amount: 500_000, total_fees: 7_500 });
    fake.addSettlement({ total_amount: 100_000, total_fees: 1_500, status: "pending" });
    fake.switches.listMaxPerPage = 2; // 6 transactions at Paystack: 3 pages
    const listCallsBefore = fake.requests.filter((r) => r.path.startsWith("/transaction?")).length;

    const res = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(res.status, res.text).toBe(201);
    const report = res.body.data;
    reportId = report.id;
    expect(report).toMatchObject({ payment_channel_id: channelId, date: today(), status: "completed", error: null });
    const pages = fake.requests.filter((r) => r.path.startsWith("/transaction?")).slice(listCallsBefore).map((r) => new URL(r.path, fake.url).searchParams);
    expect(pages.map((q) => q.get("page"))).toEqual(["1", "2", "3"]);
    // The day, and ten minutes on each side: a payment created here just before midnight is created there just after.
    const midnight = Date.parse(`${today()}T00:00:00.000Z`);
    expect(pages[0]!.get("from")).toBe(new Date(midnight - 600_000).toISOString());
    expect(pages[0]!.get("to")).toBe(new Date(midnight + 86_400_000 + 600_000 - 1).toISOString());

    const byReference = (reference: string) => report.items.filter((i: { reference: string }) => i.reference === reference);
    expect(byReference(matched)).toEqual([]);
    expect(byReference(unpaid)).toEqual([]);
    expect(byReference(amountDiffers)).toEqual([
      expect.objectContaining({ kind: "amount_mismatch", gateway_status: "completed", provider_status: "completed", gateway_amount: 300_000, provider_amount: 290_000, currency: "NGN", resolution: null }),
    ]);
    expect(byReference(reversedThere)).toEqual([expect.objectContaining({ kind: "status_mismatch", gateway_status: "completed", provider_status: "failed", resolution: null })]);
    expect(byReference(lostThere)).toEqual([expect.objectContaining({ kind: "missing_there", gateway_status: "completed", provider_status: null, gateway_amount: 80_000 })]);
    expect(byReference(outside.reference)).toEqual([
      expect.objectContaining({ kind: "missing_here", provider_reference: String(outside.id), gateway_status: null, provider_status: "completed", provider_amount: 55_000 }),
    ]);
    expect(byReference(settledHere)).toEqual([
      expect.objectContaining({ kind: "status_mismatch", gateway_status: "pending", provider_status: "completed", provider_amount: 70_000, resolution: "settled_via_verify" }),
    ]);
    expect(report.items).toHaveLength(5);
    expect(report.summary).toMatchObject({
      items: { missing_here: 1, missing_there: 1, status_mismatch: 2, amount_mismatch: 1 },
      differences: 5,
      settled_via_verify: 1,
      gateway: { count: 6, by_status: { completed: 5, pending: 1 } },
      provider_record: { count: 6, by_status: { completed: 4, failed: 1, pending: 1 } },
      settlements: { count: 2, statuses: { success: 1, pending: 1 }, totals: { NGN: { total: 600_000, fees: 9_000, settled: 591_000 } } },
    });
    expect(report.summary.gateway.completed_totals.NGN).toBe(250_000 + 300_000 + 120_000 + 80_000 + 70_000);
    expect(report.summary.provider_record.completed_totals.NGN).toBe(250_000 + 290_000 + 55_000 + 70_000);
  });

  it("settled the pending payment through the usual path: completed once, with one event and one merchant webhook, and not again on a second run", async () => {
    expect(await row(settledHere)).toMatchObject({ status: "completed", providerReference: String(fake.transactions.get(settledHere)!.id) });
    const again = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.id).not.toBe(reportId);
    expect(again.body.data.items.filter((i: { reference: string }) => i.reference === settledHere)).toEqual([]);
    expect(again.body.data.summary.settled_via_verify).toBe(0);
    const t = await row(settledHere);
    expect((await prisma().event.findMany({ where: { transactionId: t.id } })).map((e) => e.type)).toEqual(["transaction.completed"]);
    await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
    await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
    expect(receiver.received.filter((r) => r.json?.data?.reference === settledHere).map((r) => r.json.type)).toEqual(["transaction.completed"]);
  });

  it("lists the reports newest first and reads one with its items; another merchant or the other mode sees none of them", async () => {
    const list = await api.get(`/v1/reconciliations?payment_channel_id=${channelId}&limit=1`);
    expect(list.status, list.text).toBe(200);
    expect(list.body).toMatchObject({ status: "success", total: 2, page: 1, limit: 1, pages: 2 });
    expect(list.body.data[0].id).toBeGreaterThan(reportId);
    expect(list.body.data[0]).not.toHaveProperty("items");
    const one = await api.get(`/v1/reconciliations/${reportId}`);
    expect(one.status, one.text).toBe(200);
    expect(one.body.data.items).toHaveLength(5);
    for (const outsider of [otherApi, liveApi]) {
      expect((await outsider.get(`/v1/reconciliations/${reportId}`)).status).toBe(404);
      const theirs = await outsider.get("/v1/reconciliations");
      expect(theirs.body).toMatchObject({ status: "success", data: [], total: 0 });
      const run = await outsider.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
      expect(run.status, run.text).toBe(404);
    }
    const gql = await api.post("/graphql", {
      query: `query($c: Int) { reconciliations(first: 5, paymentChannelId: $c) { totalCount edges { node { databaseId status items { kind resolution } } } } }`,
      variables: { c: channelId },
    });
    expect(gql.body.data.reconciliations.totalCount).toBe(2);
    expect(gql.body.data.reconciliations.edges[1].node).toMatchObject({ databaseId: reportId, status: "completed" });
    expect(gql.body.data.reconciliations.edges[1].node.items).toContainEqual({ kind: "status_mismatch", resolution: "settled_via_verify" });
    const other = await otherApi.post("/graphql", { query: `{ reconciliation(id: ${reportId}) { __typename ... on Error { code } } }` });
    expect(other.body.data.reconciliation).toEqual({ __typename: "NotFoundError", code: "not_found" });
  });

  it("refuses bad input with the 400 envelope", async () => {
    for (const [body, field] of [
      [{ date: today() }, "payment_channel_id"],
      [{ payment_channel_id: channelId }, "date"],
      [{ payment_channel_id: channelId, date: "2026-02-30" }, "date"],
      [{ payment_channel_id: channelId, date: "3026-01-01" }, "date"],
      [{ payment_channel_id: "x", date: today() }, "payment_channel_id"],
    ] as const) {
      const res = await api.post("/v1/reconciliations", body);
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message).toContain(field);
    }
    expect((await api.get("/v1/reconciliations?payment_channel_id=abc")).status).toBe(400);
    expect((await api.get("/v1/reconciliations/not-an-id")).status).toBe(404);
  });

  it("keeps a failed report with the provider's error when Paystack cannot be read", async () => {
    fake.switches.failNext = { path: "/transaction?", status: 500, body: { status: false, message: "Server error" } };
    const res = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "failed", items: [] });
    expect(res.body.data.error).toMatch(/Paystack is unavailable \(HTTP 500\)/);
  });
});

describe("a payment across midnight", () => {
  it("created here just before midnight and at Paystack just after is missing from neither day", async () => {
    const reference = await paid(40_000);
    const midnight = Date.parse(`${today()}T00:00:00.000Z`);
    const yesterday = new Date(midnight - 86_400_000).toISOString().slice(0, 10);
    await prisma().transaction.update({ where: { reference }, data: { createdAt: new Date(midnight - 100) } });
    fake.transactions.get(reference)!.created_at = new Date(midnight + 100).toISOString();
    const before = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: yesterday });
    expect(before.body.data).toMatchObject({ status: "completed", items: [] });
    expect(before.body.data.summary).toMatchObject({ gateway: { count: 1 }, provider_record: { count: 1 } });
    const after = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(after.body.data.items.filter((i: { reference: string }) => i.reference === reference)).toEqual([]);
  });
});

describe("npm run cli -- reconcile", () => {
  const cliEnv = () => ({ ...gw.database.env, ENCRYPTION_KEY: gw.database.encryptionKeyHex, PAYSTACK_BASE_URL: fake.url, PAYSTACK_TIMEOUT_MS: "1500" });

  it("prints the report's summary and differences and exits 0, differences or not; a failed run exits 1", async () => {
    const { code, output } = await runCli(["reconcile", "--channel", String(channelId), "--date", today()], cliEnv());
    expect(code, output).toBe(0);
    const printed = JSON.parse(output.trim());
    expect(printed.reconciliation).toMatchObject({ channel_id: channelId, date: today(), status: "completed" });
    expect(printed.items_by_kind).toEqual({ missing_here: 1, missing_there: 1, status_mismatch: 1, amount_mismatch: 1, reversed_not_disputed: 0 });
    expect(printed.items).toContainEqual(expect.objectContaining({ kind: "amount_mismatch", gateway: "completed 300000 NGN", provider: "completed 290000 NGN" }));
    expect(await prisma().reconciliation.count({ where: { id: printed.reconciliation.id } })).toBe(1);

    fake.switches.failNext = { path: "/transaction?", status: 401, body: { status: false, message: "Invalid key" } };
    const failed = await runCli(["reconcile", "--channel", String(channelId), "--date", today()], cliEnv());
    expect(failed.code, failed.output).toBe(1);
    expect(failed.output).toMatch(/reconciliation \d+ of channel \d+ for \d{4}-\d\d-\d\d failed: Paystack rejected the channel's secret key/);

    const usage = await runCli(["reconcile", "--channel", String(channelId)], cliEnv());
    expect(usage.code).toBe(2);
    expect(usage.output).toMatch(/--date is required/);
    const unknown = await runCli(["reconcile", "--channel", "999999", "--date", today()], cliEnv());
    expect(unknown.code).toBe(1);
    expect(unknown.output).toMatch(/Payment channel 999999/);
  });
});

// After the CLI's run: these payments would change the day's counts it asserts.
describe("a payment Paystack reversed by a chargeback", () => {
  type Item = { kind: string; reference: string };
  const reconcile = async () => {
    const res = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "completed", error: null });
    return res.body.data as { id: number; items: Item[]; summary: { items: Record<string, number>; provider_record: { by_status: Record<string, number> } } };
  };
  const itemsOf = (report: { items: Item[] }, reference: string) => report.items.filter((i) => i.reference === reference);

  it("is reported as reversed_not_disputed while the gateway shows it completed and undisputed, and no longer once the gateway records the dispute lost", async () => {
    const reference = await paid(150_000);
    // The payer's bank wins by default at Paystack (auto-accepted), and no webhook reached the gateway.
    const dispute = fake.openDispute(reference);
    fake.resolveDispute(dispute.id, "auto-accepted");
    expect(fake.transactions.get(reference)!.status).toBe("reversed");
    expect(await row(reference)).toMatchObject({ status: "completed", disputeStatus: null });

    const before = await reconcile();
    expect(itemsOf(before, reference)).toEqual([
      {
        kind: "reversed_not_disputed", reference, provider_reference: String(fake.transactions.get(reference)!.id), gateway_status: "completed", provider_status: "reversed",
        gateway_amount: 150_000, provider_amount: 150_000, currency: "NGN", resolution: null,
      },
    ]);
    expect(before.summary.items.reversed_not_disputed).toBe(1);
    expect(before.summary.provider_record.by_status.reversed).toBe(1);
    const gql = await api.post("/graphql", { query: `query($id: Int!) { reconciliation(id: $id) { ... on Reconciliation { items { kind reference providerStatus } } } }`, variables: { id: before.id } });
    expect(gql.body.data.reconciliation.items).toContainEqual({ kind: "reversed_not_disputed", reference, providerStatus: "reversed" });

    // Paystack's charge.dispute.resolve reaches the gateway: it asks Paystack, and records the dispute lost.
    expect((await fake.sendDisputeWebhook(dispute.id, "charge.dispute.resolve", webhookUrl)).status).toBe(200);
    expect(await row(reference)).toMatchObject({ status: "completed", disputeStatus: "lost", amountChargedBack: 150_000n });
    const after = await reconcile();
    expect(itemsOf(after, reference)).toEqual([]);
    expect(after.summary.items.reversed_not_disputed).toBe(0);
  });

  it("is reported while the gateway's dispute is still open; a payment refunded here in full, which Paystack shows reversed, is not", async () => {
    const disputed = await paid(60_000);
    const dispute = fake.openDispute(disputed);
    expect((await fake.sendDisputeWebhook(dispute.id, "charge.dispute.create", webhookUrl)).status).toBe(200);
    expect(await row(disputed)).toMatchObject({ disputeStatus: "needs_response" });
    fake.resolveDispute(dispute.id, "auto-accepted"); // its resolve webhook lost on the way

    const refunded = await paid(45_000);
    const refund = await api.post("/v1/refunds", { transaction: refunded });
    expect(refund.status, refund.text).toBe(201);
    await until(() => row(refunded), (t) => t.amountRefunded === 45_000n);
    fake.transactions.get(refunded)!.status = "reversed"; // Paystack shows a payment refunded in full as reversed

    const report = await reconcile();
    expect(itemsOf(report, disputed)).toEqual([expect.objectContaining({ kind: "reversed_not_disputed", gateway_status: "completed", provider_status: "reversed", gateway_amount: 60_000 })]);
    expect(itemsOf(report, refunded)).toEqual([]);
  });
});
