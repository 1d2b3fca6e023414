import { describe, expect, it } from "vitest";
import type { FakePaystack, FakeRefund } from "../fakes/paystack-api.ts";
import { BENCH_ENV, withPaystack, type PaystackBench } from "../support/benches.ts";
import { until, withSwitches as switched } from "../support/wait.ts";

/**
 * Refunds on the Paystack rail against the loopback Paystack, over real HTTP: POST /refund in Paystack's
 * documented shape, settlement by refund.* webhooks (a notice to ask GET /refund/:id) and by the
 * refund.check job; failed and needs-attention refunds; Paystack refusing; answers lost to a 5xx or a
 * timeout, resolved by asking (listing the transaction's refunds) and never by sending again; one webhook
 * 50 times at once. Jobs run only when a test runs them.
 */
const EMAIL = "payer@example.com";
const TIMEOUT_MS = 1500;
/**
 * A call Paystack never answers ends well within this: longer than PAYSTACK_TIMEOUT_MS (TIMEOUT_MS) takes on a busy
 * machine, shorter than the default timeout (15 s), so it is the configured timeout that ended the wait.
 */
const GAVE_UP_WITHIN_MS = 10_000;
/** PaystackOSS/openapi RefundCreate: the body's only fields. */
const REFUND_CREATE_FIELDS = ["transaction", "amount", "currency", "customer_note", "merchant_note"];

/** Bound when the bench is up (beforeAll). */
let { fake, receiver, gw, api, channelId, webhookUrl } = {} as PaystackBench;
const prisma = () => gw.gateway.db.prisma;

withPaystack(
  {
    merchant: "Lagos Books",
    // Two endpoints: every refund event is delivered once to each.
    webhooks: ["/a", "/b"].map((path) => ({ path, events: ["refund.completed", "refund.failed"] })),
    cleanLedger: true,
    env: { PAYSTACK_TIMEOUT_MS: String(TIMEOUT_MS), ...BENCH_ENV },
  },
  (bench) => {
    ({ fake, receiver, gw, api, channelId, webhookUrl } = bench);
  },
);

/** A Paystack payment of `amount` NGN subunits, paid and completed (charge.success, verified). */
async function paidPayment(amount = 250_000): Promise<string> {
  const init = await api.post("/api/transactions/initialize", { amount, email: EMAIL, currency: "NGN", payment_channel_id: channelId });
  expect(init.status, init.text).toBe(200);
  const reference = init.body.reference as string;
  await fake.pay(reference);
  await until(() => prisma().transaction.findUniqueOrThrow({ where: { reference } }), (t) => t.status === "completed");
  return reference;
}

/** Runs with the fake's switches changed, then puts them back. */
const withSwitches = <T>(changes: Partial<FakePaystack["switches"]>, run: () => Promise<T>) => switched(fake.switches, changes, run);

const refund = (body: Record<string, unknown>) => api.post("/v1/refunds", body);
const refundRow = (id: number) => prisma().refund.findUniqueOrThrow({ where: { id } });
const eventsOf = async (id: number) => (await prisma().event.findMany({ where: { refundId: id }, orderBy: { id: "asc" } })).map((e) => e.type);
/** Calls to Paystack's refund endpoints about one payment (POST by body, GETs by path). */
const postsFor = (transactionKey: string) => fake.requests.filter((r) => r.method === "POST" && r.path === "/refund" && r.body?.transaction === transactionKey);
const paystackId = async (reference: string) => (await prisma().transaction.findUniqueOrThrow({ where: { reference } })).providerReference!;
/** The fake's refund whose merchant_note carries our reference. */
const atPaystack = (reference: string) => [...fake.refunds.values()].find((r) => r.merchant_note.includes(`[${reference}]`));
const settledAtPaystack = async (reference: string): Promise<FakeRefund> =>
  (await until(() => atPaystack(reference), (r) => r !== undefined && !["pending", "processing"].includes(r.status)))!;

/** Time passing: the refund's check job falls due now. */
async function runRefundCheck(id: number) {
  const updated = await prisma().job.updateMany({ where: { kind: "refund.check", status: "queued", payload: { path: ["refundId"], equals: id } }, data: { runAt: new Date() } });
  expect(updated.count).toBe(1);
  await gw.gateway.services.jobs.runDueJobs(["refund.check"]);
}

/** Delivers queued merchant webhooks and returns those of one refund, by endpoint path. */
async function deliveredFor(reference: string) {
  await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
  const mine = receiver.received.filter((d) => d.json?.data?.reference === reference);
  return { a: mine.filter((d) => d.path === "/a").map((d) => d.json.type), b: mine.filter((d) => d.path === "/b").map((d) => d.json.type) };
}

describe("paystack_refund", () => {
  it.each([
    ["full", "webhook"],
    ["partial", "webhook"],
    ["full", "reconciler"],
    ["partial", "reconciler"],
  ] as const)("a %s refund completes by %s: POST /refund in Paystack's documented shape, Paystack's id as provider_reference, one event, one delivery per endpoint", async (kind, by) => {
    const reference = await paidPayment(250_000);
    const amount = kind === "full" ? 250_000 : 90_000;
    await withSwitches({ refundWebhooks: by === "webhook" }, async () => {
      const res = await refund({ transaction: reference, ...(kind === "partial" ? { amount } : {}), merchant_note: "order #7 returned", customer_note: "Sorry it did not fit" });
      expect(res.status, res.text).toBe(201);
      const created = res.body.data;
      expect(created).toMatchObject({ status: "pending", method: "paystack_refund", amount, currency: "NGN", failure_reason: null });

      // What Paystack received: its documented fields only, the Paystack transaction id, subunits, our reference first in merchant_note.
      const txId = await paystackId(reference);
      const [sent, ...more] = postsFor(txId);
      expect(more).toHaveLength(0);
      expect(Object.keys(sent!.body).every((k) => REFUND_CREATE_FIELDS.includes(k))).toBe(true);
      expect(sent!.body).toEqual({ transaction: txId, amount, currency: "NGN", merchant_note: `[${created.reference}] order #7 returned`, customer_note: "Sorry it did not fit" });
      expect(sent!.headers.authorization).toBe(`Bearer ${fake.secretKey}`);
      const paystackRefund = atPaystack(created.reference)!;
      expect(created.provider_reference).toBe(String(paystackRefund.id));

      if (by === "reconciler") {
        await settledAtPaystack(created.reference);
        expect((await refundRow(created.id)).status).toBe("pending");
        const job = await prisma().job.findFirstOrThrow({ where: { kind: "refund.check", payload: { path: ["refundId"], equals: created.id } } });
        // PAYSTACK_REFUND_CHECK_AFTER_MS: 60 s after the refund was made, by default.
        expect(job.runAt.getTime() - new Date(created.created_at).getTime()).toBeGreaterThanOrEqual(59_000);
        await runRefundCheck(created.id);
      }
      const done = await until(() => refundRow(created.id), (r) => r.status !== "pending");
      expect(done).toMatchObject({ status: "completed", providerReference: String(paystackRefund.id), failureReason: null });
      expect(fake.requests.some((r) => r.method === "GET" && r.path === `/refund/${paystackRefund.id}`)).toBe(true);
      expect(await eventsOf(created.id)).toEqual(["refund.completed"]);
      expect(await deliveredFor(created.reference)).toEqual({ a: ["refund.completed"], b: ["refund.completed"] });
      const verify = await api.get(`/api/transactions/verify/${reference}`);
      expect(verify.body.transaction).toMatchObject({ status: "completed", amount_refunded: amount, refunded: kind === "full" });
      expect(postsFor(txId)).toHaveLength(1);
    });
  });

  it("a refund Paystack fails is failed with refund_failed and Paystack's reason, and its amount is refundable again", async () => {
    const reference = await paidPayment(120_000);
    const created = await withSwitches({ refundOutcome: "failed" }, async () => {
      const res = await refund({ transaction: reference, amount: 20_000 });
      expect(res.status, res.text).toBe(201);
      return res.body.data;
    });
    const done = await until(() => api.get(`/v1/refunds/${created.id}`), (r) => r.body.data.status !== "pending");
    expect(done.body.data).toMatchObject({ status: "failed", failure_code: "refund_failed", failure_reason: expect.stringContaining("Card issuer declined"), completed_at: null });
    expect(await eventsOf(created.id)).toEqual(["refund.failed"]);
    expect(await deliveredFor(created.reference)).toEqual({ a: ["refund.failed"], b: ["refund.failed"] });
    const again = await refund({ transaction: reference });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.amount).toBe(120_000);
  });

  it("needs-attention stays pending with a failure_reason saying so, until Paystack processes it", async () => {
    const reference = await paidPayment(80_000);
    const created = await withSwitches({ refundOutcome: "needs-attention" }, async () => (await refund({ transaction: reference })).body.data);
    const waiting = await until(() => api.get(`/v1/refunds/${created.reference}`), (r) => r.body.data.failure_reason !== null);
    expect(waiting.body.data).toMatchObject({ status: "pending", failure_code: null, failure_reason: expect.stringMatching(/^needs-attention: .*bank account details/) });
    expect(await eventsOf(created.id)).toEqual([]);
    // The merchant gives Paystack the customer's account; Paystack processes it and says so.
    const paystackRefund = atPaystack(created.reference)!;
    paystackRefund.status = "processed";
    expect((await fake.sendWebhook(webhookUrl, fake.refundEvent(paystackRefund))).status).toBe(200);
    expect(await refundRow(created.id)).toMatchObject({ status: "completed", failureReason: null });
    expect(await eventsOf(created.id)).toEqual(["refund.completed"]);
  });

  it("Paystack refusing (4xx: already refunded from its dashboard) fails the refund at once, and gives the amount back", async () => {
    const reference = await paidPayment(60_000);
    fake.refundOutside(reference, 60_000);
    const res = await refund({ transaction: reference, amount: 10_000 });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "failed", failure_code: "provider_error", failure_reason: expect.stringContaining("cannot be more than"), provider_reference: null });
    expect(await eventsOf(res.body.data.id)).toEqual(["refund.failed"]);
    expect(postsFor(await paystackId(reference))).toHaveLength(1);
    // Nothing is held back: the gateway would accept all of it again (Paystack decides again).
    const rows = await prisma().refund.findMany({ where: { transactionReference: reference, status: { not: "failed" } } });
    expect(rows).toEqual([]);
  });

  it.each([
    ["a 502 after Paystack queued it", { refundReply: "error_after_create" }],
    ["no answer within PAYSTACK_TIMEOUT_MS", { refundReply: "hang_after_create" }],
  ] as const)("%s: the refund stays pending, and the job finds it by listing the transaction's refunds, with exactly one POST /refund", async (_name, reply) => {
    const reference = await paidPayment(70_000);
    const txId = await paystackId(reference);
    const created = await withSwitches({ ...reply, refundWebhooks: false }, async () => {
      const started = Date.now();
      const res = await refund({ transaction: reference, amount: 30_000 });
      expect(res.status, res.text).toBe(201);
      expect(Date.now() - started).toBeLessThan(GAVE_UP_WITHIN_MS);
      return res.body.data;
    });
    expect(created).toMatchObject({ status: "pending", provider_reference: null, failure_code: null });
    const paystackRefund = await settledAtPaystack(created.reference);
    await runRefundCheck(created.id);
    expect(await refundRow(created.id)).toMatchObject({ status: "completed", providerReference: String(paystackRefund.id) });
    expect(fake.requests.some((r) => r.method === "GET" && r.path.startsWith(`/refund?transaction=${txId}`))).toBe(true);
    expect(postsFor(txId)).toHaveLength(1);
    expect(await eventsOf(created.id)).toEqual(["refund.completed"]);
  });

  it("no provider reference recorded (died before recording Paystack's answer): the job lists the transaction's refunds before anything else, and never POSTs again", async () => {
    const reference = await paidPayment(50_000);
    const txId = await paystackId(reference);
    const created = await withSwitches({ refundWebhooks: false }, async () => (await refund({ transaction: reference, amount: 50_000 })).body.data);
    const paystackRefund = await settledAtPaystack(created.reference);
    await prisma().refund.update({ where: { id: created.id }, data: { providerReference: null } });
    const from = fake.requests.length;
    await runRefundCheck(created.id);
    const asked = fake.requests.slice(from);
    expect(asked[0]).toMatchObject({ method: "GET", path: expect.stringMatching(new RegExp(`^/refund\\?transaction=${txId}&`)) });
    expect(asked.filter((r) => r.method === "POST")).toEqual([]);
    expect(await refundRow(created.id)).toMatchObject({ status: "completed", providerReference: String(paystackRefund.id) });
    expect(postsFor(txId)).toHaveLength(1);
  });

  it("a refund Paystack never received (a 500 before queueing): pending while a call could still arrive, then failed not_sent, never resent", async () => {
    const reference = await paidPayment(40_000);
    const txId = await paystackId(reference);
    fake.switches.failNext = { path: "/refund", status: 500, body: { status: false, message: "Internal error" } };
    const res = await refund({ transaction: reference, amount: 40_000 });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "pending", provider_reference: null });
    // Just made: Paystack listing none yet proves nothing, so it stays pending and is asked again later.
    await runRefundCheck(res.body.data.id);
    expect((await refundRow(res.body.data.id)).status).toBe("pending");
    // Long past any call of ours: none at Paystack means it was never created.
    await prisma().refund.update({ where: { id: res.body.data.id }, data: { createdAt: new Date(Date.now() - TIMEOUT_MS - 6 * 60_000) } });
    await runRefundCheck(res.body.data.id);
    expect(await refundRow(res.body.data.id)).toMatchObject({ status: "failed", failureCode: "not_sent" });
    expect(postsFor(txId)).toHaveLength(1);
    expect(fake.requests.filter((r) => r.method === "GET" && r.path.startsWith(`/refund?transaction=${txId}`))).toHaveLength(2);
    // Its amount is refundable again.
    const again = await refund({ transaction: reference });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.amount).toBe(40_000);
  });

  it("refund.processed delivered 50 times at once: one transition, one event, one delivery per endpoint", async () => {
    const reference = await paidPayment(90_000);
    const created = await withSwitches({ refundWebhooks: false }, async () => (await refund({ transaction: reference, amount: 45_000 })).body.data);
    const paystackRefund = await settledAtPaystack(created.reference);
    const event = fake.refundEvent(paystackRefund);
    expect(event.data).not.toHaveProperty("id"); // as Paystack's samples: found by transaction_reference
    // A 503 (the gateway could not confirm with Paystack in time, on a busy machine) is sent again, as Paystack resends
    // any webhook not answered 200; every copy ends answered 200.
    const answers = await Promise.all(
      Array.from({ length: 50 }, async () => {
        let answer = await fake.sendWebhook(webhookUrl, event);
        for (let resend = 0; answer.status === 503 && resend < 10; resend++) answer = await fake.sendWebhook(webhookUrl, event);
        return answer;
      }),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200));
    expect((await refundRow(created.id)).status).toBe("completed");
    expect(await eventsOf(created.id)).toEqual(["refund.completed"]);
    expect(await deliveredFor(created.reference)).toEqual({ a: ["refund.completed"], b: ["refund.completed"] });
  });

  it("refund.pending and refund.processing change nothing; a forged refund webhook is a 401", async () => {
    const reference = await paidPayment(30_000);
    const created = await withSwitches({ refundWebhooks: false, refundSettleDelayMs: 60_000 }, async () => (await refund({ transaction: reference })).body.data);
    const paystackRefund = atPaystack(created.reference)!;
    for (const status of ["pending", "processing"] as const) {
      paystackRefund.status = status;
      expect((await fake.sendWebhook(webhookUrl, fake.refundEvent(paystackRefund))).status).toBe(200);
      expect(await refundRow(created.id)).toMatchObject({ status: "pending", failureReason: null });
    }
    paystackRefund.status = "processed";
    const forged = await fake.sendWebhook(webhookUrl, fake.refundEvent(paystackRefund), { signWith: `sk_test_${"0".repeat(40)}` });
    expect(forged.status).toBe(401);
    expect((await refundRow(created.id)).status).toBe("pending");
    expect(await eventsOf(created.id)).toEqual([]);
  });

  it("a refund webhook Paystack cannot confirm (its API down) is a 503, so Paystack sends it again", async () => {
    const reference = await paidPayment(30_000);
    const created = await withSwitches({ refundWebhooks: false }, async () => (await refund({ transaction: reference })).body.data);
    const paystackRefund = await settledAtPaystack(created.reference);
    fake.switches.failNext = { path: `/refund/${paystackRefund.id}`, status: 500, body: { status: false, message: "down" } };
    expect((await fake.sendWebhook(webhookUrl, fake.refundEvent(paystackRefund))).status).toBe(503);
    expect((await refundRow(created.id)).status).toBe("pending");
    expect((await fake.sendWebhook(webhookUrl, fake.refundEvent(paystackRefund))).status).toBe(200);
    expect((await refundRow(created.id)).status).toBe("completed");
  });
});
