import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient as plainApiClient, startTwoInstances, type TestGateway } from "../support/gateway.ts";
import { runLedgerCheck } from "../support/ledger-check.ts";
import { inParallel } from "../support/load.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { retrying, retryingUnavailable } from "../support/retry.ts";
import { RETRYABLE_ATTEMPTS } from "../support/timing.ts";
import { memoryLogger } from "../support/shared-budget.ts";
import { expectNothingMoreWithin, until, waitUntil } from "../support/wait.ts";

/** Requests retried on 503 + Retry-After as a client does: hundreds at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

/**
 * Exactly one invoice per subscription and period with the billing job run by two gateway instances at once on one
 * PostgreSQL and Redis (both run the job runner): 200 subscriptions on saved sandbox cards fall due at the same
 * moment, and each period is invoiced once, charged once and paid, each event delivered once; a few on the card
 * 4000 0000 0000 0341 are dunned across the instances to uncollectible with exactly one charge per attempt.
 * Everything is made over the real API (customers, their cards saved by paying once at the checkout, plans,
 * subscriptions) and counted in SQL.
 */
const SUBSCRIPTIONS = 200;
const DUNNED = 4;
/** SUBSCRIPTION_RETRY_SCHEDULE: two retries, so a dunned invoice is charged 3 times before it is uncollectible. */
const RETRIES = "2s,2s";
/** How far ahead the subscriptions start: every one is created by then (and one created later still bills at once). */
const LEAD_MS = 10_000;
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const BILLING_EVENTS = ["subscription.created", "subscription.updated", "subscription.canceled", "invoice.created", "invoice.paid", "invoice.payment_failed", "transaction.completed", "transaction.failed"];

describe("billing on two instances at once", () => {
  let redis: RedisServer;
  let a: TestGateway;
  let b: TestGateway;
  let receiver: WebhookReceiver;
  let apiA: ReturnType<typeof apiClient>;
  let apiB: ReturnType<typeof apiClient>;
  let merchantId: number;
  let sandboxChannel: number;
  const logsA = memoryLogger();
  const logsB = memoryLogger();
  /** Requests per webhook-id (the event's id); every one is answered 200, so a second is a duplicate. */
  const deliveries = new Map<string, number>();
  const prisma = () => a.gateway.db.prisma;
  let merchantKey: string;
  const api = (i: number) => (i % 2 ? apiB : apiA);
  const plainApi = (i: number) => plainApiClient(i % 2 ? b.url : a.url, merchantKey);

  beforeAll(async () => {
    redis = await startRedis();
    receiver = await startWebhookReceiver({
      respond: (req) => {
        const id = req.headers["webhook-id"]!;
        deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
        return 200;
      },
    });
    const env = {
      REDIS_URL: redis.url,
      RATE_LIMIT_ENABLED: "false",
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      JOB_POLL_INTERVAL_MS: "100",
      SUBSCRIPTION_RETRY_SCHEDULE: RETRIES,
    };
    [a, b] = await startTwoInstances({ env, logger: logsA.logger }, { logger: logsB.logger });
    const merchant = await a.createMerchant();
    merchantId = merchant.id;
    merchantKey = merchant.testKey;
    apiA = apiClient(a.url, merchant.testKey);
    apiB = apiClient(b.url, merchant.testKey);
    const channel = await apiA.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(channel.status, channel.text).toBe(201);
    sandboxChannel = channel.body.channel.id;
  });

  afterAll(async () => {
    await b?.close();
    // The ledger of everything both instances did, by the real CLI, before the database goes with the first.
    const ledger = a ? await runLedgerCheck(a.database) : { code: 0, output: "" };
    await a?.close();
    await receiver?.close();
    await redis?.stop();
    expect(ledger.code, ledger.output).toBe(0);
  });

  /** A customer with `number` saved: created and paid once at the checkout (save_payment_method) on instance i % 2. */
  async function customerWithCard(i: number, number: string): Promise<{ customer: number; method: string }> {
    const created = await api(i).post("/v1/customers", { email: `billing${i}-${number.slice(-4)}@multi.test` });
    expect(created.status, created.text).toBe(201);
    const customer = created.body.data.id as number;
    const init = await api(i).post("/api/transactions/initialize", { amount: 100, currency: "KES", customer });
    expect(init.status, init.text).toBe(200);
    const paid = await apiClient(i % 2 ? b.url : a.url).post(`/payment/checkout/${init.body.reference}/pay`, { card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123", save_payment_method: true });
    expect(paid.status, paid.text).toBe(200);
    const methods = await api(i).get(`/v1/customers/${customer}/payment-methods`);
    expect(methods.body.data, methods.text).toHaveLength(1);
    return { customer, method: methods.body.data[0].id as string };
  }

  /** Subscriptions to `plan` for each customer, all starting at `startAt`, made through both instances (each once per key). */
  async function subscribe(plan: string, customers: { customer: number; method: string }[], startAt: Date): Promise<string[]> {
    return inParallel(customers.length, 10, async (i) => {
      const { customer, method } = customers[i]!;
      // Keyed, so a 503 (every connection taken by the billing jobs of both instances, on a busy machine) is safely sent again, longer than retrying()'s 5 times.
      // A request sent once start_at has passed (a machine slow enough to outlast the lead) starts now, as a client would: the gateway refuses a start in the past.
      const body = () => ({ customer, plan, payment_method: method, start_at: new Date(Math.max(startAt.getTime(), Date.now())).toISOString() });
      const created = await retryingUnavailable(() => plainApi(i).post("/v1/subscriptions", body(), { "idempotency-key": `sub-${plan}-${customer}` }), 3 * RETRYABLE_ATTEMPTS);
      expect(created.status, created.text).toBe(201);
      return created.body.data.id as string;
    });
  }

  /** Invoices and their charges of the subscriptions, grouped in SQL: what "exactly once" is judged on. */
  async function countsOf(plan: string) {
    return prisma().$queryRaw<{ subscription: string; period_start: Date; invoices: bigint; status: string; attempts: number; charges: bigint; completed: bigint; failed: bigint }[]>`
      SELECT s.reference AS subscription, i.period_start, count(DISTINCT i.id) AS invoices, min(i.status) AS status, min(i.attempts) AS attempts,
             count(t.id) AS charges, count(t.id) FILTER (WHERE t.status = 'completed') AS completed, count(t.id) FILTER (WHERE t.status = 'failed') AS failed
      FROM subscriptions s JOIN plans p ON p.id = s.plan_id JOIN invoices i ON i.subscription_id = s.id LEFT JOIN transactions t ON t.invoice_id = i.id
      WHERE p.reference = ${plan}
      GROUP BY s.reference, i.period_start`;
  }

  it(`${SUBSCRIPTIONS} subscriptions due at the same moment: one invoice per period, one completed charge each, every event delivered once`, async () => {
    const cards = await inParallel(SUBSCRIPTIONS, 10, (i) => customerWithCard(i, "4242424242424242"));
    const hook = await apiB.post("/v1/webhooks", { url: `${receiver.url}/billing`, events: BILLING_EVENTS });
    expect(hook.status, hook.text).toBe(201);
    const plan = await apiA.post("/v1/plans", { name: "Multi", amount: 1_500, currency: "KES", interval: "month" });
    expect(plan.status, plan.text).toBe(201);
    const planId = plan.body.data.id as string;
    const firstEvent = (await prisma().event.aggregate({ _max: { id: true }, where: { merchantId } }))._max.id ?? 0n;

    const startAt = new Date(Date.now() + LEAD_MS);
    const subs = await subscribe(planId, cards, startAt);
    expect(new Set(subs).size).toBe(SUBSCRIPTIONS);

    await waitUntil(
      async () => (await prisma().invoice.count({ where: { subscription: { plan: { reference: planId } }, status: "paid" } })) === SUBSCRIPTIONS,
      `all ${SUBSCRIPTIONS} invoices paid`,
      120_000,
    );
    const counts = await countsOf(planId);
    expect(counts).toHaveLength(SUBSCRIPTIONS);
    expect(new Set(counts.map((c) => c.subscription))).toEqual(new Set(subs));
    // Subscriptions created before start_at (most of them) have it as their first period's start.
    expect(counts.every((c) => c.period_start.getTime() >= startAt.getTime())).toBe(true);
    expect(counts.filter((c) => !(c.invoices === 1n && c.status === "paid" && c.attempts === 1 && c.charges === 1n && c.completed === 1n))).toEqual([]);
    // The unique keys hold in the whole database: no second invoice for a period, no second charge for an attempt.
    const [dupes] = await prisma().$queryRaw<{ invoices: bigint; charges: bigint }[]>`
      SELECT (SELECT count(*) FROM (SELECT 1 FROM invoices GROUP BY subscription_id, period_start HAVING count(*) > 1) d) AS invoices,
             (SELECT count(*) FROM (SELECT 1 FROM transactions WHERE invoice_id IS NOT NULL GROUP BY invoice_id, invoice_attempt HAVING count(*) > 1) d) AS charges`;
    expect(dupes).toEqual({ invoices: 0n, charges: 0n });
    const charges = await prisma().transaction.findMany({ where: { invoice: { subscription: { plan: { reference: planId } } } }, select: { status: true, amount: true, channelId: true } });
    expect(charges).toHaveLength(SUBSCRIPTIONS);
    expect(charges.every((t) => t.status === "completed" && t.amount === 1_500n && t.channelId === sandboxChannel)).toBe(true);

    // Events: one invoice.created, invoice.paid, subscription.updated and transaction.completed per subscription.
    const events = await prisma().event.findMany({ where: { merchantId, id: { gt: firstEvent }, type: { in: BILLING_EVENTS } }, select: { id: true, type: true } });
    const byType = (type: string) => events.filter((e) => e.type === type).length;
    expect({ created: byType("subscription.created"), updated: byType("subscription.updated"), invoices: byType("invoice.created"), paid: byType("invoice.paid"), completed: byType("transaction.completed") })
      .toEqual({ created: SUBSCRIPTIONS, updated: SUBSCRIPTIONS, invoices: SUBSCRIPTIONS, paid: SUBSCRIPTIONS, completed: SUBSCRIPTIONS });
    // Each reaches the endpoint exactly once (answered 200 the first time), whichever instance delivered it.
    await until(() => deliveries.size, (n) => n >= events.length, 60_000);
    await expectNothingMoreWithin(1_000, () => receiver.received.length, "no second delivery of an event");
    expect(new Set(deliveries.keys())).toEqual(new Set(events.map((e) => e.id.toString())));
    expect([...deliveries.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(await prisma().webhookDelivery.count({ where: { eventId: { gt: firstEvent }, NOT: { status: "succeeded", attempts: 1 } } })).toBe(0);

    // Both instances ran the billing jobs (figures, not a bound: which instance claims which job is up to the race).
    const split = { a: logsA.count("info", /saved card charge sent/), b: logsB.count("info", /saved card charge sent/) };
    expect(split.a + split.b).toBe(SUBSCRIPTIONS);
    console.info(`billing-multi: invoice charges made by instance A ${split.a}, by B ${split.b}`);
  });

  it(`dunning across the instances: ${DUNNED} subscriptions on the 0341 card end uncollectible after exactly 3 charges each`, async () => {
    const cards = await inParallel(DUNNED, DUNNED, (i) => customerWithCard(1_000 + i, "4000000000000341"));
    const plan = await apiB.post("/v1/plans", { name: "Dunned", amount: 2_000, currency: "KES", interval: "week" });
    expect(plan.status, plan.text).toBe(201);
    const planId = plan.body.data.id as string;
    const subs = await subscribe(planId, cards, new Date(Date.now() + 2_000));

    const ended = await until(
      () => Promise.all(subs.map((id, i) => api(i).get(`/v1/subscriptions/${id}`))),
      (answers) => answers.every((r) => r.body?.data?.status === "unpaid"),
      120_000,
    );
    expect(ended.map((r) => r.body.data)).toEqual(subs.map(() => expect.objectContaining({ status: "unpaid", next_invoice_at: null })));
    const counts = await countsOf(planId);
    expect(counts).toHaveLength(DUNNED);
    expect(counts.filter((c) => !(c.invoices === 1n && c.status === "uncollectible" && c.attempts === 3 && c.charges === 3n && c.failed === 3n))).toEqual([]);
    for (const [i, id] of subs.entries()) {
      const [invoice] = (await api(i).get(`/v1/invoices?subscription=${id}`)).body.data;
      expect(invoice).toMatchObject({ status: "uncollectible", attempts: 3, next_attempt_at: null });
      expect(invoice.charges.map((c: { attempt: number; status: string; failure_code: string }) => [c.attempt, c.status, c.failure_code]).sort()).toEqual([
        [1, "failed", "card_declined"],
        [2, "failed", "card_declined"],
        [3, "failed", "card_declined"],
      ]);
    }
    const failures = await prisma().event.findMany({ where: { merchantId, type: "invoice.payment_failed" }, select: { payload: true } });
    expect(failures.map((e) => (e.payload as { invoice: { subscription: string } }).invoice.subscription).sort()).toEqual(subs.flatMap((id) => [id, id, id]).sort());
    // Nothing more is charged once it is uncollectible: no collect job left, no fourth charge a while later.
    await expectNothingMoreWithin(3_000, async () => (await countsOf(planId)).map((c) => c.charges), "no charge after the last retry");
    expect(await prisma().job.count({ where: { kind: "invoice.collect" } })).toBe(0);
  });
});
