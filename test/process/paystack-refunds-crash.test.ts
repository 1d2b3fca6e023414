import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { gatewayProcesses } from "../support/process.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * A gateway process killed (SIGKILL) while its POST /refund is at Paystack, after Paystack queued the
 * refund and before it answered: the refund and its refund.check job were committed first, so the restarted
 * gateway finds it pending with no Paystack id, lists the payment's refunds at Paystack, recognizes its own
 * by the reference in merchant_note, and settles it. POST /refund is never sent a second time.
 */
describe("a Paystack refund across a gateway crash", () => {
  let database: TestDatabase;
  let fake: FakePaystack;
  let receiver: WebhookReceiver;
  let env: Record<string, string>;
  const processes = gatewayProcesses();
  const refundPosts = () => fake.requests.filter((r) => r.method === "POST" && r.path === "/refund");

  beforeAll(async () => {
    database = await createTestDatabase();
    fake = await startFakePaystack();
    receiver = await startWebhookReceiver();
    env = {
      ...database.env,
      ENCRYPTION_KEY: database.encryptionKeyHex,
      PAYSTACK_BASE_URL: fake.url,
      PUBLIC_BASE_URL: "https://pay.gateway.test",
      // Long enough that the first process never asks before it is killed; short enough to wait for after.
      PAYSTACK_REFUND_CHECK_AFTER_MS: "2000",
      JOB_POLL_INTERVAL_MS: "200",
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      RATE_LIMIT_ENABLED: "false",
    };
    // Settled by asking: no webhook reaches these processes.
    Object.assign(fake.switches, { chargeWebhooks: false, refundWebhooks: false });
  });

  afterAll(async () => {
    await processes.killAll();
    await fake?.close();
    await receiver?.close();
    await database?.drop();
  });

  it("kill -9 while POST /refund is in flight: the restarted gateway finds it by listing the payment's refunds and settles it; sent exactly once", async () => {
    const first = await processes.start(env);
    const [, key] = await first.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/);
    const api = apiClient(first.url, key);
    const channel = await api.post("/api/payment-channels/create", { name: "Paystack", provider: "paystack", config: fake.channelConfig() });
    expect(channel.status, channel.text).toBe(201);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/refunds`, events: ["refund.completed", "refund.failed"] });
    expect(hook.status, hook.text).toBe(201);

    // A paid payment, confirmed by the payer's return (which verifies with Paystack).
    const init = await api.post("/api/transactions/initialize", { amount: 200_000, email: "payer@example.com", currency: "NGN", payment_channel_id: channel.body.channel.id });
    expect(init.status, init.text).toBe(200);
    const payment = init.body.reference as string;
    await fake.pay(payment);
    await fetch(`${first.url}/payment/checkout/${payment}/return?reference=${payment}`);
    expect((await api.get(`/api/transactions/verify/${payment}`)).body.transaction).toMatchObject({ status: "completed" });

    // Paystack queues the refund but never answers.
    fake.switches.refundReply = "hang_after_create";
    const inFlight = api.post("/v1/refunds", { transaction: payment, amount: 75_000 }).then((res) => ({ answered: res }), (error: unknown) => ({ error }));
    await until(() => fake.refunds.size, (n) => n === 1);
    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    expect(await inFlight).toMatchObject({ error: expect.anything() });
    fake.switches.refundReply = "normal";
    const [paystackRefund] = [...fake.refunds.values()];
    expect(refundPosts()).toHaveLength(1);
    const requestsBeforeRestart = fake.requests.length;

    // The restarted gateway's job may settle it before the first request here: what it did is read from the fake.
    const second = await processes.start(env);
    const api2 = apiClient(second.url, key);
    const listed = await api2.get(`/v1/refunds?transaction=${payment}`);
    expect(listed.body.data).toHaveLength(1);
    const refund = listed.body.data[0];
    expect(refund).toMatchObject({ amount: 75_000, method: "paystack_refund" });
    expect(paystackRefund!.merchant_note).toBe(`[${refund.reference}]`);

    const done = await until(() => api2.get(`/v1/refunds/${refund.reference}`), (r) => r.body.data.status !== "pending", 20_000);
    expect(done.body.data).toMatchObject({ status: "completed", provider_reference: String(paystackRefund!.id) });
    // The restarted gateway's first word to Paystack about it: the list of the payment's refunds.
    // No Paystack id was recorded before the kill, so nothing could be fetched by id before the list found it.
    const asked = fake.requests.slice(requestsBeforeRestart).filter((r) => r.path.startsWith("/refund"));
    expect(asked[0]).toMatchObject({ method: "GET", path: expect.stringMatching(/^\/refund\?transaction=/) });
    expect(asked.filter((r) => r.method === "POST")).toEqual([]);
    expect((await api2.get(`/api/transactions/verify/${payment}`)).body.transaction).toMatchObject({ amount_refunded: 75_000, refunded: false });

    const [webhook] = await receiver.waitFor(1);
    expect(webhook!.json).toMatchObject({ type: "refund.completed", data: { reference: refund.reference, status: "completed" } });
    await expectNothingMoreWithin(2500, () => [refundPosts().length, fake.refunds.size, receiver.received.length], "no second POST /refund or event");
    expect(refundPosts()).toHaveLength(1);
  });
});
