import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, bearerClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * Reconciliation of a sandbox channel against the sandbox's own record (what it approved), with no fake: a clean
 * day, a push the customer never answered (pending on both sides, not a difference), a payment the sandbox has no
 * record of; the daily job (schedule -> one run per active channel and day, idempotent, and back tomorrow); roles
 * and tenants over REST and GraphQL. Jobs run only when a test runs them.
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" });
const today = () => new Date().toISOString().slice(0, 10);

let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let otherApi: ReturnType<typeof apiClient>;
let merchantId: number;
let channelId: number;
let otherChannelId: number;
const prisma = () => gw.gateway.db.prisma;

async function cardPayment(amount: number, number = "4242424242424242") {
  const init = await api.post("/api/transactions/initialize", { amount, email: "payer@example.com", currency: "KES", payment_channel_id: channelId });
  expect(init.status, init.text).toBe(200);
  await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card(number));
  return init.body.reference as string;
}

beforeAll(async () => {
  gw = await startTestGateway({ env: { SANDBOX_STK_DELAY_MS: "20", JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" } });
  const merchant = await gw.createMerchant();
  merchantId = merchant.id;
  api = apiClient(gw.url, merchant.testKey);
  otherApi = apiClient(gw.url, (await gw.createMerchant()).testKey);
  const created = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  expect(created.status, created.text).toBe(201);
  channelId = created.body.channel.id;
  const other = await otherApi.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  otherChannelId = other.body.channel.id;
});

afterAll(async () => {
  await gw?.close();
});

describe("a sandbox channel's day", () => {
  it("matches what the sandbox approved: no differences, the totals of both sides", async () => {
    const paid = [await cardPayment(10_000), await cardPayment(25_000)];
    await cardPayment(5_000, "4000000000000002"); // declined: failed here, never approved there
    const stk = await api.post("/api/momo/stk-push", { amount: 30_000, phone_number: "254708374149", payment_channel_id: channelId });
    expect(stk.status, stk.text).toBe(200);
    await until(() => prisma().transaction.findUniqueOrThrow({ where: { id: stk.body.transaction.id } }), (t) => t.status === "completed");
    const unanswered = await api.post("/api/momo/stk-push", { amount: 1_000, phone_number: "254700001019", payment_channel_id: channelId });
    expect(unanswered.status, unanswered.text).toBe(200);
    // Opened and never paid: the payer may still pay on the checkout page, so nothing asks or fails it.
    const unpaid = await api.post("/api/transactions/initialize", { amount: 2_000, email: "payer@example.com", currency: "KES", payment_channel_id: channelId });
    expect(unpaid.status, unpaid.text).toBe(200);

    const res = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "completed", items: [], error: null });
    expect(res.body.data.summary).toMatchObject({
      provider: "sandbox",
      differences: 0,
      settled_via_verify: 0,
      gateway: { count: 6, by_status: { completed: 3, failed: 1, pending: 2 }, completed_totals: { KES: 65_000 } },
      provider_record: { count: 3, by_status: { completed: 3 }, completed_totals: { KES: 65_000 } },
      settlements: null,
    });
    expect(res.body.data.summary).not.toHaveProperty("balance");
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: unanswered.body.transaction.id } })).status).toBe("pending");
    expect((await prisma().transaction.findUniqueOrThrow({ where: { reference: unpaid.body.reference } })).status).toBe("pending");
    expect(paid).toHaveLength(2);
  });

  it("reports a completed payment the sandbox has no record of as missing there", async () => {
    // A payment recorded by hand (e.g. before a restart emptied the sandbox's memory): the sandbox never approved it.
    const reference = await cardPayment(7_000);
    await prisma().transaction.update({ where: { reference }, data: { providerReference: "sbx_unknown000000" } });
    const res = await api.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(res.body.data.items).toEqual([
      expect.objectContaining({ kind: "missing_there", reference, provider_reference: "sbx_unknown000000", gateway_status: "completed", provider_status: null, gateway_amount: 7_000 }),
    ]);
  });

  it("only owners run one; viewers read them; nobody else sees them", async () => {
    const user = await gw.createUser(merchantId, "viewer");
    const login = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password, mode: "test" });
    const viewer = bearerClient(gw.url, login.body.data.access_token);
    const refused = await viewer.post("/v1/reconciliations", { payment_channel_id: channelId, date: today() });
    expect(refused.status, refused.text).toBe(403);
    const listed = await viewer.get("/v1/reconciliations");
    expect(listed.status).toBe(200);
    expect(listed.body.total).toBe(2);
    const mine = listed.body.data[0].id;
    expect((await otherApi.get(`/v1/reconciliations/${mine}`)).status).toBe(404);
    expect((await otherApi.get("/v1/reconciliations")).body.total).toBe(0);
    const gql = await otherApi.post("/graphql", { query: "{ reconciliations(first: 10) { totalCount } reconciliationsPage { ... on ReconciliationPage { total } } }" });
    expect(gql.body.data).toEqual({ reconciliations: { totalCount: 0 }, reconciliationsPage: { total: 0 } });
  });
});

describe("the daily job", () => {
  const yesterday = () => new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
  const scheduleJobs = () => prisma().job.findMany({ where: { kind: "reconciliation.schedule" } });

  it("queues yesterday's run of every active channel once a day, makes one report per channel and day, and comes back tomorrow", async () => {
    // The two channels existed yesterday; a third, made today, had no yesterday and gets no report.
    await prisma().paymentChannel.updateMany({ where: { id: { in: [channelId, otherChannelId] } }, data: { createdAt: new Date(Date.now() - 2 * 86_400_000) } });
    const madeToday = await api.post("/api/payment-channels/create", { name: "Sandbox today", provider: "sandbox", config: {} });
    expect(madeToday.status, madeToday.text).toBe(201);
    await gw.gateway.services.reconciliations.scheduleDaily();
    await gw.gateway.services.reconciliations.scheduleDaily(); // a restart: still one schedule
    const [scheduled, ...more] = await scheduleJobs();
    expect(more).toEqual([]);
    const nextRun = scheduled!.runAt.getTime();
    expect(nextRun).toBeGreaterThan(Date.now());
    expect(nextRun - Date.now()).toBeLessThanOrEqual(86_400_000);
    expect(scheduled!.runAt.toISOString()).toMatch(/T00:15:00\.000Z$/);

    for (let round = 0; round < 2; round++) {
      await prisma().job.updateMany({ where: { kind: "reconciliation.schedule" }, data: { runAt: new Date() } });
      expect(await gw.gateway.services.jobs.runDueJobs(["reconciliation.schedule"])).toBe(1);
      await gw.gateway.services.jobs.runDueJobs(["reconciliation.run"]);
    }
    const reports = await prisma().reconciliation.findMany({ where: { date: yesterday() }, orderBy: { channelId: "asc" } });
    expect(reports.map((r) => [r.channelId, r.status])).toEqual([
      [channelId, "completed"],
      [otherChannelId, "completed"],
    ]);
    expect(await prisma().job.count({ where: { kind: "reconciliation.run" } })).toBe(0);
    const [again, ...others] = await scheduleJobs();
    expect(others).toEqual([]);
    expect(again!.status).toBe("queued");
    expect(again!.runAt.getTime()).toBeGreaterThan(Date.now());
    expect(again!.runAt.toISOString()).toMatch(/T00:15:00\.000Z$/);
  });
});
