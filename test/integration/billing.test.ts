import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { INVOICE_LINKS, insertInvoicesForPeriods, invoicesToCollect, readInvoices, readSubscriptions, SUBSCRIPTION_LINKS } from "../../src/modules/billing/store.ts";
import { transactionSnapshot } from "../../src/modules/transactions/snapshot.ts";
import { graphql } from "../gql/index.ts";
import { apiClient } from "../support/gateway.ts";
import { collect, wsClient } from "../support/subscriptions.ts";
import { withSandboxMerchants, type SandboxMerchants } from "../support/sandbox-merchants.ts";
import { until } from "../support/wait.ts";

/**
 * Recurring billing over real HTTP on the sandbox: plans, subscriptions on saved cards, one invoice per period paid
 * by an ordinary transaction, dunning on the retry schedule, cancellation, and test clocks that run a year of
 * billing in one advance. The ledger is checked clean at the end (withSandboxMerchants).
 */
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
let seq = 0;
const DAY = 86_400_000;

const BillingEvents = graphql(`
  subscription BillingInvoiceEvents {
    invoiceEvents(ready: true) { type invoice { id status attempts amountDue transactionReference } }
  }
`);

describe("recurring billing on the sandbox", () => {
  const bench = withSandboxMerchants({ WEBHOOK_ALLOW_PRIVATE_URLS: "true", JOB_POLL_INTERVAL_MS: "100" });
  let receiver: WebhookReceiver;
  afterAll(() => receiver?.close());
  let { gw, api, otherApi, merchantId } = {} as SandboxMerchants;
  beforeAll(() => {
    ({ gw, api, otherApi, merchantId } = bench);
  });
  const db = () => gw.gateway.db.prisma;

  /** A customer (on `clock`, if given) with a card saved by paying once with it. */
  async function customerWithCard(number = "4242424242424242", clock?: string): Promise<{ customer: number; method: string }> {
    const created = await api.post("/v1/customers", { email: `sub${process.pid}-${++seq}@example.com`, ...(clock ? { test_clock: clock } : {}) });
    expect(created.status, created.text).toBe(201);
    const customer = created.body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 100, currency: "KES", customer });
    const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, { card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123", save_payment_method: true });
    expect(paid.status, paid.text).toBe(200);
    const methods = await api.get(`/v1/customers/${customer}/payment-methods`);
    return { customer, method: methods.body.data[0].id };
  }

  async function plan(body: Record<string, unknown> = {}) {
    const created = await api.post("/v1/plans", { name: "Gold", amount: 2_500, currency: "KES", interval: "month", ...body });
    expect(created.status, created.text).toBe(201);
    return created.body.data.id as string;
  }

  async function clock(at: string) {
    const created = await api.post("/v1/test-clocks", { frozen_time: at });
    expect(created.status, created.text).toBe(201);
    return created.body.data.id as string;
  }

  /** Advances the clock and waits, as a client would, until it is ready again. */
  async function advance(id: string, to: string) {
    const moved = await api.post(`/v1/test-clocks/${id}/advance`, { frozen_time: to });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.frozen_time).toBe(new Date(to).toISOString());
    await until(() => api.get(`/v1/test-clocks/${id}`), (r) => r.body?.data?.status === "ready");
  }

  const invoicesOf = async (sub: string) => (await api.get(`/v1/invoices?subscription=${sub}&limit=100`)).body.data as Record<string, any>[];
  const eventTypes = async (sub: string) =>
    (await db().event.findMany({ where: { merchantId, type: { startsWith: "subscription." } }, orderBy: { id: "asc" } }))
      .filter((e) => (e.payload as any).subscription.id === sub)
      .map((e) => e.type);

  it("plans: create, read, list; bad input is a 400 naming the field; another merchant's is not found", async () => {
    const created = await api.post("/v1/plans", { name: "Silver", amount: 1_000, currency: "kes", interval: "week", interval_count: 2, trial_days: 3, metadata: { tier: "s" } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ id: expect.stringMatching(/^pln_[0-9a-z]{20}$/), name: "Silver", amount: 1_000, currency: "KES", interval: "week", interval_count: 2, trial_days: 3, metadata: { tier: "s" } });
    expect((await api.get(`/v1/plans/${created.body.data.id}`)).body.data).toEqual(created.body.data);
    expect((await api.get("/v1/plans")).body.data.map((p: { id: string }) => p.id)).toContain(created.body.data.id);
    expect((await otherApi.get(`/v1/plans/${created.body.data.id}`)).status).toBe(404);
    for (const [bad, field] of [[{ interval: "fortnight" }, "interval"], [{ amount: 0 }, "amount"], [{ amount: 1.5 }, "amount"], [{ currency: "XYZ" }, "currency"], [{ interval_count: 0 }, "interval_count"], [{ name: "a\u0000b" }, "name"]] as const) {
      const refused = await api.post("/v1/plans", { name: "Bad", amount: 100, currency: "KES", interval: "month", ...(bad as Record<string, unknown>) });
      expect(refused.status, `${JSON.stringify(bad)}: ${refused.text}`).toBe(400);
      expect(refused.body.message).toMatch(new RegExp(field.replace("_", "_?"), "i"));
    }
    expect((await api.get("/v1/plans/pln_nope")).status).toBe(404);
  });

  it("a subscription bills its first period at once: one invoice, paid by an ordinary card transaction; webhooks carry the /v1 shapes", async () => {
    const { customer, method } = await customerWithCard();
    const planId = await plan({ amount: 4_900 });
    const created = await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method, metadata: { seat: 3 } });
    expect(created.status, created.text).toBe(201);
    const sub = created.body.data;
    expect(sub).toMatchObject({ id: expect.stringMatching(/^sub_/), customer, plan: planId, payment_method: method, status: "active", amount: 4_900, currency: "KES", cancel_at_period_end: false, test_clock: null, metadata: { seat: 3 } });

    const invoice = (await until(() => invoicesOf(sub.id), (list) => list[0]?.status === "paid"))[0]!;
    expect(invoice).toMatchObject({ id: expect.stringMatching(/^in_/), subscription: sub.id, customer, amount_due: 4_900, currency: "KES", status: "paid", attempts: 1, next_attempt_at: null, period_start: sub.current_period_start, period_end: sub.current_period_end });
    expect(invoice.charges).toEqual([expect.objectContaining({ attempt: 1, status: "completed", transaction_reference: invoice.transaction_reference })]);
    const verify = await api.get(`/api/transactions/verify/${invoice.transaction_reference}`);
    expect(verify.body).toMatchObject({ status: "completed", transaction: { amount: 4_900 } });
    expect((await api.get(`/v1/invoices/${invoice.id}`)).body.data).toEqual(invoice);
    expect((await otherApi.get(`/v1/invoices/${invoice.id}`)).status).toBe(404);
    // The charge was announced as any payment is (its pending snapshot written in SQL with the row): the same object
    // the model's snapshot gives for the row as it was then.
    const charge = await db().transaction.findUniqueOrThrow({ where: { reference: invoice.transaction_reference } });
    const announced = await db().event.findFirstOrThrow({ where: { transactionId: charge.id, type: "transaction.pending" } });
    const asPending = { ...charge, status: "pending" as const, providerReference: null, completedAt: null, fee: null, updatedAt: new Date((announced.payload as any).transaction.updated_at) };
    expect(announced.payload).toEqual(JSON.parse(JSON.stringify({ transaction: transactionSnapshot(asPending) })));
    expect(charge).toMatchObject({ paymentMethod: "card", customerId: customer, invoiceAttempt: 1, metadata: { invoice: invoice.id, subscription: sub.id } });

    // The events' data is the /v1 shape, key for key.
    const paidEvent = await until(() => db().event.findFirst({ where: { merchantId, type: "invoice.paid" }, orderBy: { id: "desc" } }), (e) => (e?.payload as any)?.invoice?.id === invoice.id);
    expect(Object.keys((paidEvent!.payload as any).invoice).sort()).toEqual(Object.keys(invoice).sort());
    const subNow = (await api.get(`/v1/subscriptions/${sub.id}`)).body.data;
    const subEvent = await db().event.findFirst({ where: { merchantId, type: "subscription.updated" }, orderBy: { id: "desc" } });
    expect(Object.keys((subEvent!.payload as any).subscription).sort()).toEqual(Object.keys(subNow).sort());
    expect(await eventTypes(sub.id)).toEqual(["subscription.created", "subscription.updated"]);
    expect(subNow.next_invoice_at).toBe(sub.current_period_end);
    const listed = await api.get(`/v1/subscriptions?customer=${customer}`);
    expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([sub.id]);
    expect((await api.get("/v1/subscriptions?status=bogus")).status).toBe(400);
  });

  it("refuses a method that is detached, another customer's, or not the caller's; a start in the past", async () => {
    const { customer, method } = await customerWithCard();
    const other = await customerWithCard();
    const planId = await plan();
    expect((await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: other.method })).status).toBe(404);
    expect((await otherApi.post("/v1/subscriptions", { customer, plan: planId, payment_method: method })).status).toBe(404);
    expect((await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method, start_at: "2001-01-01T00:00:00Z" })).status).toBe(400);
    expect((await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method, start_at: "soon" })).status).toBe(400);
    expect((await api.raw(`/v1/payment-methods/${method}`, { method: "DELETE" })).status).toBe(200);
    const detached = await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method });
    expect(detached.status).toBe(409);
    expect(detached.body.code).toBe("payment_method_detached");
  });

  it("a test clock runs a trial and a year of monthly billing in one advance: one paid invoice per period, in order", async () => {
    const clockId = await clock("2027-01-31T09:00:00Z");
    const { customer, method } = await customerWithCard("4242424242424242", clockId);
    expect((await api.get(`/v1/customers/${customer}`)).body.data.test_clock).toBe(clockId);
    const planId = await plan({ amount: 2_500, trial_days: 7 });
    const sub = (await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method })).body.data;
    expect(sub).toMatchObject({ status: "trialing", trial_end: "2027-02-07T09:00:00.000Z", current_period_start: "2027-01-31T09:00:00.000Z", current_period_end: "2027-02-07T09:00:00.000Z", test_clock: clockId });
    expect(await invoicesOf(sub.id)).toEqual([]);

    await advance(clockId, "2027-02-08T00:00:00Z");
    const first = await invoicesOf(sub.id);
    expect(first).toMatchObject([{ status: "paid", period_start: "2027-02-07T09:00:00.000Z", period_end: "2027-03-07T09:00:00.000Z", paid_at: "2027-02-07T09:00:00.000Z" }]);
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data.status).toBe("active");

    await advance(clockId, "2028-01-31T00:00:00Z");
    const year = (await invoicesOf(sub.id)).reverse();
    expect(year.map((i) => i.period_start.slice(0, 10))).toEqual([
      "2027-02-07", "2027-03-07", "2027-04-07", "2027-05-07", "2027-06-07", "2027-07-07", "2027-08-07",
      "2027-09-07", "2027-10-07", "2027-11-07", "2027-12-07", "2028-01-07",
    ]);
    expect(year.every((i) => i.status === "paid" && i.attempts === 1 && i.amount_due === 2_500)).toBe(true);
    const charges = await db().transaction.findMany({ where: { invoice: { subscription: { reference: sub.id } } } });
    expect(charges).toHaveLength(12);
    expect(charges.every((t) => t.status === "completed" && t.amount === 2_500n && t.customerId === customer)).toBe(true);
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data).toMatchObject({ current_period_start: "2028-01-07T09:00:00.000Z", next_invoice_at: "2028-02-07T09:00:00.000Z" });

    expect((await api.post(`/v1/test-clocks/${clockId}/advance`, { frozen_time: "2027-06-01T00:00:00Z" })).status).toBe(400);
  });

  it("dunning: a declined card is retried on the schedule, the subscription past_due, then unpaid with the invoice uncollectible", async () => {
    const clockId = await clock("2027-03-01T00:00:00Z");
    const { customer, method } = await customerWithCard("4000000000000341", clockId);
    const planId = await plan({ amount: 3_000 });
    const sub = (await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method })).body.data;
    const failing = (await until(() => invoicesOf(sub.id), (list) => list[0]?.attempts === 1))[0]!;
    expect(failing).toMatchObject({ status: "open", attempts: 1, next_attempt_at: "2027-03-02T00:00:00.000Z", charges: [{ attempt: 1, status: "failed", failure_code: "card_declined" }] });
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data.status).toBe("past_due");

    await advance(clockId, "2027-03-04T12:00:00Z"); // the retries at +1 d and then +3 d after it (03-05) : one more so far
    expect((await invoicesOf(sub.id))[0]).toMatchObject({ attempts: 2, next_attempt_at: "2027-03-05T00:00:00.000Z", status: "open" });
    await advance(clockId, "2027-03-20T00:00:00Z");
    const done = (await invoicesOf(sub.id))[0]!;
    expect(done).toMatchObject({ status: "uncollectible", attempts: 4, next_attempt_at: null });
    expect(done.charges.map((c: { status: string }) => c.status)).toEqual(["failed", "failed", "failed", "failed"]);
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data).toMatchObject({ status: "unpaid", next_invoice_at: null });
    const failures = await db().event.count({ where: { merchantId, type: "invoice.payment_failed", payload: { path: ["invoice", "id"], equals: done.id } } });
    expect(failures).toBe(4);
    // Unpaid: no further period is invoiced, however far the clock goes.
    await advance(clockId, "2027-06-01T00:00:00Z");
    expect(await invoicesOf(sub.id)).toHaveLength(1);
    expect(await eventTypes(sub.id)).toEqual(["subscription.created", "subscription.updated", "subscription.updated", "subscription.updated"]);
  });

  it("a method detached after subscribing: the next period's attempt fails with no charge made, and is retried on the schedule", async () => {
    const clockId = await clock("2027-07-01T00:00:00Z");
    const { customer, method } = await customerWithCard("4242424242424242", clockId);
    const planId = await plan({ amount: 1_700 });
    const sub = (await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method })).body.data;
    await until(() => invoicesOf(sub.id), (list) => list[0]?.status === "paid");
    expect((await api.raw(`/v1/payment-methods/${method}`, { method: "DELETE" })).status).toBe(200);

    await advance(clockId, "2027-08-01T12:00:00Z");
    const [second] = await invoicesOf(sub.id);
    expect(second).toMatchObject({ status: "open", period_start: "2027-08-01T00:00:00.000Z", attempts: 1, next_attempt_at: "2027-08-02T00:00:00.000Z", charges: [] });
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data.status).toBe("past_due");
    expect(await db().transaction.count({ where: { invoice: { reference: second!.id } } })).toBe(0);
    const failed = await db().event.count({ where: { merchantId, type: "invoice.payment_failed", payload: { path: ["invoice", "id"], equals: second!.id } } });
    expect(failed).toBe(1);
  });

  it("cancel at period end ends it without another invoice; cancel now ends it at once", async () => {
    const clockId = await clock("2027-05-10T00:00:00Z");
    const { customer, method } = await customerWithCard("4242424242424242", clockId);
    const planId = await plan({ interval: "week" });
    const sub = (await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method })).body.data;
    await until(() => invoicesOf(sub.id), (list) => list[0]?.status === "paid");
    const marked = await api.post(`/v1/subscriptions/${sub.id}/cancel`, { at_period_end: true });
    expect(marked.body.data).toMatchObject({ status: "active", cancel_at_period_end: true });
    await advance(clockId, "2027-06-10T00:00:00Z");
    expect(await invoicesOf(sub.id)).toHaveLength(1);
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data).toMatchObject({ status: "canceled", canceled_at: "2027-05-17T00:00:00.000Z", next_invoice_at: null });

    const second = (await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method })).body.data;
    const now = await api.post(`/v1/subscriptions/${second.id}/cancel`, {});
    expect(now.body.data).toMatchObject({ status: "canceled", canceled_at: "2027-06-10T00:00:00.000Z" });
    expect((await api.post(`/v1/subscriptions/${second.id}/cancel`, {})).body.data.status).toBe("canceled");
  });

  it("test clocks: live mode refuses them; forward only; deleting one cancels its subscriptions", async () => {
    const merchant = await gw.createMerchant();
    const live = await apiClient(gw.url, merchant.liveKey).post("/v1/test-clocks", { frozen_time: "2027-01-01T00:00:00Z" });
    expect(live.status, live.text).toBe(403);
    expect(live.body.code).toBe("test_mode_only");
    expect((await api.post("/v1/test-clocks", { frozen_time: "tomorrow" })).status).toBe(400);
    const clockId = await clock("2027-01-01T00:00:00Z");
    expect((await api.post(`/v1/test-clocks/${clockId}/advance`, { frozen_time: "2027-01-01T00:00:00Z" })).status).toBe(400);
    expect((await otherApi.get(`/v1/test-clocks/${clockId}`)).status).toBe(404);
    const { customer, method } = await customerWithCard("4242424242424242", clockId);
    const sub = (await api.post("/v1/subscriptions", { customer, plan: await plan(), payment_method: method })).body.data;
    expect((await api.raw(`/v1/test-clocks/${clockId}`, { method: "DELETE" })).status).toBe(200);
    expect((await api.get(`/v1/test-clocks/${clockId}`)).status).toBe(404);
    expect((await api.get(`/v1/subscriptions/${sub.id}`)).body.data.status).toBe("canceled");
  });

  it("a period is invoiced once however many times it is billed at once", async () => {
    const clockId = await clock("2027-08-01T00:00:00Z");
    const { customer, method } = await customerWithCard("4242424242424242", clockId);
    const sub = (await api.post("/v1/subscriptions", { customer, plan: await plan({ interval: "day" }), payment_method: method })).body.data;
    await until(() => invoicesOf(sub.id), (list) => list[0]?.status === "paid");
    const row = await db().subscription.findUniqueOrThrow({ where: { reference: sub.id } });
    // Due now, the next period only (a day later the one after would be due too).
    const at = new Date(row.nextInvoiceAt!.getTime() + DAY - 1);
    await Promise.all(Array.from({ length: 8 }, () => gw.gateway.services.billing.cycle.billSubscription(row.id, at)));
    const invoices = await db().invoice.findMany({ where: { subscriptionId: row.id } });
    expect(invoices).toHaveLength(2);
    const second = invoices.find((i) => i.periodStart.getTime() === row.nextInvoiceAt!.getTime())!;
    await Promise.all(Array.from({ length: 4 }, () => gw.gateway.services.billing.cycle.collectInvoice(second.id, at)));
    expect(await db().transaction.count({ where: { invoiceId: second.id } })).toBe(1);
  });

  it("signed webhooks and the invoiceEvents subscription tell the merchant of each invoice and subscription change", async () => {
    receiver = await startWebhookReceiver();
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/billing`, events: ["subscription.created", "subscription.updated", "invoice.created", "invoice.paid", "invoice.payment_failed"] });
    expect(hook.status, hook.text).toBe(201);
    const client = wsClient(gw.url, bench.testKey);
    const events = collect(client, BillingEvents);
    try {
      await events.ready();
      const { customer, method } = await customerWithCard();
      const sub = (await api.post("/v1/subscriptions", { customer, plan: await plan({ amount: 7_700 }), payment_method: method })).body.data;
      const invoice = (await until(() => invoicesOf(sub.id), (list) => list[0]?.status === "paid"))[0]!;
      const mine = () => events.results.filter((r) => r.data?.invoiceEvents.invoice.id === invoice.id).map((r) => r.data!.invoiceEvents);
      await until(() => mine(), (list) => list.length >= 2);
      expect(mine()).toEqual([
        { type: "invoice.created", invoice: { id: invoice.id, status: "open", attempts: 0, amountDue: 7_700, transactionReference: null } },
        { type: "invoice.paid", invoice: { id: invoice.id, status: "paid", attempts: 1, amountDue: 7_700, transactionReference: invoice.transaction_reference } },
      ]);
      expect(events.error).toBeUndefined();

      const wh = new Webhook(hook.body.data.secret);
      const delivered = await until(
        () => receiver.received.filter((r) => r.json?.data?.id === invoice.id || r.json?.data?.id === sub.id),
        (list) => list.length >= 4,
      );
      const verified = delivered.map((r) => wh.verify(r.body, r.headers) as { type: string; data: Record<string, unknown> });
      expect(verified.map((v) => v.type).sort()).toEqual(["invoice.created", "invoice.paid", "subscription.created", "subscription.updated"]);
      expect(verified.find((v) => v.type === "invoice.paid")!.data).toEqual(invoice);
    } finally {
      events.dispose();
      await client.dispose();
    }
  });

  // Last: it reads every subscription and invoice the tests above left (clocks, trials, dunning, cancellations).
  it("the billing cycle's plain-SQL reads equal Prisma's includes, field for field (types included)", async () => {
    const { customer, method } = await customerWithCard();
    const made = await api.post("/v1/subscriptions", { customer, plan: await plan({ metadata: { tier: "gold" } }), payment_method: method, metadata: { order: "A-1", nested: { n: 1 } } });
    expect(made.status, made.text).toBe(201);
    await until(() => invoicesOf(made.body.data.id), (list) => list[0]?.status === "paid");

    const subscriptions = await db().subscription.findMany({ include: SUBSCRIPTION_LINKS, orderBy: { id: "asc" } });
    const invoices = await db().invoice.findMany({ include: INVOICE_LINKS, orderBy: { id: "asc" } });
    // Every shape is there: a clock and none, metadata and none, invoices with no charge, one, and several (declined, then paid).
    expect(subscriptions.filter((s) => s.testClock).length).toBeGreaterThan(0);
    expect(subscriptions.filter((s) => !s.testClock).length).toBeGreaterThan(0);
    expect(subscriptions.filter((s) => s.metadata && s.plan.metadata).length).toBeGreaterThan(0);
    expect(new Set(invoices.map((i) => Math.min(i.transactions.length, 2)))).toEqual(new Set([0, 1, 2]));
    expect(new Set(invoices.flatMap((i) => i.transactions.map((t) => t.status)))).toEqual(new Set(["completed", "failed"]));

    const ids = { subscriptions: subscriptions.map((s) => s.id), invoices: invoices.map((i) => i.id) };
    const sql = bench.gw.gateway.db.sql;
    expect(await readSubscriptions(sql, [...ids.subscriptions, 999_999])).toEqual(subscriptions);
    expect(await readInvoices(sql, [...ids.invoices, 999_999])).toEqual(invoices);
    const collectLinks = { ...INVOICE_LINKS, subscription: { select: { reference: true, plan: { select: { name: true } }, paymentMethod: { select: { reference: true } } } } };
    expect(await invoicesToCollect(sql, ids.invoices)).toEqual(await db().invoice.findMany({ include: collectLinks, orderBy: { id: "asc" } }));
    // A period's invoice is found by its subscription and start, whoever made it.
    const again = await sql.transaction((tx) =>
      insertInvoicesForPeriods(tx, invoices.map((i) => ({ reference: `in_again_${i.id}`, merchantId: i.merchantId, mode: i.mode, subscriptionId: i.subscriptionId, customerId: i.customerId, testClockId: i.testClockId, amountDue: i.amountDue, currency: i.currency, periodStart: i.periodStart, periodEnd: i.periodEnd, nextAttemptAt: i.periodStart }))),
    );
    expect(again.created.size).toBe(0);
    expect(again.invoices).toEqual(invoices);
  });
});

/**
 * The billing step that makes an invoice's charge records its outcome on the invoice itself: the charge's settling
 * statement queues no invoice.charge_settled job for it (that job is for charges settled elsewhere: a payer's return,
 * a provider's webhook, the reconcile job). Driven by hand, with no job runner, so the jobs table shows what was queued.
 */
describe("an invoice charge settled by the step that made it", () => {
  const bench = withSandboxMerchants({ JOBS_ENABLED: "false" });
  const db = () => bench.gw.gateway.db.prisma;

  async function subscriptionOn(cardNumber: string) {
    const { api, gw } = bench;
    const customer = (await api.post("/v1/customers", { email: `recorded${process.pid}-${++seq}@example.com` })).body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 100, currency: "KES", customer });
    const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, { card_number: cardNumber, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123", save_payment_method: true });
    expect(paid.status, paid.text).toBe(200);
    const method = (await api.get(`/v1/customers/${customer}/payment-methods`)).body.data[0].id as string;
    const plan = (await api.post("/v1/plans", { name: "Recorded", amount: 3_100, currency: "KES", interval: "month" })).body.data.id as string;
    const sub = await api.post("/v1/subscriptions", { customer, plan, payment_method: method });
    expect(sub.status, sub.text).toBe(201);
    return db().subscription.findUniqueOrThrow({ where: { reference: sub.body.data.id } });
  }

  /** Its first period billed and charged by hand, as the two jobs would: the invoice. */
  async function billAndCollect(row: { id: number; nextInvoiceAt: Date | null }) {
    const { cycle } = bench.gw.gateway.services.billing;
    const now = new Date(row.nextInvoiceAt!.getTime() + 1);
    await cycle.billSubscription(row.id, now);
    const invoice = await db().invoice.findFirstOrThrow({ where: { subscriptionId: row.id } });
    await cycle.collectInvoice(invoice.id, now);
    return { invoice, now };
  }

  const settledJobs = async (invoiceId: number) =>
    (await db().job.findMany({ where: { kind: "invoice.charge_settled" } })).filter((job) => (job.payload as { invoiceId?: number }).invoiceId === invoiceId);

  it("paid: the invoice is paid in the step, and no invoice.charge_settled job is queued", async () => {
    const { invoice } = await billAndCollect(await subscriptionOn("4242424242424242"));
    expect(await db().invoice.findUniqueOrThrow({ where: { id: invoice.id } })).toMatchObject({ status: "paid", attempts: 1 });
    expect(await db().transaction.findMany({ where: { invoiceId: invoice.id }, select: { status: true } })).toEqual([{ status: "completed" }]);
    expect(await settledJobs(invoice.id)).toEqual([]);
  });

  it("declined: the failure is recorded in the step (next try scheduled), and no invoice.charge_settled job is queued", async () => {
    // Saves on its first payment; every later charge of it is declined.
    const row = await subscriptionOn("4000000000000341");
    const { invoice, now } = await billAndCollect(row);
    const after = await db().invoice.findUniqueOrThrow({ where: { id: invoice.id } });
    expect(after).toMatchObject({ status: "open", attempts: 1 });
    expect(after.nextAttemptAt!.getTime()).toBeGreaterThan(now.getTime());
    expect(await db().transaction.findMany({ where: { invoiceId: invoice.id }, select: { status: true, failureCode: true } })).toEqual([{ status: "failed", failureCode: "card_declined" }]);
    expect(await settledJobs(invoice.id)).toEqual([]);
    expect((await db().subscription.findUniqueOrThrow({ where: { id: row.id } })).status).toBe("past_due");
  });
});
