import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeDaraja, type ReversalOutcome } from "../fakes/daraja.ts";
import type { WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { startDarajaProcesses } from "../support/daraja-processes.ts";
import { apiClient } from "../support/gateway.ts";
import { printedTestKey } from "../support/process.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * A gateway process killed (SIGKILL) while its Reversal request is at Daraja, after Daraja accepted it and
 * before it answered: the refund (with our OriginatorConversationID) and its refund.check job were committed
 * first, so the restarted gateway finds it pending with no ConversationID of Daraja's, asks Transaction Status
 * about our OriginatorConversationID once REVERSAL_RESULT_OVERDUE_MS has passed, and settles it from that
 * answer: completed when Daraja reversed it, failed when Daraja refused it. The Reversal is never sent again.
 *
 * How this fails if the restarted gateway resent instead of asking: the fake records every request before it
 * handles it (a resend with the same OriginatorConversationID is refused but still recorded, one with a new id
 * is recorded and accepted), so reversalRequests() would hold two and fake.reversals perhaps two; and no status
 * query would name the reversal, so the wait for it times out. If it settled without asking (failed it as
 * unknown, say), the refund would leave pending before the status answer is posted, or end in the wrong status.
 * A second transition would show as a second webhook delivery in the quiet period.
 */
const REVERSAL_PATH = "/mpesa/reversal/v1/request";
const PHONE = "254708374149";
const PUBLIC_BASE_URL = "https://pay.gateway.test";
/** Long enough that the first process never asks before it is killed; short enough to wait for after the restart. */
const OVERDUE_MS = 2000;

const cases: { name: string; outcome: ReversalOutcome | null; status: "completed" | "failed"; event: string }[] = [
  { name: "Daraja reversed it: the status answer completes the refund", outcome: null, status: "completed", event: "refund.completed" },
  {
    name: "Daraja refused it: the status answer fails the refund, and nothing counts as refunded",
    outcome: { ResultCode: "R000002", ResultDesc: "The OriginalTransactionID is invalid." },
    status: "failed",
    event: "refund.failed",
  },
];

describe.each(cases)("an M-Pesa reversal across a gateway crash ($status)", ({ name, outcome, status, event }) => {
  let daraja: Awaited<ReturnType<typeof startDarajaProcesses>>;
  let fake: FakeDaraja;
  let receiver: WebhookReceiver;
  const start = () => daraja.start();
  const reversalRequests = () => fake.requests.filter((r) => r.path === REVERSAL_PATH);


  beforeAll(async () => {
    // A busy machine can let the first process claim its check (due after OVERDUE_MS) just before the kill: the
    // second then takes it over when that lease ends, max(JOB_LEASE_MS, WEBHOOK_TIMEOUT_MS + 5 s) = 7 s, not 65 s.
    daraja = await startDarajaProcesses("mpesa-refunds-crash", { REVERSAL_RESULT_OVERDUE_MS: String(OVERDUE_MS), JOB_LEASE_MS: "1000", WEBHOOK_TIMEOUT_MS: "2000" });
    ({ fake, receiver } = daraja);
  });
  afterAll(() => daraja?.close());

  it(`kill -9 while POST ${REVERSAL_PATH} is in flight: the restarted gateway asks Transaction Status, never reverses again; ${name}`, async () => {
    const first = await start();
    const key = await printedTestKey(first);
    const api = apiClient(first.url, key);
    const channel = await api.post("/api/payment-channels/create", { name: "M-Pesa with initiator", provider: "mpesa", config: fake.b2cChannelConfig() });
    expect(channel.status, channel.text).toBe(201);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/refunds`, events: ["refund.completed", "refund.failed"] });
    expect(hook.status, hook.text).toBe(201);

    // A completed STK payment with its M-Pesa receipt: what a reversal names.
    const push = await api.post("/api/momo/stk-push", { amount: 150_000, phone_number: PHONE, payment_channel_id: channel.body.channel.id });
    expect(push.status, push.text).toBe(200);
    const payment = push.body.transaction.reference as string;
    const receipt = "RFC0000001";
    if (outcome) fake.reversalOutcomes.set(receipt, outcome);
    expect(await fake.sendStkCallback(push.body.transaction.checkout_request_id, { receipt })).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });
    expect((await api.get(`/api/momo/stk-status/${payment}`)).body.transaction).toMatchObject({ status: "completed", provider_reference: receipt, amount_refunded: 0 });

    // Daraja accepts the Reversal but holds its reply, posts no Result, and answers no status query until told.
    Object.assign(fake.switches, { reversalHoldReply: true, reversalNoResult: true, statusNoResult: true });
    const inFlight = api.post("/v1/refunds", { transaction: payment }).then((res) => ({ answered: res }), (error: unknown) => ({ error }));
    await until(() => fake.reversals.size, (n) => n === 1);
    const [ocid, record] = [...fake.reversals.entries()][0]!;
    expect(record.body).toMatchObject({ OriginatorConversationID: ocid, CommandID: "TransactionReversal", TransactionID: receipt, Amount: 1500, ReceiverParty: fake.shortcode });

    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    // The client never heard back; Daraja's reply goes to a dead socket.
    expect(await inFlight).toMatchObject({ error: expect.anything() });
    expect(fake.releaseReversalReplies()).toBe(1);
    fake.switches.reversalHoldReply = false;
    // The premise: the first process died before its check fell due, so whatever is asked is asked by the second.
    expect(fake.statusQueries).toEqual([]);
    expect(reversalRequests()).toHaveLength(1);

    const second = await start();
    expect(second.output()).not.toMatch(/Test API key/);
    const api2 = apiClient(second.url, key);
    const listed = await api2.get(`/v1/refunds?transaction=${payment}`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data).toHaveLength(1);
    const refund = listed.body.data[0];
    // Pending, and known by nothing of Daraja's: its reply (with the ConversationID) never reached a live process.
    expect(refund).toMatchObject({ status: "pending", method: "mpesa_reversal", amount: 150_000, currency: "KES", provider_reference: null });
    expect(record.body.Occasion).toBe(refund.reference);

    // The overdue check asks Transaction Status about our OriginatorConversationID, on the collection shortcode.
    const [query] = await until(() => fake.statusQueries.filter((q) => q.reversal === ocid), (qs) => qs.length >= 1, 60_000);
    expect(query!.body).toMatchObject({
      CommandID: "TransactionStatusQuery",
      OriginalConversationID: ocid,
      PartyA: fake.shortcode,
      ResultURL: expect.stringMatching(new RegExp(`^${PUBLIC_BASE_URL.replace(/\./g, "\\.")}/callbacks/daraja/[0-9a-f]+/refund/status/${refund.reference}$`)),
    });
    // Asking settles nothing by itself: pending until Daraja answers.
    expect((await api2.get(`/v1/refunds/${refund.reference}`)).body.data).toMatchObject({ status: "pending", failure_code: null });
    expect(reversalRequests()).toHaveLength(1);

    // Daraja answers the query; that answer alone settles it.
    expect(await fake.sendStatusResult(query!.originatorConversationId)).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });
    const done = await api2.get(`/v1/refunds/${refund.reference}`);
    if (status === "completed") {
      expect(done.body.data).toMatchObject({ status: "completed", provider_reference: record.transactionId, failure_code: null, failure_reason: null });
      expect(done.body.data.completed_at).not.toBeNull();
      expect((await api2.get(`/api/momo/stk-status/${payment}`)).body.transaction).toMatchObject({ status: "completed", amount_refunded: 150_000, refunded: true });
    } else {
      expect(done.body.data).toMatchObject({ status: "failed", failure_code: "Failed", failure_reason: outcome!.ResultDesc, completed_at: null });
      expect((await api2.get(`/api/momo/stk-status/${payment}`)).body.transaction).toMatchObject({ status: "completed", amount_refunded: 0, refunded: false });
    }

    // The late Reversal Result (Daraja retrying it) changes nothing.
    expect((await fake.sendReversalResult(ocid))?.status).toBe(200);
    expect((await api2.get(`/v1/refunds/${refund.reference}`)).body.data).toEqual(done.body.data);

    const [webhook] = await receiver.waitFor(1);
    expect(webhook!.json).toMatchObject({ type: event, data: { reference: refund.reference, status } });

    // A quiet period past the next ask (2 × OVERDUE_MS after the first): no second Reversal, no second event.
    fake.switches.statusNoResult = false;
    await expectNothingMoreWithin(2.5 * OVERDUE_MS, () => [reversalRequests().length, fake.reversals.size, receiver.received.length], "no second Reversal request or event");
    expect(reversalRequests()).toHaveLength(1);
    expect(reversalRequests()[0]!.body.OriginatorConversationID).toBe(ocid);
    expect(fake.reversals.size).toBe(1);
    expect(receiver.received).toHaveLength(1);
    expect((await api2.get(`/v1/refunds/${refund.reference}`)).body.data).toEqual(done.body.data);
  });
});
