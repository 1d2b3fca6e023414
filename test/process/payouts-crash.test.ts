import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeDaraja } from "../fakes/daraja.ts";
import type { WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { startDarajaProcesses } from "../support/daraja-processes.ts";
import { apiClient } from "../support/gateway.ts";
import { printedTestKey } from "../support/process.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * A gateway process killed (SIGKILL) while its B2C request is at Daraja, before Daraja answers: the
 * payout and its status-query job were committed first, so the restarted gateway finds it pending, asks
 * Transaction Status about it, and settles it from the answer. The payout is never sent a second time.
 */
describe("an M-Pesa payout across a gateway crash", () => {
  const B2C_PATH = "/mpesa/b2c/v3/paymentrequest";
  const PHONE = "254708374149";
  let daraja: Awaited<ReturnType<typeof startDarajaProcesses>>;
  let fake: FakeDaraja;
  let receiver: WebhookReceiver;
  const start = () => daraja.start();
  const b2cRequests = () => fake.requests.filter((r) => r.path === B2C_PATH);

  beforeAll(async () => {
    daraja = await startDarajaProcesses("payouts-crash", { PAYOUT_RESULT_OVERDUE_MS: "500" });
    ({ fake, receiver } = daraja);
  });
  afterAll(() => daraja?.close());

  it("kill -9 while the B2C call is in flight: pending after restart, settled by the status query, sent exactly once", async () => {
    const first = await start();
    const key = await printedTestKey(first);
    const api = apiClient(first.url, key);
    const channel = await api.post("/api/payment-channels/create", { name: "M-Pesa B2C", provider: "mpesa", config: fake.b2cChannelConfig() });
    expect(channel.status, channel.text).toBe(201);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/payouts`, events: ["payout.completed", "payout.failed"] });
    expect(hook.status, hook.text).toBe(201);

    // Daraja accepts the request but holds its reply, posts no Result, and answers no status query until told.
    Object.assign(fake.switches, { b2cHoldReply: true, b2cNoResult: true, statusNoResult: true });
    const inFlight = api
      .post("/v1/payouts", { amount: 150000, phone_number: PHONE, payment_channel_id: channel.body.channel.id, reference: "CRASH-1" })
      .then((res) => ({ answered: res }), (error: unknown) => ({ error }));
    await until(() => fake.payouts.size, (n) => n === 1);
    const [ocid, record] = [...fake.payouts.entries()][0]!;
    expect(record.body).toMatchObject({ OriginatorConversationID: ocid, Amount: 1500, PartyB: PHONE, PartyA: fake.b2cShortcode });

    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    // The client never heard back; Daraja's reply goes to a dead socket.
    expect(await inFlight).toMatchObject({ error: expect.anything() });
    expect(fake.releaseB2cReplies()).toBe(1);
    fake.switches.b2cHoldReply = false;
    const queriesBeforeRestart = fake.statusQueries.length;

    const second = await start();
    expect(second.output()).not.toMatch(/Test API key/);
    const api2 = apiClient(second.url, key);
    const list = await api2.post("/graphql", { query: `{ payouts(first: 10) { totalCount edges { node { reference clientReference status } } } }` });
    expect(list.body.errors, list.text).toBeUndefined();
    expect(list.body.data.payouts.totalCount).toBe(1);
    const { reference } = list.body.data.payouts.edges[0].node;
    expect(list.body.data.payouts.edges[0].node).toMatchObject({ clientReference: "CRASH-1", status: "pending" });

    // The overdue job asks Transaction Status about the payout's OriginatorConversationID; it stays pending until answered.
    const [query] = await until(
      () => fake.statusQueries.slice(queriesBeforeRestart).filter((q) => q.body.OriginalConversationID === ocid),
      (qs) => qs.length >= 1,
      // The restarted process on a busy machine (the whole suite beside it) takes a while to reach its overdue job.
      120_000,
    );
    expect(query!.body.ResultURL).toMatch(new RegExp(`^https://pay\\.gateway\\.test/callbacks/daraja/[0-9a-f]+/b2c/status/${reference}$`));
    expect((await api2.get(`/v1/payouts/${reference}`)).body.data).toMatchObject({ status: "pending", failure_code: null });
    expect(b2cRequests()).toHaveLength(1);

    // Daraja answers the query: paid. That settles it.
    expect(await fake.sendStatusResult(query!.originatorConversationId)).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });
    const done = await api2.get(`/v1/payouts/${reference}`);
    expect(done.body.data).toMatchObject({ reference, status: "completed", provider_reference: record.transactionId, amount: 150000, phone_number: PHONE });

    // The late B2C Result (Daraja retrying it) changes nothing.
    expect(await fake.sendB2cResult(ocid)).toEqual({ status: 200, body: { ResultCode: 0, ResultDesc: "Accepted" } });
    expect((await api2.get(`/v1/payouts/${reference}`)).body.data).toEqual(done.body.data);

    const [webhook] = await receiver.waitFor(1);
    expect(webhook!.json).toMatchObject({ type: "payout.completed", data: { reference, status: "completed", provider_reference: record.transactionId } });

    // A quiet period well past the query's backoff: no second B2C request, no second event.
    fake.switches.statusNoResult = false;
    await expectNothingMoreWithin(2500, () => [b2cRequests().length, fake.payouts.size, receiver.received.length], "no second B2C request or event");
    const sent = b2cRequests();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body.OriginatorConversationID).toBe(ocid);
    expect(fake.payouts.size).toBe(1);
    expect(receiver.received).toHaveLength(1);
    const events = await api2.post("/graphql", { query: `{ payout(reference: "${reference}") { __typename ... on Payout { status } } }` });
    expect(events.body.data.payout).toEqual({ __typename: "Payout", status: "completed" });
  });
});
