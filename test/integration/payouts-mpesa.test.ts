import { describe, expect, it } from "vitest";
import { BENCH_ENV, withDaraja, type DarajaBench } from "../support/benches.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * M-Pesa B2C payouts against the loopback Daraja: the request on the wire (with a SecurityCredential the
 * fake decrypts), results, synchronous refusals, an unreachable Daraja, Transaction Status queries, queue
 * timeouts, duplicated results, and config / amount validation. Jobs run only when a test runs them.
 */
const PHONE = "254708374149";
const B2C_PATH = "/mpesa/b2c/v3/paymentrequest";
/** Far enough out that no payout.query job falls due by itself while this file runs. */
const OVERDUE_MS = 120_000;

/** Bound when the bench is up (beforeAll). */
let { fake, receiver, gw, api, channelId, certPath } = {} as DarajaBench;
const prisma = () => gw.gateway.db.prisma;

async function createChannel(client: ReturnType<typeof apiClient>, config: Record<string, unknown>, name = "M-Pesa B2C") {
  const res = await client.post("/api/payment-channels/create", { name, provider: "mpesa", config });
  expect(res.status, res.text).toBe(201);
  return res.body.channel.id as number;
}

const payout = (body: Record<string, unknown> = {}, client = api) =>
  client.post("/v1/payouts", { amount: 150000, phone_number: PHONE, payment_channel_id: channelId, reference: "SELLER-42", description: "Weekly settlement", ...body });

async function payoutOk(body: Record<string, unknown> = {}) {
  const res = await payout(body);
  expect(res.status, res.text).toBe(201);
  expect(res.body.data.status).toBe("pending");
  const row = await prisma().payout.findUniqueOrThrow({ where: { id: res.body.data.id }, include: { channel: true } });
  return { data: res.body.data, row, ocid: row.providerRequestId, token: Buffer.from(row.channel.callbackToken, "utf8").toString("hex") };
}

const settled = (id: number) => until(() => api.get(`/v1/payouts/${id}`), (r) => r.body?.data?.status !== "pending");
/** B2C requests that reached the fake for one OriginatorConversationID (accepted or not). */
const b2cRequestsFor = (ocid: string) => fake.requests.filter((r) => r.path === B2C_PATH && r.body?.OriginatorConversationID === ocid);
const queryJobs = (payoutId: number) => prisma().job.findMany({ where: { kind: "payout.query", payload: { path: ["payoutId"], equals: payoutId } } });
/** Time passing: the payout's status-query job falls due now. */
const makeQueryDue = (payoutId: number) =>
  prisma().job.updateMany({ where: { kind: "payout.query", status: "queued", payload: { path: ["payoutId"], equals: payoutId } }, data: { runAt: new Date() } });
/** Runs due webhook deliveries and returns what the receiver got for one payout reference. */
async function webhooksFor(reference: string) {
  await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
  return receiver.received.filter((r) => r.json?.data?.reference === reference);
}

withDaraja(
  {
    initiator: true,
    channelName: "M-Pesa B2C",
    webhooks: [{ path: "/payouts", events: ["payout.completed", "payout.failed"] }],
    cleanLedger: true,
    env: { PAYOUT_RESULT_OVERDUE_MS: String(OVERDUE_MS), ...BENCH_ENV },
  },
  (bench) => {
    ({ fake, receiver, gw, api, channelId, certPath } = bench);
    // Daraja answers the request first and sends the Result later: 20 ms could beat our own 201 on a busy CPU,
    // and the payouts below are asserted pending when created.
    fake.switches.b2cResultDelayMs = 250;
  },
);

describe("the B2C request on the wire", () => {
  it("carries the stored OriginatorConversationID, the initiator, shillings, the B2C shortcode and the gateway's token URLs; the result completes it", async () => {
    const { data, row, ocid, token } = await payoutOk();
    expect(data).toMatchObject({ amount: 150000, currency: "KES", phone_number: PHONE, payment_channel_id: channelId, client_reference: "SELLER-42", provider_reference: null });
    const record = fake.payouts.get(ocid);
    // Being recorded at all means the fake's checks passed: SecurityCredential decrypted to the initiator password.
    expect(record, "the fake accepted the B2C request").toBeDefined();
    expect(record!.body).toMatchObject({
      OriginatorConversationID: row.providerRequestId,
      InitiatorName: fake.initiatorName,
      CommandID: "BusinessPayment",
      Amount: 1500,
      PartyA: fake.b2cShortcode,
      PartyB: PHONE,
      Remarks: "Weekly settlement",
      ResultURL: `https://pay.gateway.test/callbacks/daraja/${token}/b2c/result`,
      QueueTimeOutURL: `https://pay.gateway.test/callbacks/daraja/${token}/b2c/timeout`,
    });
    expect(fake.b2cShortcode).not.toBe(fake.shortcode); // so PartyA really is b2c_shortcode
    expect(Buffer.from(record!.body.SecurityCredential, "base64")).toHaveLength(256);
    expect(record!.body.SecurityCredential).not.toContain(fake.initiatorPassword);
    expect(b2cRequestsFor(ocid)).toHaveLength(1);

    // The fake posts its Result (paid) to ResultURL.
    const done = await settled(data.id);
    expect(done.body.data).toMatchObject({ status: "completed", provider_reference: record!.transactionId, failure_code: null, failure_reason: null });
    expect(done.body.data.completed_at).not.toBeNull();
    const stored = await prisma().payout.findUniqueOrThrow({ where: { id: data.id } });
    expect(stored.providerConversationId).toBe(record!.conversationId);
    expect((await prisma().event.findMany({ where: { payoutId: data.id } })).map((e) => e.type)).toEqual(["payout.completed"]);
    const hooks = await webhooksFor(data.reference);
    expect(hooks).toHaveLength(1);
    expect(hooks[0]!.json).toMatchObject({ type: "payout.completed", data: { reference: data.reference, status: "completed", provider_reference: record!.transactionId } });
  });

  it("sends CommandID SalaryPayment when asked, and a fresh encryption of the password each time", async () => {
    const first = await payoutOk({ command_id: "SalaryPayment", amount: 1000, description: undefined, reference: "PAYROLL-7" });
    const second = await payoutOk({ amount: 25_000_000 });
    const a = fake.payouts.get(first.ocid)!.body;
    const b = fake.payouts.get(second.ocid)!.body;
    expect(a).toMatchObject({ CommandID: "SalaryPayment", Amount: 10, Remarks: "PAYROLL-7" });
    expect(b).toMatchObject({ CommandID: "BusinessPayment", Amount: 250_000 });
    // PKCS#1 v1.5 pads randomly: two valid credentials for one password differ.
    expect(a.SecurityCredential).not.toBe(b.SecurityCredential);
    for (const p of [first, second]) expect((await settled(p.data.id)).body.data.status).toBe("completed");
  });

  it("a channel holding the portal's security_credential sends it verbatim", async () => {
    const credential = fake.securityCredential();
    const verbatim = await createChannel(api, fake.b2cChannelConfig({ initiator_password: undefined, security_credential: credential }), "Verbatim credential");
    const { data, ocid } = await payoutOk({ payment_channel_id: verbatim });
    expect(data.payment_channel_id).toBe(verbatim);
    expect(fake.payouts.get(ocid)!.body.SecurityCredential).toBe(credential);
    expect((await settled(data.id)).body.data).toMatchObject({ status: "completed", provider_reference: fake.payouts.get(ocid)!.transactionId });
  });
});

describe("results and refusals", () => {
  it("a failure result fails the payout with Daraja's ResultCode and no receipt", async () => {
    const phone = "254711002040";
    const desc = "Credit Party customer type (Unregistered or Registered Customer) can't be supported by the service.";
    fake.b2cOutcomes.set(phone, { ResultCode: 2040, ResultDesc: desc });
    const { data } = await payoutOk({ phone_number: phone });
    const done = await settled(data.id);
    expect(done.body.data).toMatchObject({ status: "failed", failure_code: "2040", failure_reason: desc, provider_reference: null, completed_at: null });
    const hooks = await webhooksFor(data.reference);
    expect(hooks.map((h) => h.json.type)).toEqual(["payout.failed"]);
  });

  it("a wrong initiator password: 502 provider_error with no secret in the body, and the payout failed", async () => {
    const wrongPassword = "Wr0ng-initiator-pw";
    const wrong = await createChannel(api, fake.b2cChannelConfig({ initiator_password: wrongPassword }), "Wrong password");
    const before = new Set(fake.payouts.keys());
    const res = await payout({ payment_channel_id: wrong, reference: "WRONG-PW" });
    expect(res.status, res.text).toBe(502);
    expect(res.body).toMatchObject({ status: "error", code: "provider_error" });
    expect(res.body.message).toMatch(/500\.001\.1001/);
    for (const secret of [wrongPassword, fake.initiatorPassword, fake.consumerSecret, fake.passkey]) expect(res.text).not.toContain(secret);
    // Nothing was accepted by Daraja, and the payout is final.
    expect([...fake.payouts.keys()].filter((k) => !before.has(k))).toEqual([]);
    const row = await prisma().payout.findFirstOrThrow({ where: { channelId: wrong, clientReference: "WRONG-PW" } });
    const shown = await api.get(`/v1/payouts/${row.id}`);
    expect(shown.body.data).toMatchObject({ status: "failed", failure_code: "provider_error", provider_reference: null });
    for (const secret of [wrongPassword, fake.initiatorPassword, fake.consumerSecret]) expect(shown.text).not.toContain(secret);
    expect(b2cRequestsFor(row.providerRequestId)).toHaveLength(1);
  });

  it("Daraja unreachable during the call: 201 pending (not failed), and a failed status query leaves it pending", async () => {
    const down = await startTestGateway({
      env: {
        MPESA_BASE_URL: "http://127.0.0.1:1",
        MPESA_CERT_PATH: certPath,
        PUBLIC_BASE_URL: "https://pay.gateway.test",
        PAYOUT_RESULT_OVERDUE_MS: String(OVERDUE_MS),
        JOBS_ENABLED: "false",
        RATE_LIMIT_ENABLED: "false",
      },
    });
    try {
      const downApi = apiClient(down.url, (await down.createMerchant()).testKey);
      const channel = await createChannel(downApi, fake.b2cChannelConfig());
      const res = await payout({ payment_channel_id: channel }, downApi);
      expect(res.status, res.text).toBe(201);
      expect(res.body.data).toMatchObject({ status: "pending", failure_code: null });
      const id = res.body.data.id as number;
      const db = down.gateway.db.prisma;
      const jobWhere = { kind: "payout.query", payload: { path: ["payoutId"], equals: id } };
      expect(await db.job.count({ where: jobWhere })).toBe(1);

      // The query cannot reach Daraja either: still pending, asked again later, never failed for it.
      await db.job.updateMany({ where: jobWhere, data: { runAt: new Date() } });
      expect(await down.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(1);
      expect((await downApi.get(`/v1/payouts/${id}`)).body.data.status).toBe("pending");
      const [job] = await db.job.findMany({ where: jobWhere });
      expect(job).toMatchObject({ status: "queued" });
      expect(job!.runAt.getTime()).toBeGreaterThan(Date.now());
      expect(await db.event.count({ where: { payoutId: id } })).toBe(0);
    } finally {
      await down.close();
    }
  });
});

describe("no result: the Transaction Status query settles it, the payout is never sent twice", () => {
  it("stays pending; the payout.query job asks Transaction Status about the stored OriginatorConversationID, and its answer completes it", async () => {
    fake.switches.b2cNoResult = true;
    try {
      const { data, ocid, token } = await payoutOk();
      await expectNothingMoreWithin(150, async () => (await api.get(`/v1/payouts/${data.id}`)).body.data.status, "no Result to settle it");
      expect((await api.get(`/v1/payouts/${data.id}`)).body.data.status).toBe("pending");
      expect(await gw.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(0); // not overdue yet

      const queriesBefore = fake.statusQueries.length;
      await makeQueryDue(data.id);
      expect(await gw.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(1);
      const queries = fake.statusQueries.slice(queriesBefore);
      expect(queries).toHaveLength(1);
      expect(queries[0]!.payout).toBe(ocid);
      expect(queries[0]!.body).toMatchObject({
        Initiator: fake.initiatorName,
        CommandID: "TransactionStatusQuery",
        OriginalConversationID: ocid,
        PartyA: fake.b2cShortcode,
        IdentifierType: "4",
        ResultURL: `https://pay.gateway.test/callbacks/daraja/${token}/b2c/status/${data.reference}`,
        QueueTimeOutURL: `https://pay.gateway.test/callbacks/daraja/${token}/b2c/timeout`,
      });

      const done = await settled(data.id);
      expect(done.body.data).toMatchObject({ status: "completed", provider_reference: fake.payouts.get(ocid)!.transactionId });
      expect(fake.postedResults.filter((p) => p.kind === "status_result" && p.url.endsWith(`/b2c/status/${data.reference}`)).map((p) => p.reply)).toEqual([
        { status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } },
      ]);
      expect(fake.postedResults.some((p) => p.kind === "b2c_result" && (p.body as any).Result.OriginatorConversationID === ocid)).toBe(false);
      expect(b2cRequestsFor(ocid)).toHaveLength(1);
      expect(await prisma().event.count({ where: { payoutId: data.id } })).toBe(1);

      // Once settled, the job asks nothing more and goes away.
      await makeQueryDue(data.id);
      expect(await gw.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(1);
      expect(fake.statusQueries.length).toBe(queriesBefore + 1);
      expect(await queryJobs(data.id)).toEqual([]);
      expect(b2cRequestsFor(ocid)).toHaveLength(1);
    } finally {
      fake.switches.b2cNoResult = false;
    }
  });

  it("a status answer of Failed fails it; a status answer that does not settle leaves it pending for the next ask", async () => {
    fake.switches.b2cNoResult = true;
    try {
      const phone = "254711000001";
      fake.b2cOutcomes.set(phone, { ResultCode: 1, ResultDesc: "The balance is insufficient for the transaction." });
      const { data, ocid } = await payoutOk({ phone_number: phone });

      // First ask: Daraja has no answer yet ("Pending" is not an outcome).
      fake.payouts.get(ocid)!.outcome.TransactionStatus = "Pending";
      await makeQueryDue(data.id);
      expect(await gw.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(1);
      await until(async () => fake.postedResults.filter((p) => p.kind === "status_result" && p.url.endsWith(data.reference)), (r) => r.length === 1 && r[0]!.reply !== null);
      expect((await api.get(`/v1/payouts/${data.id}`)).body.data.status).toBe("pending");
      expect(await queryJobs(data.id)).toHaveLength(1);

      // Next ask: Failed.
      delete fake.payouts.get(ocid)!.outcome.TransactionStatus;
      await makeQueryDue(data.id);
      expect(await gw.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(1);
      const done = await settled(data.id);
      expect(done.body.data).toMatchObject({ status: "failed", failure_code: "Failed", provider_reference: null });
      expect(done.body.data.failure_reason).toMatch(/balance is insufficient/);
      expect(b2cRequestsFor(ocid)).toHaveLength(1);
    } finally {
      fake.switches.b2cNoResult = false;
    }
  });

  it("a queue timeout makes the payout.query job due at once", async () => {
    fake.switches.b2cNoResult = true;
    try {
      const { data, ocid } = await payoutOk();
      const [job] = await queryJobs(data.id);
      expect(job!.runAt.getTime()).toBeGreaterThan(Date.now() + OVERDUE_MS / 2);

      const ack = await fake.sendB2cTimeout(ocid);
      expect(ack).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });
      expect((await api.get(`/v1/payouts/${data.id}`)).body.data.status).toBe("pending"); // a timeout is not a failure
      const [due] = await queryJobs(data.id);
      expect(due!.runAt.getTime()).toBeLessThanOrEqual(Date.now());

      const queriesBefore = fake.statusQueries.length;
      expect(await gw.gateway.services.jobs.runDueJobs(["payout.query"])).toBe(1);
      expect(fake.statusQueries.slice(queriesBefore).map((q) => q.body.OriginalConversationID)).toEqual([ocid]);
      expect((await settled(data.id)).body.data).toMatchObject({ status: "completed", provider_reference: fake.payouts.get(ocid)!.transactionId });
      expect(b2cRequestsFor(ocid)).toHaveLength(1);
    } finally {
      fake.switches.b2cNoResult = false;
    }
  });
});

describe("exactly once", () => {
  it("the same result delivered 50 times concurrently: one transition, one event, one webhook delivery", async () => {
    fake.switches.b2cNoResult = true;
    let ocid: string;
    let data: any;
    try {
      ({ data, ocid } = await payoutOk());
    } finally {
      fake.switches.b2cNoResult = false;
    }
    const acks = await Promise.all(Array.from({ length: 50 }, () => fake.sendB2cResult(ocid)));
    for (const ack of acks) expect(ack).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });
    const stored = await prisma().payout.findUniqueOrThrow({ where: { id: data.id } });
    expect(stored).toMatchObject({ status: "completed", providerReference: fake.payouts.get(ocid)!.transactionId });
    expect((await prisma().event.findMany({ where: { payoutId: data.id } })).map((e) => e.type)).toEqual(["payout.completed"]);
    expect(await prisma().webhookDelivery.count({ where: { event: { payoutId: data.id } } })).toBe(1);
    expect(await webhooksFor(data.reference)).toHaveLength(1);
    // A contradicting late result changes nothing.
    await fake.sendB2cResult(ocid, { ResultCode: 2001, ResultDesc: "The initiator information is invalid." });
    expect((await prisma().payout.findUniqueOrThrow({ where: { id: data.id } })).status).toBe("completed");
    expect(await prisma().event.count({ where: { payoutId: data.id } })).toBe(1);
  });

  it("every payout the gateway sent reached Daraja exactly once", () => {
    const sent = fake.requests.filter((r) => r.path === B2C_PATH).map((r) => r.body.OriginatorConversationID as string);
    expect(sent.length).toBeGreaterThan(5);
    expect(new Set(sent).size).toBe(sent.length);
  });
});

describe("validation: a 400 naming the field, and nothing written", () => {
  it("initiator_name without a password or credential is refused, naming config.initiator_password", async () => {
    const before = await prisma().paymentChannel.count();
    const res = await api.post("/api/payment-channels/create", { name: "No password", provider: "mpesa", config: fake.b2cChannelConfig({ initiator_password: undefined }) });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(res.body.message).toMatch(/^config\.initiator_password: /);
    expect(await prisma().paymentChannel.count()).toBe(before);
  });

  it.each([
    [900, /^amount: must be between KES 10\.00 and KES 250,000\.00/],
    [150050, /^amount: must be a whole number of shillings/],
    [25_000_100, /^amount: must be between KES 10\.00 and KES 250,000\.00/],
  ])("amount %i on the M-Pesa channel", async (amount, message) => {
    const before = await prisma().payout.count();
    const requests = fake.requests.length;
    const res = await payout({ amount });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(res.body.message).toMatch(message);
    expect(await prisma().payout.count()).toBe(before);
    expect(fake.requests.length).toBe(requests);
  });
});
