import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * The one callback route family, /callbacks/:provider/:token/..., over real HTTP: every provider's
 * callbacks at its registry name (mpesa, sandbox, paystack) and at the URLs already registered with the
 * providers for existing channels (/callbacks/daraja/..., /callbacks/paystack/...), which stay served.
 * What channels are handed, the provider's reply and refusal shapes, and what a wrong path, token or
 * provider applies (nothing).
 */
let daraja: FakeDaraja;
let paystack: FakePaystack;
let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let mpesaChannel: number;
let sandboxChannel: number;
let paystackChannel: number;
/** Hex callback tokens, as in the URLs handed out. */
let mpesaToken: string;
let sandboxToken: string;
let paystackToken: string;

const PUBLIC_BASE_URL = "https://pay.gateway.test";
const prisma = () => gw.gateway.db.prisma;
const tokenOf = async (id: number) => Buffer.from((await prisma().paymentChannel.findUniqueOrThrow({ where: { id } })).callbackToken, "utf8").toString("hex");

async function post(path: string, body: unknown, headers: Record<string, string> = { "content-type": "application/json" }) {
  const response = await fetch(`${gw.url}${path}`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text };
}

async function stkPush(): Promise<{ id: number; checkoutRequestId: string; callbackUrl: string }> {
  const res = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: "254708374149", payment_channel_id: mpesaChannel });
  expect(res.status, res.text).toBe(200);
  const checkoutRequestId: string = res.body.transaction.checkout_request_id;
  return { id: res.body.transaction.id, checkoutRequestId, callbackUrl: String(daraja.pushes.get(checkoutRequestId)!.body.CallBackURL) };
}

const statusOf = async (id: number) => (await prisma().transaction.findUniqueOrThrow({ where: { id } })).status;
const eventCount = (transactionId: number) => prisma().event.count({ where: { transactionId } });

const c2bBody = (transId: string, amount = "25.00") => ({
  TransactionType: "Pay Bill", TransID: transId, TransTime: "20231121121325", TransAmount: amount, BusinessShortCode: "174379",
  BillRefNumber: "INV-9", InvoiceNumber: "", OrgAccountBalance: "25.00", ThirdPartyTransID: "", MSISDN: "254708374149", FirstName: "Amina", MiddleName: "", LastName: "",
});

beforeAll(async () => {
  daraja = await startFakeDaraja();
  paystack = await startFakePaystack();
  gw = await startTestGateway({
    env: {
      MPESA_BASE_URL: daraja.url,
      PAYSTACK_BASE_URL: paystack.url,
      PUBLIC_BASE_URL,
      SANDBOX_STK_DELAY_MS: "50",
      JOB_POLL_INTERVAL_MS: "3600000",
      STK_CALLBACK_OVERDUE_MS: "3600000",
      PAYOUT_RESULT_OVERDUE_MS: "3600000",
      RATE_LIMIT_ENABLED: "false",
    },
  });
  daraja.switches.callbackOrigin = gw.url;
  const merchant = await gw.createMerchant("Callbacks Ltd");
  api = apiClient(gw.url, merchant.testKey);
  const create = async (body: Record<string, unknown>) => {
    const res = await api.post("/api/payment-channels/create", body);
    expect(res.status, res.text).toBe(201);
    return res.body.channel as { id: number; webhook_url?: string };
  };
  paystackChannel = (await create({ name: "Paystack", provider: "paystack", config: paystack.channelConfig() })).id;
  sandboxChannel = (await create({ name: "Sandbox", provider: "sandbox" })).id;
  mpesaChannel = (await create({ name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig() })).id;
  [mpesaToken, sandboxToken, paystackToken] = await Promise.all([tokenOf(mpesaChannel), tokenOf(sandboxChannel), tokenOf(paystackChannel)]);
});

afterAll(async () => {
  await gw?.close();
  await daraja?.close();
  await paystack?.close();
});

describe("the URLs channels are given", () => {
  it("M-Pesa keeps /callbacks/daraja/<token>/...: Daraja refuses 'mpesa' anywhere in a callback URL", async () => {
    const { callbackUrl } = await stkPush();
    expect(callbackUrl).toBe(`${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/stk`);
    const channel = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: mpesaChannel } });
    const urls = gw.gateway.services.callbackUrls.of(channel);
    expect({ ...urls, payoutStatusResult: urls.payoutStatusResult?.("po_abc") }).toEqual({
      collection: `${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/stk`,
      c2bValidation: `${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/c2b/validation`,
      c2bConfirmation: `${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/c2b/confirmation`,
      payoutResult: `${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/b2c/result`,
      payoutTimeout: `${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/b2c/timeout`,
      payoutStatusResult: `${PUBLIC_BASE_URL}/callbacks/daraja/${mpesaToken}/b2c/status/po_abc`,
    });
    // C2B registration hands Daraja the same URLs (the fake refuses a forbidden word, as Daraja does).
    const registered = await api.post("/api/momo/register-c2b-urls", { payment_channel_id: mpesaChannel, confirmation_url: "http://93.184.215.14/confirm", validation_url: "http://93.184.215.14/validate" });
    expect(registered.status, registered.text).toBe(200);
    expect(daraja.registered).toMatchObject({ ConfirmationURL: urls.c2bConfirmation, ValidationURL: urls.c2bValidation });
    await prisma().momoC2bRegistration.delete({ where: { channelId: mpesaChannel } });
  });

  it("Paystack's webhook_url keeps /callbacks/paystack/<token>; only Paystack channels have one", async () => {
    const list = await api.get("/api/payment-channels/list");
    expect(list.status, list.text).toBe(200);
    const byId = new Map((list.body.channels as { id: number; webhook_url?: string }[]).map((c) => [c.id, c.webhook_url]));
    expect(byId.get(paystackChannel)).toBe(`${PUBLIC_BASE_URL}/callbacks/paystack/${paystackToken}`);
    expect(byId.get(mpesaChannel)).toBeUndefined();
    expect(byId.get(sandboxChannel)).toBeUndefined();
  });

  it("the sandbox's URLs are under its own name (it posts its results in process; these are for hand-made callbacks)", async () => {
    const channel = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: sandboxChannel } });
    expect(gw.gateway.services.callbackUrls.of(channel).collection).toBe(`${PUBLIC_BASE_URL}/callbacks/sandbox/${sandboxToken}/stk`);
  });
});

describe("Daraja's callbacks at /callbacks/mpesa/... and at the registered /callbacks/daraja/...", () => {
  it.each(["mpesa", "daraja"])("an STK result at /callbacks/%s/<token>/stk settles the push, acknowledged in Daraja's shape", async (segment) => {
    const push = await stkPush();
    const res = await post(`/callbacks/${segment}/${mpesaToken}/stk`, daraja.stkCallbackBody(push.checkoutRequestId));
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await statusOf(push.id)).toBe("completed");
  });

  it("the same result at both paths, concurrently and repeated, settles the push exactly once", async () => {
    const push = await stkPush();
    const body = daraja.stkCallbackBody(push.checkoutRequestId);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => post(`/callbacks/${i % 2 ? "mpesa" : "daraja"}/${mpesaToken}/stk`, body)));
    for (const answer of answers) expect(answer.json).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await statusOf(push.id)).toBe("completed");
    expect(await eventCount(push.id)).toBe(2); // transaction.pending, then transaction.completed
  });

  it("a C2B confirmation at either path is recorded once per TransID and acknowledged with Success", async () => {
    const body = c2bBody("CBR0000001");
    const first = await post(`/callbacks/mpesa/${mpesaToken}/c2b/confirmation`, body);
    const again = await post(`/callbacks/daraja/${mpesaToken}/c2b/confirmation`, body);
    for (const res of [first, again]) expect(res.json).toEqual({ ResultCode: 0, ResultDesc: "Success" });
    const recorded = await prisma().transaction.findMany({ where: { channelId: mpesaChannel, providerReference: "CBR0000001" } });
    expect(recorded.map((t) => [t.status, t.amount])).toEqual([["completed", 2500n]]);
  });

  it("a C2B validation with no merchant URLs registered is accepted in Daraja's validation reply shape", async () => {
    for (const segment of ["mpesa", "daraja"]) {
      const res = await post(`/callbacks/${segment}/${mpesaToken}/c2b/validation`, c2bBody(`CBV${segment}`));
      expect(res.json).toEqual({ ResultCode: "0", ResultDesc: "Accepted" });
    }
  });

  it("text no callback can carry is refused in Daraja's shape ({ResultCode:1}, 400) at both paths, and applies nothing", async () => {
    const push = await stkPush();
    const body = daraja.stkCallbackBody(push.checkoutRequestId);
    (body.Body.stkCallback as Record<string, unknown>).ResultDesc = "ok\u0000";
    for (const segment of ["mpesa", "daraja"]) {
      const res = await post(`/callbacks/${segment}/${mpesaToken}/stk`, body);
      expect(res.status).toBe(400);
      expect(res.json).toEqual({ ResultCode: 1, ResultDesc: "Rejected: Body.stkCallback.ResultDesc: must not contain control characters such as NUL (\\u0000)" });
    }
    const lone = await post(`/callbacks/mpesa/${mpesaToken}/c2b/confirmation`, `{"TransID":"CBR\\ud800","TransAmount":"1.00"}`);
    expect(lone.status).toBe(400);
    expect(lone.json.ResultDesc).toMatch(/^Rejected: TransID: must be valid Unicode/);
    expect(await statusOf(push.id)).toBe("pending");
  });

  it("a payload that is not Daraja's is refused in Daraja's shape, naming what is missing", async () => {
    const res = await post(`/callbacks/mpesa/${mpesaToken}/stk`, { Body: {} });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ ResultCode: 1, ResultDesc: "Rejected: Body.stkCallback: is required" });
    const c2b = await post(`/callbacks/mpesa/${mpesaToken}/c2b/confirmation`, { TransID: "CBX1", TransAmount: "0.00" });
    expect(c2b.json).toEqual({ ResultCode: 1, ResultDesc: 'Rejected: TransAmount: must be a positive amount in shillings, e.g. "10.00"' });
  });

  it("a body that is not JSON keeps the gateway's answers: 415 for another media type, 400 malformed_json", async () => {
    const push = await stkPush();
    const text = JSON.stringify(daraja.stkCallbackBody(push.checkoutRequestId));
    const plain = await post(`/callbacks/mpesa/${mpesaToken}/stk`, text, { "content-type": "text/plain" });
    expect(plain.status).toBe(415);
    expect(plain.json).toMatchObject({ status: "error", code: "unsupported_media_type" });
    const noType = await post(`/callbacks/daraja/${mpesaToken}/stk`, text, {});
    expect(noType.status).toBe(415);
    for (const bad of ["{not json", "", '{"__proto__":{"x":1}}']) {
      const res = await post(`/callbacks/mpesa/${mpesaToken}/stk`, bad);
      expect(res.status, bad).toBe(400);
      expect(res.json, bad).toMatchObject({ status: "error", code: "malformed_json" });
    }
    // With a charset, as some senders write it, the body is read.
    const withCharset = await post(`/callbacks/mpesa/${mpesaToken}/stk`, text, { "content-type": "Application/JSON; charset=utf-8" });
    expect(withCharset.json).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await statusOf(push.id)).toBe("completed");
  });

  it("a wrong token is a 404 at both paths and applies nothing; so is another provider's channel", async () => {
    const push = await stkPush();
    const body = daraja.stkCallbackBody(push.checkoutRequestId);
    for (const path of [
      `/callbacks/mpesa/${"ab".repeat(24)}/stk`,
      `/callbacks/daraja/${"ab".repeat(24)}/stk`,
      "/callbacks/mpesa/not-hex/stk",
      // The sandbox channel's token under mpesa: the path names the provider, and this channel is not M-Pesa's.
      `/callbacks/mpesa/${sandboxToken}/stk`,
      // A Paystack channel's token on Daraja's paths.
      `/callbacks/daraja/${paystackToken}/stk`,
    ]) {
      const res = await post(path, body);
      expect(res.status, path).toBe(404);
      expect(res.json, path).toMatchObject({ status: "error", code: "not_found" });
    }
    expect(await statusOf(push.id)).toBe("pending");
  });

  it("a path no connector serves is route_not_found, whatever the token", async () => {
    for (const path of [`/callbacks/mpesa/${mpesaToken}/nope`, `/callbacks/mpesa/${mpesaToken}`, `/callbacks/daraja/${mpesaToken}/stk/extra`, `/callbacks/stripe/${mpesaToken}/stk`, `/callbacks/mpesa/${mpesaToken}/b2c/status/`]) {
      const res = await post(path, {});
      expect(res.status, path).toBe(404);
      expect(res.json, path).toMatchObject({ code: "route_not_found" });
    }
    const get = await fetch(`${gw.url}/callbacks/mpesa/${mpesaToken}/stk`);
    expect(get.status).toBe(404);
  });
});

describe("the sandbox's Daraja-format callbacks at /callbacks/sandbox/... and /callbacks/daraja/...", () => {
  async function pendingPayout() {
    // 254700001019: the sandbox posts no result of its own.
    const res = await api.post("/v1/payouts", { amount: 150000, phone_number: "254700001019", payment_channel_id: sandboxChannel });
    expect(res.status, res.text).toBe(201);
    return prisma().payout.findUniqueOrThrow({ where: { id: res.body.data.id } });
  }
  const result = (providerRequestId: string, receipt: string) => ({
    Result: {
      ResultType: 0, ResultCode: 0, ResultDesc: "The service request is processed successfully.", OriginatorConversationID: providerRequestId, ConversationID: "AG_1", TransactionID: receipt,
      ResultParameters: { ResultParameter: [{ Key: "TransactionAmount", Value: 1500 }, { Key: "TransactionReceipt", Value: receipt }] },
    },
  });

  it.each(["sandbox", "daraja"])("a B2C result at /callbacks/%s/<token>/b2c/result completes the payout", async (segment) => {
    const payout = await pendingPayout();
    const res = await post(`/callbacks/${segment}/${sandboxToken}/b2c/result`, result(payout.providerRequestId, `SBR${segment.slice(0, 4).toUpperCase()}`));
    expect(res.json).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await prisma().payout.findUniqueOrThrow({ where: { id: payout.id } })).toMatchObject({ status: "completed", providerReference: `SBR${segment.slice(0, 4).toUpperCase()}` });
  });

  it("a status answer at /b2c/status/<reference> settles that payout", async () => {
    const payout = await pendingPayout();
    const res = await post(`/callbacks/daraja/${sandboxToken}/b2c/status/${payout.reference}`, result(payout.providerRequestId, "SBSTATUS1"));
    expect(res.json).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    expect(await prisma().payout.findUniqueOrThrow({ where: { id: payout.id } })).toMatchObject({ status: "completed", providerReference: "SBSTATUS1" });
  });

  it("a queue timeout settles nothing itself: the payout is asked about at once (the simulator then reports it expired)", async () => {
    const payout = await pendingPayout();
    const timeout = await post(`/callbacks/sandbox/${sandboxToken}/b2c/timeout`, { Result: { ResultCode: "SFC_IC0003", OriginatorConversationID: payout.providerRequestId } });
    expect(timeout.json).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    // Without the timeout the status query would wait an hour (PAYOUT_RESULT_OVERDUE_MS below).
    const settled = await until(() => prisma().payout.findUniqueOrThrow({ where: { id: payout.id } }), (p) => p.status !== "pending");
    expect(settled).toMatchObject({ status: "failed", failureCode: "1019" });
  });

  it("the sandbox channel's token at /callbacks/paystack/ is a 404", async () => {
    expect((await post(`/callbacks/paystack/${sandboxToken}`, {})).status).toBe(404);
  });
});

describe("Paystack's webhooks at /callbacks/paystack/<token>", () => {
  const sign = (raw: string, key = paystack.secretKey) => createHmac("sha512", key).update(raw).digest("hex");
  const webhookPath = () => `/callbacks/paystack/${paystackToken}`;

  async function paidReference(): Promise<string> {
    const init = await api.post("/api/transactions/initialize", { amount: 250000, email: "payer@example.com", currency: "NGN", payment_channel_id: paystackChannel });
    expect(init.status, init.text).toBe(200);
    await paystack.pay(init.body.reference); // paid at Paystack; its webhook is sent by hand below
    return init.body.reference;
  }
  const statusByReference = async (reference: string) => (await prisma().transaction.findUniqueOrThrow({ where: { reference } })).status;

  it("a signed charge.success is verified with Paystack and applied; acknowledged with Paystack's {status:'success'}", async () => {
    const reference = await paidReference();
    const res = await paystack.sendWebhook(`${gw.url}${webhookPath()}`, paystack.chargeEvent(reference));
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ status: "success" });
    expect(await statusByReference(reference)).toBe("completed");
  });

  it("the signature covers the exact bytes: odd spacing and any content type are read as sent", async () => {
    const reference = await paidReference();
    const raw = `{ "event" :  "charge.success",\n "data": ${JSON.stringify(paystack.verifyData(reference))} }  `;
    const res = await post(webhookPath(), raw, { "content-type": "text/plain", "x-paystack-signature": sign(raw) });
    expect(res.status, res.text).toBe(200);
    await until(() => statusByReference(reference), (status) => status === "completed");
  });

  it("a wrong or missing signature is a 401 that changes nothing; a wrong token a 404", async () => {
    const reference = await paidReference();
    const raw = JSON.stringify(paystack.chargeEvent(reference));
    for (const headers of [{ "x-paystack-signature": sign(raw, "sk_test_someone_else") }, {}, { "x-paystack-signature": sign(`${raw} `) }] as Record<string, string>[]) {
      const res = await post(webhookPath(), raw, { "content-type": "application/json", ...headers });
      expect(res.status).toBe(401);
      expect(res.json).toMatchObject({ status: "error", code: "invalid_signature" });
    }
    const wrongToken = await post(`/callbacks/paystack/${"cd".repeat(24)}`, raw, { "content-type": "application/json", "x-paystack-signature": sign(raw) });
    expect(wrongToken.status).toBe(404);
    const mpesaTokenHere = await post(`/callbacks/paystack/${mpesaToken}`, raw, { "content-type": "application/json", "x-paystack-signature": sign(raw) });
    expect(mpesaTokenHere.status).toBe(404);
    expect(await statusByReference(reference)).toBe("pending");
  });

  it("a body over Paystack's 256 KiB is a 413, with or without a length; a path below the token is not Paystack's", async () => {
    const big = JSON.stringify({ event: "charge.success", data: { reference: "x", pad: "a".repeat(300 * 1024) } });
    const sized = await post(webhookPath(), big, { "content-type": "application/json", "x-paystack-signature": sign(big) });
    expect(sized.status).toBe(413);
    // Chunked (no Content-Length): read, then refused by the connector's limit.
    const chunked = await fetch(`${gw.url}${webhookPath()}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-paystack-signature": sign(big) },
      body: new ReadableStream({ start(controller) { controller.enqueue(new TextEncoder().encode(big)); controller.close(); } }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    for (const path of [`${webhookPath()}/`, `${webhookPath()}/stk`]) expect((await post(path, "{}")).status, path).toBe(404);
  });
});
