import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { BENCH_ENV, withPaystack, type PaystackBench } from "../support/benches.ts";
import { until } from "../support/wait.ts";

/**
 * Paystack collections and transfers against the loopback Paystack: initialize at Paystack, settlement by
 * webhook (verified against /transaction/verify), by the payer's return and by the reconciler; refused
 * signatures, tampered bodies and mismatched amounts; a webhook 50 times at once; Paystack's failures;
 * transfers for payouts; and the secret key in no response, log line or plaintext column.
 * Jobs run only when a test runs them.
 */
const EMAIL = "payer@example.com";
const PHONE = "254708374149";
const TIMEOUT_MS = 1500;
/**
 * A call Paystack never answers ends well within this: longer than PAYSTACK_TIMEOUT_MS (TIMEOUT_MS) takes on a busy
 * machine, shorter than the default timeout (15 s), so it is the configured timeout that ended the wait.
 */
const GAVE_UP_WITHIN_MS = 10_000;

/** Bound when the bench is up (beforeAll). */
let { fake, receiver, gw, api, channelId, webhookUrl } = {} as PaystackBench;
const logLines: string[] = [];
const responses: string[] = [];
const prisma = () => gw.gateway.db.prisma;

/** Every gateway answer is kept, to prove afterwards that the secret key is in none of them. */
async function kept<T extends { text: string }>(response: Promise<T>): Promise<T> {
  const r = await response;
  responses.push(r.text);
  return r;
}

async function initialize(body: Record<string, unknown> = {}) {
  const res = await kept(api.post("/api/transactions/initialize", { amount: 250000, email: EMAIL, currency: "NGN", payment_channel_id: channelId, description: "Order 7", ...body }));
  expect(res.status, res.text).toBe(200);
  return res.body as { reference: string; access_code: string; authorization_url: string; transaction: { id: number } };
}

const row = (reference: string) => prisma().transaction.findUniqueOrThrow({ where: { reference } });
const eventsOf = async (reference: string) => {
  const t = await row(reference);
  return (await prisma().event.findMany({ where: { transactionId: t.id }, orderBy: { id: "asc" } })).map((e) => e.type);
};
const verifyCalls = (reference: string) => fake.requests.filter((r) => r.method === "GET" && r.path.startsWith(`/transaction/verify/${reference}`)).length;
/** Time passing: the transaction's verification job falls due now. */
async function runReconciler(reference: string) {
  const t = await row(reference);
  await prisma().job.updateMany({ where: { kind: "transaction.reconcile", status: "queued", payload: { path: ["transactionId"], equals: t.id } }, data: { runAt: new Date() } });
  await gw.gateway.services.jobs.runDueJobs(["transaction.reconcile"]);
}

withPaystack(
  {
    merchant: "Lagos Books",
    webhooks: [{ path: "/hooks" }],
    cleanLedger: true,
    env: { PAYSTACK_TIMEOUT_MS: String(TIMEOUT_MS), ...BENCH_ENV },
    logger: createLogger("debug", { write: (line: string) => void logLines.push(line) }),
  },
  (bench) => {
    ({ fake, receiver, gw, api, channelId, webhookUrl } = bench);
    responses.push(bench.channelCreated.text);
  },
);

describe("a paystack channel", () => {
  it("shows the webhook URL to paste into Paystack's dashboard, in REST and GraphQL, and never the secret key", async () => {
    const token = Buffer.from((await prisma().paymentChannel.findUniqueOrThrow({ where: { id: channelId } })).callbackToken, "utf8").toString("hex");
    expect(webhookUrl).toBe(`${gw.gateway.config.publicBaseUrl}/callbacks/paystack/${token}`);
    const listed = await kept(api.get("/api/payment-channels/list"));
    expect(listed.body.channels.find((c: { id: number }) => c.id === channelId).webhook_url).toBe(webhookUrl);
    const gql = await kept(api.post("/graphql", { query: "{ paymentChannels { databaseId provider webhookUrl } }" }));
    expect(gql.body.data.paymentChannels).toContainEqual({ databaseId: channelId, provider: "paystack", webhookUrl });
    // Other providers' channels keep the documented shape.
    const sandbox = await kept(api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} }));
    expect(sandbox.body.channel).not.toHaveProperty("webhook_url");
  });
});

describe("initialize", () => {
  it("initializes at Paystack with the gateway's reference, subunits, email, currency, a callback_url back to the gateway and metadata; keeps the documented answer", async () => {
    const init = await initialize({ payment_channel_id: channelId });
    expect(init.reference).toMatch(/^txn-[A-Za-z0-9]{20}$/);
    expect(init.authorization_url).toBe(`${gw.gateway.config.publicBaseUrl}/payment/checkout/${init.reference}`);
    const sent = fake.requests.filter((r) => r.path === "/transaction/initialize" && r.body?.reference === init.reference);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.headers.authorization).toBe(`Bearer ${fake.secretKey}`);
    expect(sent[0]!.body).toMatchObject({
      email: EMAIL,
      amount: 250000,
      currency: "NGN",
      reference: init.reference,
      callback_url: `${gw.gateway.config.publicBaseUrl}/payment/checkout/${init.reference}/return`,
      metadata: { transaction_id: init.transaction.id, reference: init.reference },
    });
    const stored = await row(init.reference);
    const atPaystack = fake.transactions.get(init.reference)!;
    expect(stored.providerAccessCode).toBe(atPaystack.access_code);
    expect(stored.providerCheckoutUrl).toBe(`${fake.url}/checkout/${atPaystack.access_code}`);
    expect(stored.status).toBe("pending");
    // The payer's link sends them on to Paystack's page.
    const page = await fetch(`${gw.url}/payment/checkout/${init.reference}`, { redirect: "manual" });
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe(stored.providerCheckoutUrl);
  });

  it.each([
    ["401 invalid key", { status: 401, body: { status: false, message: "Invalid key" } }, 502, /secret key/],
    ["400 duplicate reference", { status: 400, body: { status: false, message: "Duplicate Transaction Reference", code: "duplicate_reference" } }, 502, /duplicate_reference/],
    ["403 currency not enabled", { status: 403, body: { status: false, message: "Currency not supported by merchant" } }, 502, /Currency not supported/],
    ["500", { status: 500, body: { status: false, message: "Internal error" } }, 503, /unavailable/],
  ])("Paystack answering %s is a %s in the envelope, the transaction failed, and nothing secret said", async (_name, failure, status, message) => {
    fake.switches.failNext = { path: "/transaction/initialize", status: failure.status, body: failure.body };
    const before = await prisma().transaction.count();
    const res = await kept(api.post("/api/transactions/initialize", { amount: 1000, email: EMAIL, currency: "NGN", payment_channel_id: channelId }));
    expect(res.status, res.text).toBe(status);
    expect(res.body).toMatchObject({ status: "error", code: status === 502 ? "provider_error" : "provider_unavailable" });
    expect(res.body.message).toMatch(message);
    expect(res.text).not.toContain(fake.secretKey);
    // The row written before the call is failed, with the reason: never left pending with no Paystack payment behind it.
    const rows = await prisma().transaction.findMany({ orderBy: { id: "desc" }, take: (await prisma().transaction.count()) - before });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "failed", failureCode: status === 502 ? "provider_error" : "provider_unavailable" });
  });

  it("Paystack timing out is a 503 within the configured timeout", async () => {
    fake.switches.delayMs = { "/transaction/initialize": 10 * 60_000 }; // no answer within the test
    const started = Date.now();
    const res = await kept(api.post("/api/transactions/initialize", { amount: 1000, email: EMAIL, currency: "NGN", payment_channel_id: channelId }));
    fake.switches.delayMs = {};
    expect(res.status, res.text).toBe(503);
    expect(res.body.message).toMatch(/did not answer/);
    expect(Date.now() - started).toBeLessThan(GAVE_UP_WITHIN_MS);
  });
});

describe("references", () => {
  it("a reference in the older txn_ form keeps working for verify, the checkout page and settlement", async () => {
    const { reference } = await initialize();
    const legacy = `txn_${reference.slice(4)}`;
    await prisma().transaction.update({ where: { reference }, data: { reference: legacy } });
    fake.transactions.set(legacy, { ...fake.transactions.get(reference)!, reference: legacy });
    const verified = await kept(api.get(`/api/transactions/verify/${legacy}`));
    expect(verified.status).toBe(200);
    expect(verified.body.transaction.reference).toBe(legacy);
    expect((await fetch(`${gw.url}/payment/checkout/${legacy}`, { redirect: "manual" })).status).toBe(303);
    fake.switches.chargeWebhooks = false;
    try {
      await fake.pay(legacy);
    } finally {
      fake.switches.chargeWebhooks = true;
    }
    await fetch(`${gw.url}/payment/checkout/${legacy}/return?reference=${legacy}`);
    expect((await row(legacy)).status).toBe("completed");
  });
});

describe("settlement", () => {
  it("a charge.success webhook is verified with Paystack, then completes the transaction once, with one event and one merchant webhook", async () => {
    const { reference } = await initialize();
    await fake.pay(reference); // posts charge.success to the channel's webhook URL
    const done = await until(() => row(reference), (t) => t.status !== "pending");
    expect(done).toMatchObject({ status: "completed", paymentMethod: "card", providerReference: String(fake.transactions.get(reference)!.id) });
    expect(verifyCalls(reference)).toBeGreaterThanOrEqual(1);
    expect(await eventsOf(reference)).toEqual(["transaction.completed"]);
    const sent = fake.webhooksSent.filter((w) => (w.body as any)?.data?.reference === reference);
    expect(sent.map((w) => w.status)).toEqual([200]);
    await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
    expect(receiver.received.filter((r) => r.json?.data?.reference === reference).map((r) => r.json.type)).toEqual(["transaction.completed"]);
    const verified = await kept(api.get(`/api/transactions/verify/${reference}`));
    expect(verified.body.status).toBe("completed");
  });

  it("the payer's return verifies and shows the result; a return before payment shows it is being confirmed", async () => {
    fake.switches.chargeWebhooks = false;
    try {
      const { reference } = await initialize();
      const early = await fetch(`${gw.url}/payment/checkout/${reference}/return?trxref=${reference}&reference=${reference}`);
      expect(early.status).toBe(200);
      expect(await early.text()).toContain("We are confirming your payment");
      expect((await row(reference)).status).toBe("pending");

      await fake.pay(reference);
      const back = await fetch(`${gw.url}/payment/checkout/${reference}/return?trxref=${reference}&reference=${reference}`);
      expect(await back.text()).toContain("Payment completed. Thank you.");
      expect((await row(reference)).status).toBe("completed");
      expect(await eventsOf(reference)).toEqual(["transaction.completed"]);
      // Settled: the payer's link now shows the result instead of sending them to Paystack again.
      const page = await fetch(`${gw.url}/payment/checkout/${reference}`, { redirect: "manual" });
      expect(page.status).toBe(200);
    } finally {
      fake.switches.chargeWebhooks = true;
    }
  });

  it("a declined payment is failed by the return, with Paystack's reason", async () => {
    fake.switches.chargeWebhooks = false;
    try {
      const { reference } = await initialize();
      await fake.pay(reference, "failed");
      const back = await fetch(`${gw.url}/payment/checkout/${reference}/return?reference=${reference}`);
      expect(await back.text()).toContain("This payment did not go through: Declined.");
      expect(await row(reference)).toMatchObject({ status: "failed", failureCode: "declined" });
    } finally {
      fake.switches.chargeWebhooks = true;
    }
  });

  it("the reconciler completes a paid transaction whose webhook never came, first PAYSTACK_VERIFY_AFTER_MS after initialize", async () => {
    fake.switches.chargeWebhooks = false;
    try {
      const { reference } = await initialize();
      const t = await row(reference);
      const job = await prisma().job.findFirstOrThrow({ where: { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } } });
      // Default 60 s after the row was written.
      expect(job.runAt.getTime() - t.createdAt.getTime()).toBeGreaterThanOrEqual(59_000);
      expect(job.runAt.getTime() - t.createdAt.getTime()).toBeLessThan(65_000);

      // Unpaid (Paystack says "abandoned" until the payer pays): still pending, asked again later.
      await runReconciler(reference);
      expect((await row(reference)).status).toBe("pending");
      const again = await prisma().job.findFirstOrThrow({ where: { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } } });
      expect(again.runAt.getTime()).toBeGreaterThan(Date.now() + 60_000);

      await fake.pay(reference);
      await runReconciler(reference);
      expect((await row(reference)).status).toBe("completed");
      expect(await eventsOf(reference)).toEqual(["transaction.completed"]);
      expect(await prisma().job.count({ where: { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } } })).toBe(0);
    } finally {
      fake.switches.chargeWebhooks = true;
    }
  });

  it("the reconciler fails a payment still unpaid 24 hours after initialize as abandoned", async () => {
    const { reference } = await initialize();
    await prisma().transaction.update({ where: { reference }, data: { createdAt: new Date(Date.now() - 24 * 3_600_000 - 1000) } });
    await runReconciler(reference);
    expect(await row(reference)).toMatchObject({ status: "failed", failureCode: "abandoned" });
    expect(await eventsOf(reference)).toEqual(["transaction.failed"]);
  });

  it("the same webhook 50 times at once: one transition, one event", async () => {
    fake.switches.chargeWebhooks = false;
    let reference: string;
    try {
      ({ reference } = await initialize());
      await fake.pay(reference);
    } finally {
      fake.switches.chargeWebhooks = true;
    }
    const event = fake.chargeEvent(reference);
    const answers = await Promise.all(Array.from({ length: 50 }, () => fake.sendWebhook(webhookUrl, event)));
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(200));
    expect((await row(reference)).status).toBe("completed");
    expect(await eventsOf(reference)).toEqual(["transaction.completed"]);
  });
});

describe("webhooks that must change nothing", () => {
  async function paidWithoutWebhook() {
    fake.switches.chargeWebhooks = false;
    try {
      const { reference } = await initialize();
      await fake.pay(reference);
      return reference;
    } finally {
      fake.switches.chargeWebhooks = true;
    }
  }

  it("a wrong signature (another key) is a 401 envelope, and Paystack is not even asked", async () => {
    const reference = await paidWithoutWebhook();
    const res = await fake.sendWebhook(webhookUrl, fake.chargeEvent(reference), { signWith: `sk_test_${"0".repeat(40)}` });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.text)).toMatchObject({ status: "error", code: "invalid_signature" });
    expect(verifyCalls(reference)).toBe(0);
    expect((await row(reference)).status).toBe("pending");
  });

  it("a missing or malformed signature header is a 401", async () => {
    const reference = await paidWithoutWebhook();
    for (const signature of ["", "zz", "a".repeat(127), "a".repeat(129)]) {
      const res = await fake.sendWebhook(webhookUrl, fake.chargeEvent(reference), { signature });
      expect(res.status, signature).toBe(401);
    }
    expect((await row(reference)).status).toBe("pending");
  });

  it("a tampered body (signed before the change) is a 401", async () => {
    const reference = await paidWithoutWebhook();
    const event = fake.chargeEvent(reference);
    const signedBody = JSON.stringify(event);
    const rawBody = JSON.stringify({ ...event, data: { ...event.data, amount: 1 } });
    const res = await fake.sendWebhook(webhookUrl, event, { rawBody, signedBody });
    expect(res.status).toBe(401);
    expect((await row(reference)).status).toBe("pending");
  });

  it.each([
    ["amount", { amount: 100 }],
    ["currency", { currency: "GHS" }],
  ])("a verify answer with another %s is not applied", async (_field, override) => {
    const reference = await paidWithoutWebhook();
    fake.switches.verifyOverride[reference] = override;
    const res = await fake.sendWebhook(webhookUrl, fake.chargeEvent(reference));
    expect(res.status).toBe(200);
    expect(verifyCalls(reference)).toBeGreaterThanOrEqual(1);
    expect((await row(reference)).status).toBe("pending");
    await runReconciler(reference);
    expect((await row(reference)).status).toBe("pending");
    expect(await eventsOf(reference)).toEqual([]);
  });

  it("an unknown channel token is a 404, and another channel's reference is not applied", async () => {
    const reference = await paidWithoutWebhook();
    const wrong = webhookUrl.replace(/[0-9a-f]{4}$/, "abcd");
    expect((await fake.sendWebhook(wrong, fake.chargeEvent(reference))).status).toBe(404);
    expect((await fake.sendWebhook(`${gw.url}/callbacks/paystack/%00`, fake.chargeEvent(reference))).status).toBeLessThan(500);
    expect((await row(reference)).status).toBe("pending");
  });

  it("a webhook Paystack cannot confirm (verify down) is a 503, so Paystack retries it", async () => {
    const reference = await paidWithoutWebhook();
    fake.switches.failNext = { path: "/transaction/verify", status: 500, body: { status: false, message: "down" } };
    const res = await fake.sendWebhook(webhookUrl, fake.chargeEvent(reference));
    expect(res.status).toBe(503);
    expect((await row(reference)).status).toBe("pending");
    expect((await fake.sendWebhook(webhookUrl, fake.chargeEvent(reference))).status).toBe(200);
    expect((await row(reference)).status).toBe("completed");
  });
});

describe("transfers (payouts on a paystack channel)", () => {
  const payout = (body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    kept(api.post("/v1/payouts", { amount: 150000, currency: "KES", phone_number: PHONE, payment_channel_id: channelId, reference: "SELLER-9", description: "Weekly", ...body }, headers));
  const payoutRow = (id: number) => prisma().payout.findUniqueOrThrow({ where: { id } });

  it("creates an M-Pesa mobile_money recipient and a transfer keyed by the payout reference; transfer.success (verified) completes it", async () => {
    const res = await payout();
    expect(res.status, res.text).toBe(201);
    const { id, reference } = res.body.data;
    expect(reference).toMatch(/^po_[0-9a-z]{20}$/);
    const transfer = await until(() => fake.transfers.get(reference), (t) => t !== undefined);
    expect(transfer).toMatchObject({ amount: 150000, currency: "KES", reference });
    const recipient = fake.recipients.get(transfer!.recipient_code)!;
    expect(recipient).toMatchObject({ type: "mobile_money", currency: "KES" });
    expect(recipient.details.bank_code).toBe("MPESA");
    const sent = fake.requests.find((r) => r.path === "/transfer" && r.body?.reference === reference)!;
    expect(sent.body).toMatchObject({ source: "balance", amount: 150000, recipient: transfer!.recipient_code, reference });

    const done = await until(() => payoutRow(id), (p) => p.status !== "pending");
    expect(done).toMatchObject({ status: "completed", providerReference: transfer!.transfer_code });
    expect(fake.requests.some((r) => r.path.startsWith(`/transfer/verify/${reference}`))).toBe(true);
    expect((await prisma().event.findMany({ where: { payoutId: id } })).map((e) => e.type)).toEqual(["payout.completed"]);
    const got = await kept(api.get(`/v1/payouts/${reference}`));
    expect(got.body.data).toMatchObject({ status: "completed", provider_reference: transfer!.transfer_code });
  });

  it.each([
    ["failed", "transfer_failed"],
    ["reversed", "reversed"],
  ])("transfer.%s fails the payout", async (outcome, code) => {
    fake.switches.transferOutcome = outcome as "failed" | "reversed";
    try {
      const res = await payout();
      expect(res.status, res.text).toBe(201);
      const done = await until(() => payoutRow(res.body.data.id), (p) => p.status !== "pending");
      expect(done).toMatchObject({ status: "failed", failureCode: code });
    } finally {
      fake.switches.transferOutcome = "success";
    }
  });

  it("with no webhook the status query settles it, and a replayed Idempotency-Key sends no second transfer", async () => {
    fake.switches.transferNoWebhook = true;
    try {
      const key = `po-${Date.now()}`;
      const first = await payout({}, { "Idempotency-Key": key });
      const second = await payout({}, { "Idempotency-Key": key });
      expect(second.body.data.id).toBe(first.body.data.id);
      const { id, reference } = first.body.data;
      await until(() => fake.transfers.get(reference)?.status, (s) => s !== undefined && s !== "pending");
      expect((await payoutRow(id)).status).toBe("pending");
      await prisma().job.updateMany({ where: { kind: "payout.query", payload: { path: ["payoutId"], equals: id } }, data: { runAt: new Date() } });
      await gw.gateway.services.jobs.runDueJobs(["payout.query"]);
      expect((await payoutRow(id)).status).toBe("completed");
      expect(fake.requests.filter((r) => r.path === "/transfer" && r.body?.reference === reference)).toHaveLength(1);
    } finally {
      fake.switches.transferNoWebhook = false;
    }
  });

  it("refuses what an M-Pesa transfer cannot carry, before anything is sent", async () => {
    const cents = await payout({ amount: 150050 });
    expect(cents.status).toBe(400);
    expect(cents.body.message).toMatch(/amount/);
    const ngn = await payout({ currency: "NGN" });
    expect(ngn.status).toBe(400);
    expect(ngn.body.message).toMatch(/currency/);
  });

  it("Paystack refusing the transfer (balance too low) fails the payout with its reason", async () => {
    fake.switches.insufficientBalance = true;
    try {
      const res = await payout();
      expect(res.status).toBe(502);
      expect(res.body.message).toMatch(/balance/i);
      const failed = await prisma().payout.findFirstOrThrow({ orderBy: { id: "desc" } });
      expect(failed).toMatchObject({ status: "failed", failureCode: "provider_error" });
    } finally {
      fake.switches.insufficientBalance = false;
    }
  });
});

describe("secrets", () => {
  it("the secret key is in no response, no log line (at debug) and no plaintext column", async () => {
    expect(responses.length).toBeGreaterThan(20);
    for (const text of responses) expect(text).not.toContain(fake.secretKey);
    expect(logLines.length).toBeGreaterThan(20);
    for (const line of logLines) expect(line).not.toContain(fake.secretKey);
    const channel = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: channelId } });
    expect(JSON.stringify(channel, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(fake.secretKey);
    const dump = JSON.stringify(await prisma().transaction.findMany(), (_k, v) => (typeof v === "bigint" ? String(v) : v));
    expect(dump).not.toContain(fake.secretKey);
  });
});
