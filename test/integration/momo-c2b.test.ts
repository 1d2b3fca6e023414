import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { setTimeout as delay } from "node:timers/promises";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * How long the gateway waits for the merchant's validation verdict: enough for the loopback site to answer on a busy
 * machine (a verdict that came late would be replaced by the fallback), while the slow site's test stays short.
 */
const VALIDATION_TIMEOUT_MS = 3_000;

/** The built-in sandbox's magic numbers, and C2B register / validation / confirmation / simulate. */
let fake: FakeDaraja;
let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let sandboxChannel: number;
let mpesaChannel: number;
let merchantSite: Awaited<ReturnType<typeof startMerchantSite>>;

const prisma = () => gw.gateway.db.prisma;

async function startMerchantSite() {
  const site = {
    url: "",
    received: [] as { path: string; body: any }[],
    validationReply: { ResultCode: "0", ResultDesc: "Accepted" } as unknown,
    validationDelayMs: 0,
    /** Confirmations answered 500 before the site starts accepting them (a merchant server briefly down). */
    confirmFailures: 0,
    /** How the site answers a confirmation (after any failures): JSON by default. */
    confirmReply: { contentType: "application/json", body: JSON.stringify({ ok: true }) },
    close: async () => {},
  };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    site.received.push({ path: req.url ?? "", body: JSON.parse(Buffer.concat(chunks).toString() || "null") });
    // A slow merchant site, on purpose (the validation timeout's test).
    if (req.url === "/validate" && site.validationDelayMs) await delay(site.validationDelayMs);
    if (req.url === "/confirm" && site.confirmFailures > 0) {
      site.confirmFailures--;
      res.writeHead(500).end();
      return;
    }
    if (req.url === "/confirm") {
      res.writeHead(200, { "content-type": site.confirmReply.contentType }).end(site.confirmReply.body);
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(site.validationReply));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  site.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  site.close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return site;
}

beforeAll(async () => {
  fake = await startFakeDaraja();
  merchantSite = await startMerchantSite();
  gw = await startTestGateway({
    env: {
      ...darajaGatewayEnv(fake),
      SANDBOX_STK_DELAY_MS: "50",
      // The runner works (C2B forwards are jobs); STK reconciliation runs only when a test makes it due.
      JOB_POLL_INTERVAL_MS: "3600000",
      STK_CALLBACK_OVERDUE_MS: "3600000",
      C2B_VALIDATION_TIMEOUT_MS: String(VALIDATION_TIMEOUT_MS),
      RATE_LIMIT_ENABLED: "false",
      // The merchant's site is on loopback; a test-mode gateway calls it only with this setting.
      ALLOW_PRIVATE_URLS: "true",
    },
  });
  fake.switches.callbackOrigin = gw.url;
  const merchant = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
  const create = async (provider: string, config: Record<string, unknown>) => {
    const res = await api.post("/api/payment-channels/create", { name: provider, provider, config });
    expect(res.status, res.text).toBe(201);
    return res.body.channel.id as number;
  };
  sandboxChannel = await create("sandbox", {});
  mpesaChannel = await create("mpesa", fake.channelConfig());
});

afterAll(async () => {
  await gw?.close();
  await fake?.close();
  await merchantSite?.close();
});

describe("sandbox STK magic numbers", () => {
  const statusOf = (reference: string) => api.get(`/api/momo/stk-status/${reference}`).then((r) => r.body.transaction.status as string);

  it.each([
    ["254708374149", "completed", null],
    ["254700000001", "failed", "1"],
    ["254700001032", "failed", "1032"],
    ["254700001037", "failed", "1037"],
    ["254700002001", "failed", "2001"],
  ])("%s -> %s %s", async (phone, expected, code) => {
    const res = await api.post("/api/momo/stk-push", { amount: 10000, phone_number: phone, payment_channel_id: sandboxChannel, reference: "SBX", description: "Test" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.transaction).toMatchObject({ status: "pending", phone_number: phone });
    const t = res.body.transaction;
    expect(await until(() => statusOf(t.reference), (s) => s !== "pending")).toBe(expected);
    const stored = await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } });
    expect(stored.failureCode).toBe(code);
    expect(stored.paymentMethod).toBe("momo_stk");
    if (expected === "completed") expect(stored.providerReference).toMatch(/^SBX/);
    expect(await prisma().event.count({ where: { transactionId: t.id } })).toBe(2);
    expect((await prisma().event.findMany({ where: { transactionId: t.id }, orderBy: { id: "asc" } })).map((e) => e.type)).toEqual(["transaction.pending", `transaction.${expected}`]);
  });

  it("254700001019 never answers; the reconciler expires it (1019)", async () => {
    const res = await api.post("/api/momo/stk-push", { amount: 10000, phone_number: "254700001019", payment_channel_id: sandboxChannel });
    const t = res.body.transaction;
    // The sandbox answers its other numbers after SANDBOX_STK_DELAY_MS (50): this one never does.
    await expectNothingMoreWithin(150, async () => (await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).status, "no answer from the sandbox");
    const makeDue = () => prisma().job.updateMany({ where: { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } }, data: { runAt: new Date(0) } });
    await makeDue();
    expect(await gw.gateway.services.jobs.runDueJobs(["transaction.reconcile"])).toBe(1);
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).status).toBe("pending");
    await prisma().transaction.update({ where: { id: t.id }, data: { createdAt: new Date(Date.now() - 10 * 60_000) } });
    await makeDue();
    expect(await gw.gateway.services.jobs.runDueJobs(["transaction.reconcile"])).toBe(1);
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).toMatchObject({ status: "failed", failureCode: "1019" });
  });
});

describe("C2B", () => {
  it("registers the gateway's own URLs with Daraja and stores the merchant's", async () => {
    const res = await api.post("/api/momo/register-c2b-urls", {
      payment_channel_id: mpesaChannel,
      confirmation_url: `${merchantSite.url}/confirm`,
      validation_url: `${merchantSite.url}/validate`,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ status: "success", message: "C2B URLs registered", urls: { confirmation: `${merchantSite.url}/confirm`, validation: `${merchantSite.url}/validate` } });
    const registered = fake.registered!;
    expect(registered.ResponseType).toBe("Completed");
    expect(registered.ShortCode).toBe(fake.shortcode);
    expect(registered.ConfirmationURL).toMatch(/^https:\/\/pay\.gateway\.test\/callbacks\/daraja\/[0-9a-f]+\/c2b\/confirmation$/);
    expect(registered.ValidationURL).toMatch(/\/c2b\/validation$/);
    for (const url of [registered.ConfirmationURL, registered.ValidationURL]) {
      for (const word of ["mpesa", "safaricom", "exe", "exec", "cmd", "sql", "query"]) expect(url.toLowerCase()).not.toContain(word);
    }
  });

  it("relays the merchant's validation verdict, and falls back to ResponseType on timeout", async () => {
    const path = new URL(fake.registered!.ValidationURL).pathname;
    const payload = { TransactionType: "Pay Bill", TransID: "VAL0000001", TransTime: "20231121121325", TransAmount: "5.00", BusinessShortCode: fake.shortcode, BillRefNumber: "ACC1", MSISDN: "254708374149", FirstName: "J" };
    merchantSite.validationReply = { ResultCode: "C2B00012", ResultDesc: "Rejected" };
    expect((await fake.postJson(`${gw.url}${path}`, payload)).body).toEqual({ ResultCode: "C2B00012", ResultDesc: "Rejected" });
    merchantSite.validationReply = { ResultCode: "0", ResultDesc: "Accepted" };
    expect((await fake.postJson(`${gw.url}${path}`, payload)).body).toEqual({ ResultCode: "0", ResultDesc: "Accepted" });
    merchantSite.validationDelayMs = 3 * VALIDATION_TIMEOUT_MS;
    try {
      expect((await fake.postJson(`${gw.url}${path}`, payload)).body).toEqual({ ResultCode: "0", ResultDesc: "Accepted" });
    } finally {
      merchantSite.validationDelayMs = 0;
    }
    const forwarded = merchantSite.received.filter((r) => r.path === "/validate");
    expect(forwarded.at(-1)!.body).toMatchObject({ TransID: "VAL0000001", BillRefNumber: "ACC1" });
  });

  it("records a confirmation once per TransID, forwards it once, and acknowledges every delivery", async () => {
    const path = new URL(fake.registered!.ConfirmationURL).pathname;
    const payload = { TransactionType: "Pay Bill", TransID: "RKL51ZDR4F", TransTime: "20231121121325", TransAmount: "5.00", BusinessShortCode: fake.shortcode, BillRefNumber: "INV-9", InvoiceNumber: "", OrgAccountBalance: "25.00", ThirdPartyTransID: "", MSISDN: "2547 ***** 126", FirstName: "Jane", MiddleName: "", LastName: "" };
    const acks = await Promise.all([1, 2, 3].map(() => fake.postJson(`${gw.url}${path}`, payload)));
    for (const ack of acks) expect(ack).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Success" } });
    const rows = await prisma().transaction.findMany({ where: { providerReference: "RKL51ZDR4F" } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "completed", paymentMethod: "momo_c2b", amount: 500n, currency: "KES", clientReference: "INV-9", phoneNumber: null, channelId: mpesaChannel });
    const forwards = await until(async () => merchantSite.received.filter((r) => r.path === "/confirm" && r.body.TransID === "RKL51ZDR4F"), (f) => f.length > 0);
    // Its forward job is done (deleted) once delivered: after that, no second forward can come.
    await until(() => prisma().job.count({ where: { kind: "momo.c2b_forward", payload: { path: ["reference"], equals: "RKL51ZDR4F" } } }), (n) => n === 0);
    expect(merchantSite.received.filter((r) => r.path === "/confirm" && r.body.TransID === "RKL51ZDR4F")).toHaveLength(1);
    expect(forwards[0]!.body.TransAmount).toBe("5.00");
  });

  it("retries forwarding a confirmation the merchant's server refused, on the job runner", async () => {
    const path = new URL(fake.registered!.ConfirmationURL).pathname;
    merchantSite.confirmFailures = 1;
    const payload = { TransactionType: "Pay Bill", TransID: "RKL51RETRY", TransTime: "20231121121325", TransAmount: "7.00", BusinessShortCode: fake.shortcode, BillRefNumber: "INV-R", MSISDN: "254708374149", FirstName: "J" };
    expect(await fake.postJson(`${gw.url}${path}`, payload)).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Success" } });
    // The first forward gets a 500; the job retries after its backoff (about a second) and the second gets through.
    const forwards = await until(async () => merchantSite.received.filter((r) => r.path === "/confirm" && r.body.TransID === "RKL51RETRY"), (f) => f.length >= 2);
    expect(forwards.map((f) => f.body)).toEqual([payload, payload]);
    await until(() => prisma().job.count({ where: { kind: "momo.c2b_forward" } }), (n) => n === 0);
  });

  it("delivers a confirmation answered with any 2xx, JSON or not, once and without a retry", async () => {
    const path = new URL(fake.registered!.ConfirmationURL).pathname;
    merchantSite.confirmReply = { contentType: "text/plain", body: "OK" };
    try {
      const payload = { TransactionType: "Pay Bill", TransID: "RKL51PLAIN", TransTime: "20231121121325", TransAmount: "3.00", BusinessShortCode: fake.shortcode, BillRefNumber: "INV-P", MSISDN: "254708374149", FirstName: "J" };
      expect(await fake.postJson(`${gw.url}${path}`, payload)).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Success" } });
      const plain = () => merchantSite.received.filter((r) => r.path === "/confirm" && r.body.TransID === "RKL51PLAIN");
      await until(async () => plain(), (f) => f.length > 0);
      // Delivered: the job is gone. An attempt counted as failed would stay queued and be sent again after its backoff.
      expect(await until(() => prisma().job.count({ where: { kind: "momo.c2b_forward" } }), (n) => n === 0)).toBe(0);
      expect(plain()).toHaveLength(1);
    } finally {
      merchantSite.confirmReply = { contentType: "application/json", body: JSON.stringify({ ok: true }) };
    }
  });

  it("a confirmation on a wrong token path is a 404", async () => {
    const res = await fake.postJson(`${gw.url}/callbacks/daraja/abcdef/c2b/confirmation`, { TransID: "X", TransAmount: "1.00" });
    expect(res.status).toBe(404);
  });

  it("simulates on an mpesa sandbox channel through Daraja and answers with the documented shape", async () => {
    const res = await api.post("/api/momo/simulate-c2b", { payment_channel_id: mpesaChannel, amount: 25000, phone_number: "254708374149", reference: "SIM-1" });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ status: "success", message: "C2B payment simulated", transaction: { amount: 25000, phone_number: "254708374149", reference: "SIM-1", status: "completed" } });
    const sim = fake.requests.find((r) => r.path === "/mpesa/c2b/v1/simulate")!;
    expect(sim.body).toMatchObject({ ShortCode: fake.shortcode, CommandID: "CustomerPayBillOnline", Amount: 250, Msisdn: "254708374149", BillRefNumber: "SIM-1" });
    const stored = await prisma().transaction.findFirstOrThrow({ where: { clientReference: "SIM-1" } });
    expect(stored).toMatchObject({ status: "completed", paymentMethod: "momo_c2b", amount: 25000n, phoneNumber: "+254708374149" });
  });

  it("simulates on a sandbox channel with no network and forwards the confirmation", async () => {
    await api.post("/api/momo/register-c2b-urls", { payment_channel_id: sandboxChannel, confirmation_url: `${merchantSite.url}/confirm`, validation_url: `${merchantSite.url}/validate` });
    const res = await api.post("/api/momo/simulate-c2b", { payment_channel_id: sandboxChannel, amount: 5000, phone_number: "254700000099", reference: "SBX-C2B" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.transaction).toEqual({ amount: 5000, phone_number: "254700000099", reference: "SBX-C2B", status: "completed" });
    const forwarded = await until(async () => merchantSite.received.filter((r) => r.path === "/confirm" && r.body.BillRefNumber === "SBX-C2B"), (f) => f.length > 0);
    expect(forwarded).toHaveLength(1);
    // As Daraja does with validation enabled, the sandbox asked the validation URL first, with the same body.
    const validated = merchantSite.received.filter((r) => r.path === "/validate" && r.body.BillRefNumber === "SBX-C2B");
    expect(validated).toHaveLength(1);
    expect(validated[0]!.body).toEqual(forwarded[0]!.body);
  });

  it("a sandbox simulation the merchant's validation URL rejects is not paid, recorded or forwarded", async () => {
    merchantSite.validationReply = { ResultCode: "C2B00012", ResultDesc: "Invalid Account Number" };
    try {
      const res = await api.post("/api/momo/simulate-c2b", { payment_channel_id: sandboxChannel, amount: 5000, phone_number: "254708374149", reference: "SBX-REJECT" });
      expect(res.status, res.text).toBe(200);
      expect(res.body.transaction).toEqual({ amount: 5000, phone_number: "254708374149", reference: "SBX-REJECT", status: "failed" });
    } finally {
      merchantSite.validationReply = { ResultCode: "0", ResultDesc: "Accepted" };
    }
    expect(merchantSite.received.filter((r) => r.path === "/validate" && r.body.BillRefNumber === "SBX-REJECT")).toHaveLength(1);
    // Nothing was queued to forward, so nothing can arrive later.
    expect(await prisma().job.count({ where: { kind: "momo.c2b_forward", payload: { path: ["body", "BillRefNumber"], equals: "SBX-REJECT" } } })).toBe(0);
    expect(merchantSite.received.filter((r) => r.path === "/confirm" && r.body.BillRefNumber === "SBX-REJECT")).toHaveLength(0);
    expect(await prisma().transaction.count({ where: { clientReference: "SBX-REJECT" } })).toBe(0);
  });

  it("refuses simulation on a production channel (403) and bad input (400)", async () => {
    const prod = await api.post("/api/payment-channels/create", { name: "live", provider: "mpesa", config: fake.channelConfig({ environment: "production" }) });
    const res = await api.post("/api/momo/simulate-c2b", { payment_channel_id: prod.body.channel.id, amount: 5000, phone_number: "254708374149", reference: "X" });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ status: "error", code: "forbidden" });
    const bad = await api.post("/api/momo/register-c2b-urls", { payment_channel_id: sandboxChannel, confirmation_url: "not a url", validation_url: `${merchantSite.url}/v` });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/confirmation_url/);
  });
});
