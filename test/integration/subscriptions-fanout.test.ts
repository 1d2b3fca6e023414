import { parse } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { Principal } from "../../src/auth.ts";
import { MAX_BUFFERED_BYTES, SLOW_CONSUMER_CLOSE_CODE, type FanoutStats } from "../../src/graphql/fanout.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { collect, wsClient, wsClientWith, type Collected } from "../support/subscriptions.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";

/**
 * Shared execution of identical graphql-ws subscriptions (src/graphql/fanout.ts): one execution per event and
 * scope, its frame written to every subscriber under the subscriber's own id; isolation, backpressure and
 * cleanup, observed through real clients and the gateway's public stats.
 */

const EVENTS = "subscription Events { transactionEvents { id type transaction { reference status } } }";
const CARD = { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 1, cvc: "123" };
const DECLINED = { ...CARD, card_number: "4000000000000002" };

type Frame = { id?: string; type: string; payload?: any };

/** A bare graphql-transport-ws socket with several subscriptions under ids we choose: every frame is kept as sent. */
async function rawSubscriber(url: string, connectionParams: Record<string, unknown>, subscriptions: { id: string; query: string; variables?: Record<string, unknown> }[]) {
  const socket = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
  const frames: Frame[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));
  const acked = new Promise<void>((resolve, reject) => {
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      if (frame.type === "connection_ack") resolve();
      else frames.push(frame);
    });
    socket.once("close", (code) => reject(new Error(`closed before connection_ack (${code})`)));
  });
  await new Promise((resolve) => socket.once("open", resolve));
  socket.send(JSON.stringify({ type: "connection_init", payload: connectionParams }));
  await acked;
  for (const { id, query, variables } of subscriptions) socket.send(JSON.stringify({ id, type: "subscribe", payload: { query, variables } }));
  return { socket, frames, closed };
}

const seen = (sub: Collected<unknown>) => sub.results.map((r) => {
  const event = (r.data as { transactionEvents: { type: string; transaction: { reference: string } } }).transactionEvents;
  return `${event.type} ${event.transaction.reference}`;
});

describe("graphql-ws subscriptions sharing one execution per event", () => {
  let gw: TestGateway;
  let a: TestMerchant;
  let b: TestMerchant;
  const stats = (): FanoutStats => gw.gateway.subscriptions.stats();

  const initialize = async (key: string, extra: Record<string, unknown> = {}) => {
    const res = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 2500, email: "fan@example.com", ...extra });
    expect(res.status, res.text).toBe(200);
    return res.body.reference as string;
  };
  const pay = async (reference: string, card = CARD) => {
    const res = await apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, card);
    expect([200, 402]).toContain(res.status);
  };
  /** A live payment without a real provider: recorded as a provider's confirmation would be (completed at once). */
  const livePayment = async (merchant: TestMerchant, providerReference: string) => {
    const principal: Principal = { merchantId: merchant.id, mode: "live", role: "owner", userId: null, keyId: null, keyPrefix: null };
    const [channel] = await gw.gateway.services.channels.listChannels(principal);
    const recorded = await gw.gateway.services.transactions.recordProviderPayment(channel!, {
      providerReference, amount: 2500n, currency: "KES", phoneNumber: null, clientReference: null, paymentMethod: "card",
    });
    return recorded.transaction.reference;
  };

  beforeAll(async () => {
    // Hundreds of subscribe operations on one key below: the rate limiter has its own tests.
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    a = await createSandboxMerchant(gw, "Fan A");
    b = await createSandboxMerchant(gw, "Fan B");
    // Live channels are a signed-in live owner's to create (issue 35).
    for (const m of [a, b]) {
      await gw.createLiveChannel(m, { name: "Paystack", provider: "paystack", config: { public_key: "pk_live_x", secret_key: "sk_live_x" } });
    }
  });
  afterAll(() => gw?.close());

  it("many subscribers of two merchants in both modes each get exactly their own events, once, under their own ids, from one execution per scope", async () => {
    const viewer = await gw.createUser(a.id, "viewer");
    const login = await apiClient(gw.url).post("/v1/auth/login", { email: viewer.email, password: viewer.password });
    expect(login.status, login.text).toBe(200);
    const viewerToken = login.body.data.access_token as string;

    // Created before anyone subscribes, so its creation notice is nobody's event.
    const pending = await initialize(a.testKey);
    const PER_SCOPE = 8;
    const scopes = { aTest: a.testKey, aLive: a.liveKey, bTest: b.testKey, bLive: b.liveKey };
    const clients = Object.fromEntries(
      Object.entries(scopes).map(([name, key]) => [name, Array.from({ length: PER_SCOPE }, () => wsClient(gw.url, key))]),
    );
    const subs = Object.fromEntries(Object.entries(clients).map(([name, list]) => [name, list.map((client) => collect(client, parse(EVENTS) as never))]));
    // The same document as a viewer (another role: another execution), and with variables (another key per value).
    const viewerClient = wsClientWith(gw.url, { Authorization: `Bearer ${viewerToken}` });
    const viewerSub = collect(viewerClient, parse(EVENTS) as never);
    const withEmail = "subscription WithEmail($email: Boolean!) { transactionEvents { type transaction { reference email @include(if: $email) } } }";
    const emailClient = wsClient(gw.url, a.testKey);
    const emailYes = collect(emailClient, parse(withEmail) as never, { email: true });
    const emailNo = collect(emailClient, parse(withEmail) as never, { email: false });
    // Several subscriptions on one socket: each frame must carry the id it answers.
    const raw = await rawSubscriber(gw.url, { "X-API-Key": a.testKey }, ["one", "two", "three"].map((id) => ({ id, query: EVENTS })));
    // A subscription that is not shared (its own subscribe-time lookup) works alongside, filtered by its argument.
    const statusClient = wsClient(gw.url, a.testKey);
    const statusSub = collect(
      statusClient,
      parse("subscription Status($reference: String!) { transactionStatusChanged(reference: $reference) { type transaction { reference } } }") as never,
      { reference: pending },
    );

    const shared = 4 * PER_SCOPE + 1 + 2 + 3;
    await waitUntil(() => stats().subscribers === shared, `${shared} shared subscribers`);
    // Groups: 4 scopes with the same document, the viewer's, and the variables' two.
    expect(stats().groups).toBe(7);
    const before = stats();

    const aRefs = [await initialize(a.testKey), await initialize(a.testKey)];
    const bRef = await initialize(b.testKey);
    for (const reference of aRefs) await pay(reference);
    await pay(bRef, DECLINED);
    const aLiveRef = await livePayment(a, "FAN-LIVE-A");
    const bLiveRef = await livePayment(b, "FAN-LIVE-B");
    await pay(pending);

    const expected = {
      aTest: [...aRefs.map((r) => `transaction.created ${r}`), ...aRefs.map((r) => `transaction.completed ${r}`), `transaction.completed ${pending}`],
      aLive: [`transaction.completed ${aLiveRef}`],
      bTest: [`transaction.created ${bRef}`, `transaction.failed ${bRef}`],
      bLive: [`transaction.completed ${bLiveRef}`],
    };
    for (const [name, list] of Object.entries(subs)) for (const sub of list) await sub.waitFor(expected[name as keyof typeof expected].length);
    await viewerSub.waitFor(expected.aTest.length);
    await emailNo.waitFor(expected.aTest.length);
    await emailYes.waitFor(expected.aTest.length);
    await waitUntil(() => raw.frames.length >= 3 * expected.aTest.length, "the raw socket's frames");
    await statusSub.done();
    const everyone = [...Object.values(subs).flat(), viewerSub, emailYes, emailNo, statusSub];
    await expectNothingMoreWithin(300, () => [everyone.map((sub) => sub.results.length), raw.frames.length], "no other or repeated event");

    for (const [name, list] of Object.entries(subs)) for (const sub of list) expect(seen(sub)).toEqual(expected[name as keyof typeof expected]);
    expect(seen(viewerSub)).toEqual(expected.aTest);
    expect(emailYes.results.map((r) => (r.data as any).transactionEvents.transaction)).toContainEqual({ reference: aRefs[0], email: "fan@example.com" });
    expect(emailNo.results.every((r) => !("email" in (r.data as any).transactionEvents.transaction))).toBe(true);
    expect(statusSub.results.map((r) => (r.data as any).transactionStatusChanged)).toEqual([{ type: "transaction.completed", transaction: { reference: pending } }]);
    for (const id of ["one", "two", "three"]) {
      const mine = raw.frames.filter((f) => f.id === id);
      expect(mine.every((f) => f.type === "next")).toBe(true);
      expect(mine.map((f) => `${f.payload.data.transactionEvents.type} ${f.payload.data.transactionEvents.transaction.reference}`)).toEqual(expected.aTest);
    }
    expect(raw.frames).toHaveLength(3 * expected.aTest.length);

    // Each event executed once per group that receives it, and written once per subscriber.
    const after = stats();
    const aTestGroups = 4; // the document as owner and as viewer, and its two variants
    const perGroup = { aTest: expected.aTest.length, aLive: 1, bTest: 2, bLive: 1 };
    expect(after.executions - before.executions).toBe(aTestGroups * perGroup.aTest + perGroup.aLive + perGroup.bTest + perGroup.bLive);
    const aTestSubscribers = PER_SCOPE + 1 + 2 + 3;
    expect(after.deliveries - before.deliveries).toBe(aTestSubscribers * perGroup.aTest + PER_SCOPE * (perGroup.aLive + perGroup.bTest + perGroup.bLive));

    raw.socket.close();
    await Promise.all([...Object.values(clients).flat(), viewerClient, emailClient, statusClient].map((client) => client.dispose()));
    await waitUntil(() => stats().groups === 0, "the groups to empty");
  });

  it(`a subscriber that never reads is closed with ${SLOW_CONSUMER_CLOSE_CODE} once over ${MAX_BUFFERED_BYTES / 1024} KiB wait for it, without holding up the others`, async () => {
    const merchant = await createSandboxMerchant(gw, "Fan slow");
    const healthyClients = Array.from({ length: 3 }, () => wsClient(gw.url, merchant.testKey));
    const healthy = healthyClients.map((client) => collect(client, parse(EVENTS) as never));
    // Large frames, many subscriptions: the paused socket's kernel buffers (a few MB) fill within a few events.
    const big = "subscription Big { transactionEvents { id type occurredAt webhookBody transaction { reference status amount description email } } }";
    const slow = await rawSubscriber(gw.url, { "X-API-Key": merchant.testKey }, Array.from({ length: 200 }, (_, i) => ({ id: `s${i}`, query: big })));
    await waitUntil(() => stats().subscribers === 203, "203 subscribers");
    slow.socket.pause();
    const dropped = stats().slowConsumersClosed;

    // Payments whose events reached every reader while the paused socket was still open and stalled.
    let deliveredWhileStalled = 0;
    let payments = 0;
    while (stats().slowConsumersClosed === dropped) {
      if (++payments > 60) throw new Error("the paused socket was never closed");
      const reference = await initialize(merchant.testKey, { description: "d".repeat(500) });
      await pay(reference);
      for (const sub of healthy) await sub.waitFor(2 * payments);
      if (stats().slowConsumersClosed === dropped) deliveredWhileStalled++;
    }
    // Events reached the readers while the other socket stalled: the slow one never made them wait (if it did, the
    // readers would have had nothing until it was closed, and waitFor would have failed).
    expect(deliveredWhileStalled).toBeGreaterThanOrEqual(1);
    for (const sub of healthy) expect(sub.results).toHaveLength(2 * payments);

    // Once it reads again it gets what was already sent, then the close code; its 200 subscriptions are gone.
    slow.socket.resume();
    expect(await slow.closed).toEqual({ code: SLOW_CONSUMER_CLOSE_CODE, reason: "Subscriber too slow" });
    expect(slow.frames.every((f) => f.type === "next" && /^s\d+$/.test(f.id!))).toBe(true);
    await waitUntil(() => stats().subscribers === 3, "only the readers left");

    const reference = await initialize(merchant.testKey);
    await pay(reference);
    for (const sub of healthy) {
      await sub.waitFor(2 * payments + 2);
      expect(seen(sub).slice(-2)).toEqual([`transaction.created ${reference}`, `transaction.completed ${reference}`]);
    }
    await Promise.all(healthyClients.map((client) => client.dispose()));
    await waitUntil(() => stats().groups === 0, "the groups to empty");
  });

  it("a group goes when its last subscriber leaves (complete, dispose, dropped socket), and its stream with it", async () => {
    const merchant = await createSandboxMerchant(gw, "Fan leave");
    const start = stats();
    const stayer = wsClient(gw.url, merchant.testKey);
    const leaver = wsClient(gw.url, merchant.testKey);
    const stays = collect(stayer, parse(EVENTS) as never);
    const leaves = collect(leaver, parse(EVENTS) as never);
    const raw = await rawSubscriber(gw.url, { "X-API-Key": merchant.testKey }, [{ id: "r1", query: EVENTS }]);
    await waitUntil(() => stats().subscribers === start.subscribers + 3, "3 subscribers");
    expect(stats().groups).toBe(start.groups + 1);

    leaves.dispose(); // graphql-ws `complete`: the socket stays open
    await waitUntil(() => stats().subscribers === start.subscribers + 2, "the completed one gone");
    raw.socket.terminate(); // no close handshake
    await waitUntil(() => stats().subscribers === start.subscribers + 1, "the dropped socket's one gone");
    expect(stats().groups).toBe(start.groups + 1);

    const reference = await initialize(merchant.testKey);
    await stays.waitFor(1);
    expect(seen(stays)).toEqual([`transaction.created ${reference}`]);
    expect(leaves.results).toEqual([]);

    await stayer.dispose();
    await leaver.dispose();
    await waitUntil(() => stats().groups === start.groups && stats().subscribers === start.subscribers, "the registry back to where it was");
    // Nothing executes the merchant's events any more: the shared stream ended with its group.
    const idle = stats().executions;
    await pay(reference);
    await expectNothingMoreWithin(300, () => stats().executions, "no execution of the merchant's events");
    expect(stats().executions).toBe(idle);
  });
});
