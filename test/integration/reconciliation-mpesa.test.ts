import { describe, expect, it } from "vitest";
import { BENCH_ENV, withDaraja, type DarajaBench } from "../support/benches.ts";
import { until } from "../support/wait.ts";

/**
 * Reconciliation of M-Pesa channels against the loopback Daraja: Daraja lists no payments, so a payment pending
 * here is asked about (the STK query) and settled through the usual path when M-Pesa says it was paid; the
 * shortcode's Account Balance is requested and its Result, posted later to the channel's callback URL, lands in
 * the report beside the ledger's figure (or its queue timeout, or why it could not be asked). Jobs run only when
 * a test runs them.
 */
const PHONE = "254708374149";
const today = () => new Date().toISOString().slice(0, 10);

/** Bound when the bench is up (beforeAll). */
let { fake, receiver, gw, api, channelId, createChannel, callbackToken: tokenOf } = {} as DarajaBench;
const prisma = () => gw.gateway.db.prisma;

/** An STK push left pending here (no callback); returns the row and its CheckoutRequestID. */
async function pendingPush(amount: number, channel = channelId) {
  const res = await api.post("/api/momo/stk-push", { amount, phone_number: PHONE, payment_channel_id: channel });
  expect(res.status, res.text).toBe(200);
  return { id: res.body.transaction.id as number, reference: res.body.transaction.reference as string, checkoutRequestId: res.body.transaction.checkout_request_id as string };
}

const report = (id: number) => api.get(`/v1/reconciliations/${id}`);
const run = async (channel = channelId) => {
  const res = await api.post("/v1/reconciliations", { payment_channel_id: channel, date: today() });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
};

withDaraja({ initiator: true, webhooks: [{ path: "/hooks", events: ["transaction.completed"] }], env: BENCH_ENV }, (bench) => {
  ({ fake, receiver, gw, api, channelId, createChannel, callbackToken: tokenOf } = bench);
});

describe("an M-Pesa channel's day", () => {
  it("settles a push M-Pesa says was paid through its status query, once, and leaves one it is still processing", async () => {
    const paid = await pendingPush(150_000);
    await fake.sendStkCallback(paid.checkoutRequestId, { receipt: "RCN0000001" });
    await until(() => prisma().transaction.findUniqueOrThrow({ where: { id: paid.id } }), (t) => t.status === "completed");
    const paidThere = await pendingPush(70_000);
    fake.queryResults.set(paidThere.checkoutRequestId, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
    const processing = await pendingPush(20_000);
    fake.switches.balanceNoResult = true;
    const data = await run().finally(() => (fake.switches.balanceNoResult = false));
    expect(data.status).toBe("completed");
    expect(data.items).toEqual([
      expect.objectContaining({ kind: "status_mismatch", reference: paidThere.reference, gateway_status: "pending", provider_status: "completed", gateway_amount: 70_000, provider_amount: null, resolution: "settled_via_verify" }),
    ]);
    expect(data.summary).toMatchObject({ provider_record: null, settled_via_verify: 1, gateway: { count: 3, by_status: { completed: 2, pending: 1 } } });
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: processing.id } })).toMatchObject({ status: "pending" });
    const eventsOf = async (id: number) => (await prisma().event.findMany({ where: { transactionId: id }, orderBy: { id: "asc" } })).map((e) => e.type);
    expect(await eventsOf(paidThere.id)).toEqual(["transaction.pending", "transaction.completed"]);
    await gw.gateway.services.jobs.runDueJobs(["webhook.deliver"]);
    expect(receiver.received.filter((r) => r.json?.data?.reference === paidThere.reference).map((r) => r.json.type)).toEqual(["transaction.completed"]);
    // Asked again: nothing left to settle, nothing sent twice.
    fake.switches.balanceNoResult = true;
    const again = await run().finally(() => (fake.switches.balanceNoResult = false));
    expect(again.items).toEqual([]);
    expect(await eventsOf(paidThere.id)).toEqual(["transaction.pending", "transaction.completed"]);
  });

  it("asks for the shortcode's balance and merges Daraja's Result, posted later to the channel's callback URL, beside the ledger's figure", async () => {
    const before = fake.balanceQueries.length;
    // Daraja accepts the request and posts its Result when the test says: the report is complete before it.
    fake.switches.balanceNoResult = true;
    const data = await run().finally(() => (fake.switches.balanceNoResult = false));
    expect(data.status).toBe("completed");
    expect(data.summary.balance).toMatchObject({ state: "requested", ledger: [{ currency: "KES", available: 220_000, pending_out: 0 }] });
    const [query] = fake.balanceQueries.slice(before);
    const token = await tokenOf(channelId);
    expect(query!.body).toMatchObject({ CommandID: "AccountBalance", IdentifierType: "4", PartyA: fake.shortcode, Initiator: fake.initiatorName });
    expect(query!.body.ResultURL).toBe(`https://pay.gateway.test/callbacks/daraja/${token}/balance/result/${data.id}`);
    expect(query!.body.QueueTimeOutURL).toBe(`https://pay.gateway.test/callbacks/daraja/${token}/balance/timeout/${data.id}`);

    expect((await report(data.id)).body.data.summary.balance.state).toBe("requested");
    await fake.sendBalanceResult(query!);
    const received = await until(() => report(data.id), (r) => r.body.data.summary.balance.state !== "requested");
    const { balance } = received.body.data.summary;
    expect(balance).toMatchObject({ state: "received", ledger: [{ currency: "KES", available: 220_000, pending_out: 0 }], completed_at: "20261125102456" });
    expect(balance.accounts).toEqual([
      { account: "Working Account", currency: "KES", current: 45_384_500, available: 45_384_500, reserved: 0, uncleared: 0 },
      { account: "Utility Account", currency: "KES", current: 6_560_200, available: 6_560_200, reserved: 0, uncleared: 0 },
      { account: "Charges Paid Account", currency: "KES", current: -66_000, available: -66_000, reserved: 0, uncleared: 0 },
    ]);
    const posted = fake.postedResults.filter((p) => p.kind === "balance_result" && p.url === query!.body.ResultURL);
    expect(posted.map((p) => p.reply)).toEqual([{ status: 200, body: { ResultCode: 0, ResultDesc: expect.any(String) } }]);
    // The report's other figures are untouched by the merge.
    expect(received.body.data.summary.items).toEqual(data.summary.items);
  });

  it("records a queue timeout as a failed balance, and a channel with no initiator as unavailable without asking", async () => {
    fake.switches.balanceQueueTimeout = true;
    const timedOut = await run();
    const failed = await until(() => report(timedOut.id), (r) => r.body.data.summary.balance.state !== "requested");
    expect(failed.body.data.summary.balance).toMatchObject({ state: "failed", error: expect.stringMatching(/^queue_timeout: /) });
    fake.switches.balanceQueueTimeout = false;

    const plain = await createChannel(fake.channelConfig(), "No initiator");
    const before = fake.balanceQueries.length;
    const data = await run(plain);
    expect(data.summary.balance).toMatchObject({ state: "unavailable", reason: expect.stringMatching(/initiator_name/), ledger: [] });
    expect(fake.balanceQueries.length).toBe(before);
  });

  it("applies a balance Result only to a report of the channel whose URL it came to", async () => {
    fake.switches.balanceNoResult = true;
    const data = await run();
    fake.switches.balanceNoResult = false;
    const other = await createChannel(fake.b2cChannelConfig(), "Other shortcode");
    const otherToken = await tokenOf(other);
    const [query] = fake.balanceQueries.slice(-1);
    const wrong = await fake.sendBalanceResult(query!, `${gw.url}/callbacks/daraja/${otherToken}/balance/result/${data.id}`);
    expect(wrong?.status).toBe(200);
    expect((await report(data.id)).body.data.summary.balance.state).toBe("requested");
    const right = await fake.sendBalanceResult(query!);
    expect(right?.status).toBe(200);
    expect((await report(data.id)).body.data.summary.balance.state).toBe("received");
  });
});
