import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withPaystack, type PaystackBench } from "../support/benches.ts";
import { apiClient } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { withSandboxMerchants, type SandboxMerchants } from "../support/sandbox-merchants.ts";
import { until } from "../support/wait.ts";

/**
 * Subscription invoices charged on the other kinds of saved method: a Paystack card (charge_authorization), paid at
 * once, or paused for the payer's bank (the invoice waits with the charge pending and its next_action, and is paid
 * through the invoice.charge_settled job once the payer finishes); and an M-Pesa phone, whose charge is an STK push
 * the payer approves (M-Pesa has no charge without the payer), the invoice paid then.
 */
const CHARGE_PATH = "/transaction/charge_authorization";
type Invoice = Record<string, any>;

describe("subscription invoices on a Paystack card", () => {
  let { fake, gw, api } = {} as PaystackBench;
  // The reconcile job asks Paystack long after these tests: what settles the paused charge here is the payer's return.
  withPaystack({ env: { RATE_LIMIT_ENABLED: "false", PAYSTACK_VERIFY_AFTER_MS: "600000" } }, (bench) => {
    ({ fake, gw, api } = bench);
  });
  afterAll(() => expectCleanLedger(gw));

  let customer: number;
  let method: string;
  let authorizationCode: string;
  beforeAll(async () => {
    customer = (await api.post("/v1/customers", { email: "member@example.com" })).body.data.id;
    const init = await api.post("/api/transactions/initialize", { amount: 10_000, currency: "NGN", customer, save_payment_method: true });
    expect(init.status, init.text).toBe(200);
    await fake.pay(init.body.reference);
    const listed = await until(() => api.get(`/v1/customers/${customer}/payment-methods`), (r) => r.body?.data?.length === 1);
    method = listed.body.data[0].id;
    authorizationCode = fake.transactions.get(init.body.reference)!.authorization!.authorization_code;
  });

  async function subscribe(amount: number): Promise<string> {
    const plan = await api.post("/v1/plans", { name: "Club", amount, currency: "NGN", interval: "month" });
    expect(plan.status, plan.text).toBe(201);
    const sub = await api.post("/v1/subscriptions", { customer, plan: plan.body.data.id, payment_method: method });
    expect(sub.status, sub.text).toBe(201);
    return sub.body.data.id as string;
  }
  const invoicesOf = async (sub: string) => (await api.get(`/v1/invoices?subscription=${sub}`)).body.data as Invoice[];
  const chargesOf = (reference: string) => fake.requests.filter((r) => r.path === CHARGE_PATH && r.body?.reference === reference);

  it("bills through charge_authorization on the saved authorization: the invoice is paid by that charge", async () => {
    const sub = await subscribe(45_000);
    const [invoice] = await until(() => invoicesOf(sub), (list) => list[0]?.status === "paid");
    expect(invoice).toMatchObject({ subscription: sub, customer, amount_due: 45_000, currency: "NGN", status: "paid", attempts: 1, next_attempt_at: null });
    expect(invoice!.charges).toEqual([expect.objectContaining({ attempt: 1, status: "completed", transaction_reference: invoice!.transaction_reference })]);
    expect(chargesOf(invoice!.transaction_reference).map((r) => r.body)).toEqual([
      { authorization_code: authorizationCode, email: "member@example.com", amount: 45_000, currency: "NGN", reference: invoice!.transaction_reference },
    ]);
    const verify = await api.get(`/api/transactions/verify/${invoice!.transaction_reference}`);
    expect(verify.body).toMatchObject({ status: "completed", transaction: { amount: 45_000, currency: "NGN" } });
    expect(JSON.stringify(invoice)).not.toContain(authorizationCode);
  });

  it("a charge lost on its way to Paystack (a 503, nothing charged): the invoice's job runs again, asks by reference, then charges it once; paid on attempt 1", async () => {
    fake.switches.failNext = { path: CHARGE_PATH, status: 503, body: { status: false, message: "Service unavailable" } };
    const sub = await subscribe(47_000);
    // The reconcile job asks only in ten minutes here (and never charges): what pays it is the invoice's own job.
    const [paid] = await until(() => invoicesOf(sub), (list) => list[0]?.status === "paid");
    const reference = paid!.transaction_reference as string;
    expect(paid).toMatchObject({ status: "paid", attempts: 1, charges: [{ attempt: 1, status: "completed", transaction_reference: reference }] });
    const asked = fake.requests.filter((r) => (r.path === CHARGE_PATH && r.body?.reference === reference) || r.path === `/transaction/verify/${reference}`).map((r) => (r.path === CHARGE_PATH ? "charge" : "verify"));
    expect(asked).toEqual(["charge", "verify", "charge"]);
    expect(fake.transactions.get(reference)).toMatchObject({ status: "success", amount: 47_000 });
  });

  it("a paused charge (send_otp): the invoice waits, charge pending with next_action; the payer finishes and it is paid via invoice.charge_settled", async () => {
    fake.switches.chargeOutcome = "paused";
    // The payer finishes at Paystack's page and comes back: settled by the return's verify, not by a webhook.
    fake.switches.chargeWebhooks = false;
    let sub: string;
    let waiting: Invoice | undefined;
    try {
      sub = await subscribe(52_000);
      // The charge is committed before Paystack is asked; the invoice shows where the payer goes once Paystack paused it.
      [waiting] = await until(() => invoicesOf(sub), (list) => !!list[0]?.next_action);
    } finally {
      fake.switches.chargeOutcome = "success";
    }
    const reference = waiting!.transaction_reference as string;
    const checkoutUrl = `${gw.url}/payment/checkout/${reference}`;
    expect(waiting!).toMatchObject({ status: "open", attempts: 0, next_action: { type: "redirect", url: checkoutUrl }, charges: [{ attempt: 1, status: "pending", transaction_reference: reference }] });
    const charge = await api.get(`/api/transactions/verify/${reference}`);
    expect(charge.body.status).toBe("pending");
    expect(chargesOf(reference)).toHaveLength(1);
    expect((await api.get(`/v1/subscriptions/${sub!}`)).body.data.status).toBe("active");

    // The payer is sent on to Paystack's page for the bank's step, completes it, and returns.
    const page = await fetch(checkoutUrl, { redirect: "manual" });
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe(`${fake.url}/checkout/${fake.transactions.get(reference)!.access_code}`);
    await fake.pay(reference);
    fake.switches.chargeWebhooks = true;
    await fetch(`${checkoutUrl}/return?reference=${reference}`, { redirect: "manual" });

    const [paid] = await until(() => invoicesOf(sub!), (list) => list[0]?.status === "paid");
    expect(paid).toMatchObject({ id: waiting!.id, status: "paid", attempts: 1, next_attempt_at: null, next_action: null, transaction_reference: reference, charges: [{ attempt: 1, status: "completed" }] });
    expect(chargesOf(reference)).toHaveLength(1);
    const events = await gw.gateway.db.prisma.event.findMany({ where: { type: { startsWith: "invoice." } }, orderBy: { id: "asc" } });
    expect(events.filter((e) => (e.payload as { invoice: Invoice }).invoice.id === paid!.id).map((e) => e.type)).toEqual(["invoice.created", "invoice.paid"]);
  });
});

describe("subscription invoices on an M-Pesa method (sandbox)", () => {
  // The sandbox payer never answers by itself here: the test is the payer, approving each prompt (a Daraja-format
  // STK result at the sandbox's callback URL), so the charge is seen pending before it is approved.
  const bench = withSandboxMerchants({ SANDBOX_STK_DELAY_MS: "600000" });
  let { gw, api } = {} as SandboxMerchants;
  beforeAll(() => {
    ({ gw, api } = bench);
  });
  const prisma = () => gw.gateway.db.prisma;

  /** The payer approves the prompt of the payment `reference` on the phone: the sandbox's STK result, posted as Daraja does. */
  async function approve(reference: string) {
    // The push's CheckoutRequestID is on its attempt (a checkout's push) or on the payment (an API push).
    const pushOf = async () => {
      const t = await prisma().transaction.findUniqueOrThrow({ where: { reference }, include: { attempts: { where: { status: "pending" } } } });
      return { t, checkoutRequestId: t.checkoutRequestId ?? t.attempts.find((a) => a.checkoutRequestId)?.checkoutRequestId };
    };
    const { t, checkoutRequestId } = await until(pushOf, (push) => !!push.checkoutRequestId);
    const channel = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: t.channelId! } });
    const token = Buffer.from(channel.callbackToken, "utf8").toString("hex");
    const body = {
      Body: {
        stkCallback: {
          MerchantRequestID: "sbx-approve", CheckoutRequestID: checkoutRequestId, ResultCode: 0, ResultDesc: "The service request is processed successfully.",
          CallbackMetadata: { Item: [{ Name: "Amount", Value: Number(t.amount / 100n) }, { Name: "MpesaReceiptNumber", Value: `SBA${reference.slice(-7).toUpperCase()}` }, { Name: "PhoneNumber", Value: 254708374149 }] },
        },
      },
    };
    const answer = await apiClient(gw.url).post(`/callbacks/sandbox/${token}/stk`, body);
    expect(answer.body, answer.text).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  }

  it("the invoice's charge is an STK push, pending until the payer approves; then the invoice is paid", async () => {
    const customer = (await api.post("/v1/customers", { email: "commuter@example.com" })).body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 1_000, currency: "KES", customer });
    const pushed = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/mpesa`, { phone: "254708374149", save_payment_method: true });
    expect(pushed.status, pushed.text).toBe(202);
    await approve(init.body.reference);
    const [method] = (await until(() => api.get(`/v1/customers/${customer}/payment-methods`), (r) => r.body?.data?.length === 1)).body.data;
    expect(method).toMatchObject({ type: "mpesa", mpesa: { phone: "2547*****149" } });

    const plan = (await api.post("/v1/plans", { name: "Fare", amount: 30_000, currency: "KES", interval: "week" })).body.data.id;
    const sub = (await api.post("/v1/subscriptions", { customer, plan, payment_method: method.id })).body.data.id as string;
    const invoicesOf = async () => (await api.get(`/v1/invoices?subscription=${sub}`)).body.data as Invoice[];
    const [waiting] = await until(invoicesOf, (list) => list[0]?.charges?.length === 1);
    const reference = waiting!.transaction_reference as string;
    expect(waiting).toMatchObject({ status: "open", attempts: 0, charges: [{ attempt: 1, status: "pending" }] });
    const charge = await prisma().transaction.findUniqueOrThrow({ where: { reference } });
    expect(charge).toMatchObject({ status: "pending", paymentMethod: "momo_stk", phoneNumber: expect.stringContaining("708374149"), amount: 30_000n });

    await approve(reference);
    const [paid] = await until(invoicesOf, (list) => list[0]?.status === "paid");
    expect(paid).toMatchObject({ id: waiting!.id, attempts: 1, transaction_reference: reference, charges: [{ attempt: 1, status: "completed" }] });
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.status).toBe("completed");
    expect(await prisma().transaction.count({ where: { invoiceId: charge.invoiceId } })).toBe(1);
  });
});
