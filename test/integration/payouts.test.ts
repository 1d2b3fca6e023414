import { parse } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { useTestGateway } from "../support/fixture.ts";
import { apiClient, createSandboxMerchant, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { collect, wsClient } from "../support/subscriptions.ts";
import { until } from "../support/wait.ts";

/** Payouts on the sandbox rail: shapes, magic numbers, settling, isolation, bad input, exactly-once results. */
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PAYOUT_KEYS = [
  "id", "reference", "client_reference", "amount", "currency", "phone_number", "status", "payment_channel_id",
  "provider_reference", "failure_code", "failure_reason", "created_at", "updated_at", "completed_at",
];

let gw: TestGateway;
let receiver: WebhookReceiver;
let api: ReturnType<typeof apiClient>;
let liveApi: ReturnType<typeof apiClient>;
let otherApi: ReturnType<typeof apiClient>;
let sandboxChannel: number;
const prisma = () => gw.gateway.db.prisma;


const payout = (body: Record<string, unknown> = {}, headers?: Record<string, string>) =>
  api.post("/v1/payouts", { amount: 150000, phone_number: "254708374149", reference: "SELLER-42", description: "Weekly settlement", ...body }, headers);

const settled = (id: number | string) => until(() => api.get(`/v1/payouts/${id}`), (r) => r.body?.data?.status !== "pending");

beforeAll(async () => {
  receiver = await startWebhookReceiver();
});
afterAll(() => receiver?.close());

const env = {
  SANDBOX_STK_DELAY_MS: "30",
  // Long enough that the tests delivering a result themselves (below) always come first, even on a busy CPU.
  PAYOUT_RESULT_OVERDUE_MS: "2000",
  WEBHOOK_ALLOW_PRIVATE_URLS: "true",
  JOB_POLL_INTERVAL_MS: "100",
  RATE_LIMIT_ENABLED: "false",
};
useTestGateway({ env }, async (started) => {
  gw = started;
  const merchant = await gw.createMerchant();
  api = apiClient(gw.url, merchant.testKey);
  liveApi = apiClient(gw.url, merchant.liveKey);
  otherApi = apiClient(gw.url, (await gw.createMerchant()).testKey);
  const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  sandboxChannel = channel.body.channel.id;
  const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/payouts`, events: ["payout.completed", "payout.failed"] });
  expect(hook.status, hook.text).toBe(201);
});
afterAll(() => expectCleanLedger(gw));

describe("POST /v1/payouts and GET /v1/payouts/:id", () => {
  it("answers 201 pending in the documented shape, then completes with the receipt, once, with its webhook", async () => {
    const res = await payout();
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe("success");
    expect(Object.keys(res.body.data)).toEqual(PAYOUT_KEYS);
    const p = res.body.data;
    expect(p).toMatchObject({
      amount: 150000, currency: "KES", phone_number: "254708374149", status: "pending", client_reference: "SELLER-42",
      payment_channel_id: sandboxChannel, provider_reference: null, failure_code: null, failure_reason: null, completed_at: null,
    });
    expect(p.reference).toMatch(/^po_[0-9A-Za-z]{20}$/);
    expect(p.created_at).toMatch(ISO_MS);

    const done = await settled(p.id);
    expect(done.body.data).toMatchObject({ id: p.id, status: "completed", provider_reference: expect.stringMatching(/^SBX/) });
    expect(done.body.data.completed_at).toMatch(ISO_MS);
    // By reference too.
    expect((await api.get(`/v1/payouts/${p.reference}`)).body.data).toEqual(done.body.data);

    const events = await prisma().event.findMany({ where: { payoutId: p.id } });
    expect(events.map((e) => e.type)).toEqual(["payout.completed"]);
    const [hook] = await until(async () => receiver.received.filter((r) => r.json?.data?.reference === p.reference), (r) => r.length === 1);
    expect(hook!.json).toMatchObject({ type: "payout.completed", data: { ...done.body.data } });
    expect(hook!.headers["webhook-id"]).toBe(events[0]!.id.toString());
  });

  it.each([
    ["254700000001", "1", /balance is insufficient/],
    ["254700002040", "2040", /customer type/],
  ])("sandbox %s fails with %s", async (phone, code, reason) => {
    const res = await payout({ phone_number: phone });
    expect(res.status).toBe(201);
    const done = await settled(res.body.data.id);
    expect(done.body.data).toMatchObject({ status: "failed", failure_code: code, provider_reference: null });
    expect(done.body.data.failure_reason).toMatch(reason);
    const [hook] = await until(async () => receiver.received.filter((r) => r.json?.data?.reference === res.body.data.reference), (r) => r.length === 1);
    expect(hook!.json.type).toBe("payout.failed");
  });

  it("254700001019 never answers: the status query, not a resend, settles it", async () => {
    const res = await payout({ phone_number: "254700001019" });
    const id = res.body.data.id;
    const done = await settled(id);
    expect(done.body.data).toMatchObject({ status: "failed", failure_code: "1019" });
    expect(await prisma().job.count({ where: { kind: "payout.query", payload: { path: ["payoutId"], equals: id }, status: "queued" } })).toBeLessThanOrEqual(1);
  });

  it("an Idempotency-Key retry returns the same payout, and no second payout exists", async () => {
    const key = `po-${Date.now()}`;
    const first = await payout({ reference: "IDEM-1" }, { "idempotency-key": key });
    const second = await payout({ reference: "IDEM-1" }, { "idempotency-key": key });
    expect(second.status).toBe(201);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body.data.id).toBe(first.body.data.id);
    expect(await prisma().payout.count({ where: { clientReference: "IDEM-1" } })).toBe(1);
  });

  it("another merchant's payout and a test payout seen with a live key are 404 envelopes", async () => {
    const mine = (await payout()).body.data;
    for (const client of [otherApi, liveApi]) {
      for (const key of [String(mine.id), mine.reference]) {
        const res = await client.get(`/v1/payouts/${key}`);
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ status: "error", code: "not_found" });
      }
    }
    const gql = await otherApi.post("/graphql", { query: `{ payout(reference: "${mine.reference}") { __typename } payouts { totalCount } }` });
    expect(gql.body.data).toEqual({ payout: { __typename: "NotFoundError" }, payouts: { totalCount: 0 } });
    expect((await api.get("/v1/payouts/po_doesnotexist00000000")).status).toBe(404);
    // node(id) too: the owner finds it, anyone else gets null.
    const own = await api.post("/graphql", { query: `{ payouts(first: 1) { edges { node { id reference } } } }` });
    const globalId = own.body.data.payouts.edges[0].node.id;
    const byNode = (client: typeof api) => client.post("/graphql", { query: `query($id: ID!) { node(id: $id) { ... on Payout { reference } } }`, variables: { id: globalId } });
    expect((await byNode(api)).body.data.node).toEqual({ reference: own.body.data.payouts.edges[0].node.reference });
    for (const client of [otherApi, liveApi]) expect((await byNode(client)).body.data?.node ?? null).toBeNull();
  });
});

describe("bad input: a 400 envelope naming the field, and no payout written", () => {
  it.each([
    [{ amount: 0 }, /^amount: /],
    [{ amount: -5 }, /^amount: /],
    [{ amount: 150050 }, /^amount: must be a whole number of shillings/],
    [{ amount: 900 }, /^amount: must be between KES 10\.00 and KES 250,000\.00/],
    [{ amount: 25_000_100 }, /^amount: must be between KES 10\.00 and KES 250,000\.00/],
    [{ amount: 1.5 }, /^amount: /],
    [{ phone_number: "0808374149" }, /^phone_number: /],
    [{ phone_number: "+255708374149" }, /^phone_number: /],
    [{ command_id: "Refund" }, /^command_id: must be one of BusinessPayment, SalaryPayment, PromotionPayment/],
    [{ currency: "NGN" }, /^currency: /],
    [{ description: "x".repeat(101) }, /^description: /],
  ])("%j", async (body, message) => {
    const before = await prisma().payout.count();
    const res = await payout(body);
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(res.body.message).toMatch(message);
    expect(await prisma().payout.count()).toBe(before);
  });

  it("a channel that cannot pay out is a 400 naming payment_channel_id", async () => {
    const mpesaNoInitiator = await api.post("/api/payment-channels/create", {
      name: "Collections only", provider: "mpesa",
      config: { consumer_key: "k", consumer_secret: "s", shortcode: "174379", passkey: "p", environment: "sandbox", transaction_type: "paybill" },
    });
    const res = await payout({ payment_channel_id: mpesaNoInitiator.body.channel.id });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^payment_channel_id: payment channel \d+ \(mpesa\) cannot pay out: its config needs initiator_name/);
    // With no channel named, the default (now the M-Pesa one, which cannot pay out) is passed over for one that can.
    const fallback = await payout();
    expect(fallback.status).toBe(201);
    expect(fallback.body.data.payment_channel_id).toBe(sandboxChannel);
  });
});

describe("exactly once", () => {
  it("a result delivered 50 times concurrently: one transition, one event, one webhook delivery", async () => {
    const res = await payout({ phone_number: "254700001019" }); // no sandbox result of its own
    const row = await prisma().payout.findUniqueOrThrow({ where: { id: res.body.data.id }, include: { channel: true } });
    const token = Buffer.from(row.channel.callbackToken, "utf8").toString("hex");
    const body = {
      Result: {
        ResultType: 0, ResultCode: 0, ResultDesc: "The service request is processed successfully.",
        OriginatorConversationID: row.providerRequestId, ConversationID: "AG_1", TransactionID: "SFX1234567",
        ResultParameters: { ResultParameter: [{ Key: "TransactionAmount", Value: 1500 }, { Key: "TransactionReceipt", Value: "SFX1234567" }] },
      },
    };
    const answers = await Promise.all(Array.from({ length: 50 }, () => api.post(`/callbacks/daraja/${token}/b2c/result`, body)));
    for (const a of answers) expect(a.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
    const done = await api.get(`/v1/payouts/${row.id}`);
    expect(done.body.data).toMatchObject({ status: "completed", provider_reference: "SFX1234567" });
    expect(await prisma().event.count({ where: { payoutId: row.id } })).toBe(1);
    expect(await prisma().webhookDelivery.count({ where: { event: { payoutId: row.id } } })).toBe(1);
    // A later contradicting result changes nothing.
    await api.post(`/callbacks/daraja/${token}/b2c/result`, { Result: { ...body.Result, ResultCode: 1, ResultDesc: "x", ResultParameters: undefined } });
    expect((await api.get(`/v1/payouts/${row.id}`)).body.data.status).toBe("completed");
  });

  it("a result whose amount differs from the payout's is not applied; an unknown token is a 404", async () => {
    const res = await payout({ phone_number: "254700001019" });
    const row = await prisma().payout.findUniqueOrThrow({ where: { id: res.body.data.id }, include: { channel: true } });
    const token = Buffer.from(row.channel.callbackToken, "utf8").toString("hex");
    const result = { Result: { ResultCode: 0, ResultDesc: "ok", OriginatorConversationID: row.providerRequestId, ResultParameters: { ResultParameter: [{ Key: "TransactionAmount", Value: 9999 }] } } };
    await api.post(`/callbacks/daraja/${token}/b2c/result`, result);
    expect((await prisma().payout.findUniqueOrThrow({ where: { id: row.id } })).status).toBe("pending");
    expect((await api.post(`/callbacks/daraja/${"ab".repeat(20)}/b2c/result`, result)).status).toBe(404);
  });
});

describe("GraphQL", () => {
  it("createPayout, payout, payouts with filters, and payoutStatusChanged / payoutEvents", async () => {
    const created = await api.post("/graphql", {
      query: `mutation($input: CreatePayoutInput!) { createPayout(input: $input) { __typename ... on Payout { reference status amount phoneNumber commandId } ... on Error { code message } } }`,
      variables: { input: { amount: 20000, phoneNumber: "254708374149", commandId: "SalaryPayment" } },
    });
    const p = created.body.data.createPayout;
    expect(p).toMatchObject({ __typename: "Payout", status: "pending", amount: 20000, phoneNumber: "254708374149", commandId: "SalaryPayment" });
    await settled(p.reference);
    const one = await api.post("/graphql", { query: `query($r: String) { payout(reference: $r) { __typename ... on Payout { status providerReference } } }`, variables: { r: p.reference } });
    expect(one.body.data.payout).toMatchObject({ __typename: "Payout", status: "completed" });
    const list = await api.post("/graphql", { query: `{ payouts(first: 100, status: failed) { totalCount edges { node { status } } } }` });
    expect(list.body.data.payouts.totalCount).toBeGreaterThanOrEqual(3);
    expect(list.body.data.payouts.edges.every((e: { node: { status: string } }) => e.node.status === "failed")).toBe(true);
    const bad = await api.post("/graphql", {
      query: `mutation($input: CreatePayoutInput!) { createPayout(input: $input) { __typename ... on Error { code message } } }`,
      variables: { input: { amount: 150050, phoneNumber: "254708374149" } },
    });
    expect(bad.body.data.createPayout).toMatchObject({ __typename: "ValidationError", code: "validation_failed" });
  });

  it("delivers payout events to subscribers, and never to another merchant's", async () => {
    const merchant = await createSandboxMerchant(gw);
    const mine = apiClient(gw.url, merchant.testKey);
    const client = wsClient(gw.url, merchant.testKey);
    const stranger = wsClient(gw.url, (await gw.createMerchant()).testKey);
    try {
      const all = collect(client, parse(`subscription { payoutEvents(ready: true) { id type payout { reference status failureCode } } }`) as never);
      const strangers = collect(stranger, parse(`subscription { payoutEvents(ready: true) { id } }`) as never);
      await Promise.all([all.ready(), strangers.ready()]);
      const created = await mine.post("/v1/payouts", { amount: 5000, phone_number: "254700002040" });
      const reference = created.body.data.reference;
      const one = collect(client, parse(`subscription($r: String!) { payoutStatusChanged(reference: $r) { type payout { reference status } } }`) as never, { r: reference });
      await all.waitFor(1);
      await one.done();
      expect(all.results[0]!.data).toMatchObject({ payoutEvents: { type: "payout.failed", payout: { reference, status: "failed", failureCode: "2040" } } });
      expect(one.results.map((r) => r.data)).toEqual([{ payoutStatusChanged: { type: "payout.failed", payout: { reference, status: "failed" } } }]);
      // Another merchant's subscriber sees none of it.
      expect(strangers.results).toHaveLength(0);
      all.dispose();
      strangers.dispose();
    } finally {
      await client.dispose();
      await stranger.dispose();
    }
  });
});

describe("NUL characters", () => {
  it("are a 400 envelope, never a 500, on payout and webhook routes and in GraphQL", async () => {
    const before = await prisma().payout.count();
    const bodies = [
      await payout({ reference: "a\u0000b" }),
      await payout({ description: "x\u0000" }),
      await api.get("/v1/payouts/po_%00"),
      await api.post("/v1/webhooks", { url: `${receiver.url}/x`, description: "d\u0000" }),
      await api.post("/v1/webhooks", { url: `${receiver.url}/\u0000` }),
    ];
    for (const res of bodies) {
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
    }
    expect(await prisma().payout.count()).toBe(before);
    const gql = await api.post("/graphql", { query: `query($r: String) { payout(reference: $r) { __typename } }`, variables: { r: "\u0000" } });
    expect(gql.body.errors?.[0]?.extensions?.code ?? gql.body.data?.payout?.__typename).toMatch(/validation_failed|ValidationError/);
  });
});
