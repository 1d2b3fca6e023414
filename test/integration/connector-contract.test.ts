import { afterAll, describe, expect, it } from "vitest";
import { createConnectors } from "../../src/providers/index.ts";
import { providerNames, type ProviderName } from "../../src/providers/registry.ts";
import type { Connector } from "../../src/providers/types.ts";
import { buildStkCallbackBody } from "../../src/providers/mpesa/wire.ts";
import { BENCH_ENV, withDaraja, withPaystack } from "../support/benches.ts";
import { useTestGateway } from "../support/fixture.ts";
import { apiClient, createSandboxMerchant, SANDBOX_CARD, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { retryingUnavailable } from "../support/retry.ts";
import { until } from "../support/wait.ts";
import { assertNoSecrets } from "../support/provider-call-secrets.ts";

/**
 * The connector contract (issue 36), as Hyperswitch's ConnectorActions: the same cases, through the gateway's public
 * API (REST, the provider's callbacks), against every connector that claims the capability a case needs: the
 * sandbox, M-Pesa against the loopback Daraja, Paystack against the loopback Paystack. A connector only says how its
 * provider is made to answer (a driver below); the cases say what the gateway must make of it: a payment paid,
 * declined, never answered (asked about until it settles or expires), its success sent twice (settled once) or late
 * (after the gateway asked and heard "pending"); a refund; a payout; the day's reconciliation. Every connector's
 * gateway passes `ledger check` afterwards. Time passing is a job made due and run, never a wait.
 */

/** What the contract knows a connector may claim, as `Connector` names them. */
const CAPABILITIES = ["chargeCard", "momo", "hosted", "refunds", "payouts", "reconciliation"] as const;
type Capability = (typeof CAPABILITIES)[number];

/** Which cases each capability brings. A card charge is answered in the request: nothing to ask, repeat or answer late. */
const CASES: Record<Capability, readonly string[]> = {
  chargeCard: ["pay", "decline"],
  momo: ["pay", "decline", "timeout", "duplicate callback", "late success"],
  hosted: ["pay", "decline", "timeout", "duplicate callback", "late success"],
  refunds: ["refund"],
  payouts: ["payout"],
  reconciliation: ["reconciliation"],
};

const claimed = (connector: Connector) => CAPABILITIES.filter((capability) => connector[capability] !== undefined);

const AMOUNT = 150_000;
const PAYS = "254708374149";
const today = () => new Date().toISOString().slice(0, 10);

interface Payment {
  reference: string;
  id: number;
}

/** How one connector's provider is made to answer. Every method works through the gateway's public API or the provider's. */
interface Driver {
  /** The connector's gateway, the merchant's test key and its channel (once the gateway is up). */
  reach(): { gw: TestGateway; api: ReturnType<typeof apiClient>; channelId: number };
  currency: string;
  /** The capability the collection cases run through. */
  collection: "momo" | "hosted";
  /** A payment the provider approves, as it does (its callback or webhook). */
  pay(amount: number): Promise<Payment>;
  /** A payment the provider declines; answers the failure code the gateway records. */
  decline(amount: number): Promise<Payment & { code: string }>;
  /** A payment the provider has not answered and will not answer by itself. */
  unanswered(amount: number): Promise<Payment>;
  /** The failure code of a payment that outlived its provider's lifetime unanswered. */
  expiredCode: string;
  /** The provider's success for an unanswered payment, made once, ready to be sent (each call sends it again): answers the HTTP status. */
  success(payment: Payment): Promise<() => Promise<number>>;
  /**
   * Whether the provider's own record (what the reconciliation reads) holds a payment settled by `success`. The
   * sandbox's record holds only what it approved itself, so a callback posted from outside is "missing there".
   */
  recordsPostedSuccess: boolean;
  /** Where a payout goes. */
  payoutBody: Record<string, unknown>;
  /** The channel's credentials, which no recorded provider call may hold; none for a connector that makes no HTTP calls (the sandbox). */
  credentials: (() => string[]) | null;
  /** Extra cases of a capability the collection does not cover (the sandbox's card charges). */
  card?: { pay(amount: number): Promise<Payment>; decline(amount: number): Promise<Payment & { code: string }> };
}

/** The gateway and the merchant's channel of one connector, as the cases reach them. */
const prismaOf = (d: Driver) => d.reach().gw.gateway.db.prisma;
const rowOf = (d: Driver, id: number) => prismaOf(d).transaction.findUniqueOrThrow({ where: { id } });
const settlingEvents = async (d: Driver, transactionId: number) =>
  (await prismaOf(d).event.findMany({ where: { transactionId, type: { in: ["transaction.completed", "transaction.failed"] } }, orderBy: { id: "asc" } })).map((e) => e.type);

/** Runs whatever the runner has due (settling sandbox refunds, delivering nothing else) until `read` is no longer pending. */
const settled = <T extends { status: string }>(d: Driver, read: () => Promise<T>) =>
  until(
    async () => {
      await d.reach().gw.gateway.services.jobs.runDueJobs();
      return read();
    },
    (value) => value.status !== "pending",
  );

/** Time passing: the payment's "ask the provider" job falls due now, and runs. */
async function askProvider(d: Driver, payment: Payment) {
  const due = await prismaOf(d).job.updateMany({
    where: { kind: "transaction.reconcile", status: "queued", payload: { path: ["transactionId"], equals: payment.id } },
    data: { runAt: new Date() },
  });
  expect(due.count, "one ask job queued for the payment").toBe(1);
  await d.reach().gw.gateway.services.jobs.runDueJobs(["transaction.reconcile"]);
}

/** What the merchant reads back: GET /api/transactions/verify/:reference. */
const verify = async (d: Driver, reference: string) => {
  const res = await retryingUnavailable(() => d.reach().api.get(`/api/transactions/verify/${reference}`));
  expect(res.status, res.text).toBe(200);
  return res.body.transaction as { status: string; amount: number; currency: string };
};

async function stkPush(d: Driver, amount: number, phone: string) {
  const res = await d.reach().api.post("/api/momo/stk-push", { amount, phone_number: phone, payment_channel_id: d.reach().channelId });
  expect(res.status, res.text).toBe(200);
  const t = res.body.transaction as { id: number; reference: string; checkout_request_id: string };
  return { id: t.id, reference: t.reference, checkoutRequestId: t.checkout_request_id };
}

async function initialize(d: Driver, amount: number) {
  const res = await d.reach().api.post("/api/transactions/initialize", { amount, email: "payer@example.com", currency: d.currency, payment_channel_id: d.reach().channelId });
  expect(res.status, res.text).toBe(200);
  return { reference: res.body.reference as string, id: (await prismaOf(d).transaction.findUniqueOrThrow({ where: { reference: res.body.reference } })).id };
}

/* ---- The drivers: one per connector, each on one gateway shared by its cases. ---- */

function sandboxDriver(): Driver {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let channelId: number;
  // Sandbox answers come quickly, from the gateway's own process; refunds settle through a job the cases run.
  useTestGateway({ env: { ...BENCH_ENV, SANDBOX_STK_DELAY_MS: "50", SANDBOX_REFUND_DELAY_MS: "50" } }, async (started) => {
    gw = started;
    const merchant = await createSandboxMerchant(gw, "Contract Sandbox");
    api = apiClient(gw.url, merchant.testKey);
    channelId = merchant.channelId;
  });
  afterAll(() => expectCleanLedger(gw));
  const driver: Driver = {
    reach: () => ({ gw, api, channelId }),
    currency: "KES",
    collection: "momo",
    // The sandbox's magic phone numbers choose its answer (src/providers/sandbox/momo.ts, docs/mpesa.md).
    pay: (amount) => stkPush(driver, amount, PAYS),
    decline: async (amount) => ({ ...(await stkPush(driver, amount, "254700001032")), code: "1032" }),
    unanswered: (amount) => stkPush(driver, amount, "254700001019"),
    expiredCode: "1019",
    async success(payment) {
      // The sandbox reads a Daraja-format callback posted to its channel's callback URL as a real one.
      const row = await prismaOf(driver).transaction.findUniqueOrThrow({ where: { id: payment.id }, include: { channel: true } });
      const path = new URL(gw.gateway.services.callbackUrls.of(row.channel!).collection!).pathname;
      const body = buildStkCallbackBody({
        merchantRequestId: `contract-${payment.id}`,
        checkoutRequestId: row.checkoutRequestId!,
        resultCode: 0,
        resultDesc: "The service request is processed successfully.",
        shillings: Number(row.amount) / 100,
        receipt: `SBXC${String(payment.id).padStart(6, "0")}`,
        phoneNumber: row.phoneNumber!,
      });
      return async () => (await apiClient(gw.url).post(path, body)).status;
    },
    recordsPostedSuccess: false,
    payoutBody: { phone_number: PAYS },
    credentials: null,
    card: {
      async pay(amount) {
        const payment = await initialize(driver, amount);
        expect((await apiClient(gw.url).post(`/payment/checkout/${payment.reference}/pay`, SANDBOX_CARD)).status).toBe(200);
        return payment;
      },
      async decline(amount) {
        const payment = await initialize(driver, amount);
        expect((await apiClient(gw.url).post(`/payment/checkout/${payment.reference}/pay`, { ...SANDBOX_CARD, card_number: "4000000000000002" })).status).toBe(402);
        return { ...payment, code: "card_declined" };
      },
    },
  };
  return driver;
}

function mpesaDriver(): Driver {
  // The channel has the fake's B2C initiator: refunds (reversals) and payouts need one.
  const bench = withDaraja({ initiator: true, merchant: "Contract M-Pesa", cleanLedger: true, env: BENCH_ENV });
  const driver: Driver = {
    reach: () => bench,
    currency: "KES",
    collection: "momo",
    async pay(amount) {
      const push = await stkPush(driver, amount, PAYS);
      expect((await bench.fake.sendStkCallback(push.checkoutRequestId)).status).toBe(200);
      return push;
    },
    async decline(amount) {
      const push = await stkPush(driver, amount, PAYS);
      expect((await bench.fake.sendStkCallback(push.checkoutRequestId, { resultCode: 1032, resultDesc: "Request cancelled by user" })).status).toBe(200);
      return { ...push, code: "1032" };
    },
    // Daraja's query answers "being processed" until the fake is told otherwise.
    unanswered: (amount) => stkPush(driver, amount, PAYS),
    expiredCode: "1019",
    async success(payment) {
      const checkoutRequestId = (await rowOf(driver, payment.id)).checkoutRequestId!;
      const body = bench.fake.stkCallbackBody(checkoutRequestId);
      const url = bench.fake.pushes.get(checkoutRequestId)!.body.CallBackURL as string;
      return async () => (await bench.fake.postJson(url, body)).status;
    },
    recordsPostedSuccess: true,
    payoutBody: { phone_number: PAYS },
    credentials: () => [bench.fake.consumerSecret, bench.fake.passkey, bench.fake.initiatorPassword, Buffer.from(`${bench.fake.consumerKey}:${bench.fake.consumerSecret}`).toString("base64")],
  };
  return driver;
}

function paystackDriver(): Driver {
  const bench = withPaystack({ merchant: "Contract Paystack", cleanLedger: true, env: BENCH_ENV });
  const driver: Driver = {
    reach: () => bench,
    currency: "NGN",
    collection: "hosted",
    async pay(amount) {
      const payment = await initialize(driver, amount);
      await bench.fake.pay(payment.reference); // charge.success to the channel's webhook URL
      return payment;
    },
    async decline(amount) {
      // Paystack posts no webhook for a declined charge: the gateway learns it by asking (verify).
      const payment = await initialize(driver, amount);
      await bench.fake.pay(payment.reference, "failed");
      await askProvider(driver, payment);
      return { ...payment, code: "declined" };
    },
    // Until the payer pays, Paystack's verify says "abandoned": pending here.
    unanswered: (amount) => initialize(driver, amount),
    expiredCode: "abandoned",
    async success(payment) {
      bench.fake.switches.chargeWebhooks = false;
      try {
        await bench.fake.pay(payment.reference);
      } finally {
        bench.fake.switches.chargeWebhooks = true;
      }
      const event = bench.fake.chargeEvent(payment.reference);
      return async () => (await bench.fake.sendWebhook(bench.webhookUrl, event)).status;
    },
    recordsPostedSuccess: true,
    payoutBody: { phone_number: PAYS, currency: "KES" },
    credentials: () => [bench.fake.secretKey],
  };
  return driver;
}

/** The connectors under contract, and how each is driven. */
const DRIVEN: Record<ProviderName, () => Driver> = { sandbox: sandboxDriver, mpesa: mpesaDriver, paystack: paystackDriver };

describe("the capability map", () => {
  it("lists what each connector claims and lacks; every claimed capability's cases run below", () => {
    const connectors = createConnectors();
    const map = Object.fromEntries(providerNames.map((name) => [name, claimed(connectors[name])]));
    expect(map).toEqual({
      sandbox: ["chargeCard", "momo", "refunds", "payouts", "reconciliation"],
      mpesa: ["momo", "refunds", "payouts", "reconciliation"],
      paystack: ["hosted", "refunds", "payouts", "reconciliation"],
    });
    const lacks = Object.fromEntries(providerNames.map((name) => [name, CAPABILITIES.filter((c) => !map[name]!.includes(c))]));
    expect(lacks).toEqual({ sandbox: ["hosted"], mpesa: ["chargeCard", "hosted"], paystack: ["chargeCard", "momo"] });
    // Every connector is under contract, and the cases each runs are exactly its capabilities' cases.
    expect(Object.keys(DRIVEN).sort()).toEqual([...providerNames].sort());
    expect(Object.fromEntries(providerNames.map((name) => [name, [...new Set(map[name]!.flatMap((c) => CASES[c]))].sort()]))).toEqual({
      sandbox: ["decline", "duplicate callback", "late success", "pay", "payout", "reconciliation", "refund", "timeout"],
      mpesa: ["decline", "duplicate callback", "late success", "pay", "payout", "reconciliation", "refund", "timeout"],
      paystack: ["decline", "duplicate callback", "late success", "pay", "payout", "reconciliation", "refund", "timeout"],
    });
  });
});

describe.each(providerNames)("the %s connector", (name) => {
  const d = DRIVEN[name]();
  /** The payments of this connector's cases that completed, for the reconciliation's totals. */
  const completed: number[] = [];
  /** Those settled by a success posted to the gateway (duplicate callback, late success). */
  const settledByPostedSuccess: string[] = [];

  async function expectCompletedOnce(payment: Payment, amount: number) {
    expect(await settled(d, () => rowOf(d, payment.id))).toMatchObject({ status: "completed", amount: BigInt(amount), currency: d.currency });
    expect(await verify(d, payment.reference)).toMatchObject({ status: "completed", amount, currency: d.currency });
    expect(await settlingEvents(d, payment.id)).toEqual(["transaction.completed"]);
    completed.push(amount);
  }

  async function expectFailedOnce(payment: Payment, code: string) {
    expect(await settled(d, () => rowOf(d, payment.id))).toMatchObject({ status: "failed", failureCode: code });
    expect((await verify(d, payment.reference)).status).toBe("failed");
    expect(await settlingEvents(d, payment.id)).toEqual(["transaction.failed"]);
  }

  it("claims every capability its cases run through", () => {
    const needed = [d.collection, ...(d.card ? ["chargeCard"] : []), "refunds", "payouts", "reconciliation"];
    expect(claimed(createConnectors()[name])).toEqual(expect.arrayContaining(needed));
  });

  // The cases run in order on one gateway: the reconciliation last, over the payments the others made.
  it("pay: the provider's approval completes the payment, for its exact amount, once", async () => {
    await expectCompletedOnce(await d.pay(AMOUNT), AMOUNT);
    if (d.card) await expectCompletedOnce(await d.card.pay(25_000), 25_000);
  });

  it("decline: the provider's refusal fails the payment with its code, once", async () => {
    const declined = await d.decline(AMOUNT);
    await expectFailedOnce(declined, declined.code);
    if (d.card) {
      const card = await d.card.decline(25_000);
      await expectFailedOnce(card, card.code);
    }
  });

  it("timeout: with no answer the gateway asks, keeps the payment pending and asks again; past its lifetime the payment expires", async () => {
    const payment = await d.unanswered(AMOUNT);
    await askProvider(d, payment);
    expect((await rowOf(d, payment.id)).status).toBe("pending");
    // Time passing beyond the provider's lifetime of a payment (an STK push's minutes, Paystack's 24 hours).
    await prismaOf(d).transaction.update({ where: { id: payment.id }, data: { createdAt: new Date(Date.now() - 25 * 3_600_000) } });
    await askProvider(d, payment);
    await expectFailedOnce(payment, d.expiredCode);
  });

  it("duplicate callback: the provider's success sent twice, and twice at once, settles the payment once", async () => {
    const payment = await d.unanswered(AMOUNT);
    const send = await d.success(payment);
    expect(await send()).toBe(200);
    expect(await send()).toBe(200);
    expect(await Promise.all([send(), send()])).toEqual([200, 200]);
    await expectCompletedOnce(payment, AMOUNT);
    settledByPostedSuccess.push(payment.reference);
  });

  it("late success: a success that comes after the gateway asked and heard nothing settled completes the payment once", async () => {
    const payment = await d.unanswered(40_000);
    await askProvider(d, payment);
    expect((await rowOf(d, payment.id)).status).toBe("pending");
    expect(await (await d.success(payment))()).toBe(200);
    await expectCompletedOnce(payment, 40_000);
    settledByPostedSuccess.push(payment.reference);
  });

  it("refund: a whole payment refunded settles completed for the payment's amount", async () => {
    const payment = await d.pay(60_000);
    await expectCompletedOnce(payment, 60_000);
    const res = await d.reach().api.post("/v1/refunds", { transaction: payment.reference });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ amount: 60_000, currency: d.currency });
    const refund = await settled(d, async () => (await d.reach().api.get(`/v1/refunds/${res.body.data.reference}`)).body.data as { status: string });
    expect(refund).toMatchObject({ status: "completed", amount: 60_000, currency: d.currency });
    expect((await prismaOf(d).event.findMany({ where: { refundId: res.body.data.id } })).map((e) => e.type)).toEqual(["refund.completed"]);
  });

  it("payout: a payout settles completed for its amount, once", async () => {
    const res = await d.reach().api.post("/v1/payouts", { amount: 70_000, payment_channel_id: d.reach().channelId, reference: "CONTRACT-1", description: "Contract payout", ...d.payoutBody });
    expect(res.status, res.text).toBe(201);
    const payout = await settled(d, async () => (await d.reach().api.get(`/v1/payouts/${res.body.data.id}`)).body.data as { status: string });
    expect(payout).toMatchObject({ status: "completed", amount: 70_000 });
    expect((await prismaOf(d).event.findMany({ where: { payoutId: res.body.data.id } })).map((e) => e.type)).toEqual(["payout.completed"]);
  });

  it("reconciliation: the day's report completes with the cases' completed payments, and differs only where the provider has no record", async () => {
    const res = await d.reach().api.post("/v1/reconciliations", { payment_channel_id: d.reach().channelId, date: today() });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ status: "completed", error: null });
    const missingThere = d.recordsPostedSuccess ? [] : settledByPostedSuccess;
    expect(res.body.data.items.map((i: { kind: string; reference: string }) => [i.kind, i.reference]).sort()).toEqual(missingThere.map((r) => ["missing_there", r]).sort());
    expect(res.body.data.summary).toMatchObject({
      provider: name,
      differences: missingThere.length,
      gateway: { completed_totals: { [d.currency]: completed.reduce((sum, amount) => sum + amount, 0) } },
    });
  });

  it("provider calls: the cases' HTTP exchanges are on record, each with its payment, refund or payout, and none holds a secret", async () => {
    const { gw } = d.reach();
    await gw.gateway.services.providerCalls.flush();
    const rows = await prismaOf(d).providerCall.findMany({ orderBy: { id: "asc" } });
    if (!d.credentials) return void expect(rows).toEqual([]); // the sandbox answers in-process: no HTTP, nothing to record
    expect(rows.length).toBeGreaterThan(0);
    expect(new Set(rows.map((r) => r.connector))).toEqual(new Set([name]));
    // Every kind of money object the cases moved has its calls: collections, the refund and the payout.
    expect(rows.some((r) => r.transactionId !== null)).toBe(true);
    expect(rows.some((r) => r.refundId !== null)).toBe(true);
    expect(rows.some((r) => r.payoutId !== null)).toBe(true);
    assertNoSecrets(rows, { known: d.credentials() });
  });
});
