import { parse } from "graphql";
import type { Client } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { sseSubscribe, wsClient } from "../support/subscriptions.ts";

/**
 * The opt-in ready signal of the event subscriptions (src/graphql/ready.ts): with `ready: true` the first message is
 * `{"extensions":{"ready":true}}`, sent once the server's subscription is confirmed (here through Redis, whose
 * SUBSCRIBE is answered after graphql-ws's connection_ack), so an event committed right after it is delivered.
 * Without the argument nothing changes for existing clients.
 */
/** The settling change of one payment (a checkout also announces transaction.created first). */
const completed = (reference: string) => (r: Result) => r.data?.transactionEvents?.type === "transaction.completed" && r.data.transactionEvents.transaction?.reference === reference;

type Result = { data?: any; extensions?: Record<string, unknown>; errors?: unknown };

/** Every message of one subscription, in order. */
function subscribe(client: Client, query: string) {
  const results: Result[] = [];
  const waiters = new Set<() => void>();
  let failure: unknown;
  const stop = client.subscribe(
    { query },
    {
      next: (value) => {
        results.push(value as Result);
        waiters.forEach((w) => w());
      },
      error: (error) => {
        failure = error;
        waiters.forEach((w) => w());
      },
      complete: () => {},
    },
  );
  return {
    results,
    stop,
    /** Resolves once `count` messages arrived, or one that `match` accepts. */
    waitFor: (count: number | ((result: Result) => boolean), timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${String(count)}; got ${JSON.stringify(results)}`)), timeoutMs);
        const check = () => {
          if (failure) reject(failure);
          else if (typeof count === "number" ? results.length >= count : results.some(count)) resolve();
          else return;
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
  };
}

describe("the ready signal of event subscriptions", () => {
  let redis: RedisServer;
  let gw: TestGateway;
  let merchant: TestMerchant;
  const clients: Client[] = [];

  const pay = () => paidTransaction(gw.url, merchant.testKey, { amount: 1500, email: "ready@example.com" });
  const client = () => {
    const c = wsClient(gw.url, merchant.testKey);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    redis = await startRedis();
    gw = await startTestGateway({ env: { REDIS_URL: redis.url } });
    merchant = await createSandboxMerchant(gw, "Ready");
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await gw?.close();
    await redis?.stop();
  });

  it("over WebSocket the first message says ready, and a payment made the moment it arrives is delivered (five fresh connections)", async () => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const c = client();
      const sub = subscribe(c, "subscription { transactionEvents(ready: true) { type transaction { reference status } } }");
      await sub.waitFor(1);
      expect(sub.results[0]).toEqual({ extensions: { ready: true } });
      const reference = await pay(); // no pause: ready means listening
      await sub.waitFor(completed(reference));
      expect(sub.results.find(completed(reference))).toEqual({ data: { transactionEvents: { type: "transaction.completed", transaction: { reference, status: "completed" } } } });
      expect(sub.results.slice(1).every((r) => r.data !== undefined && r.extensions === undefined)).toBe(true);
      sub.stop();
      await c.dispose();
    }
  });

  it("a second identical subscription joining a shared execution that is already listening gets its own ready message", async () => {
    const query = "subscription SharedReady { transactionEvents(ready: true) { type transaction { reference } } }";
    const first = subscribe(client(), query);
    await first.waitFor(1);
    const second = subscribe(client(), query);
    await second.waitFor(1);
    expect(second.results).toEqual([{ extensions: { ready: true } }]);
    expect(gw.gateway.subscriptions.stats().groups).toBeGreaterThanOrEqual(1);
    const reference = await pay();
    await Promise.all([first.waitFor(completed(reference)), second.waitFor(completed(reference))]);
    // One ready message each, then the same events.
    for (const sub of [first, second]) expect(sub.results.filter((r) => r.extensions?.ready)).toHaveLength(1);
    expect(second.results).toEqual(first.results);
    first.stop();
    second.stop();
  });

  it("payoutEvents takes it too; without the argument no ready message is sent (existing clients see events only)", async () => {
    const payouts = subscribe(client(), "subscription { payoutEvents(ready: true) { type } }");
    await payouts.waitFor(1);
    expect(payouts.results[0]).toEqual({ extensions: { ready: true } });
    payouts.stop();

    const plain = subscribe(client(), "subscription { transactionEvents { type transaction { reference } } }");
    const marker = subscribe(client(), "subscription { transactionEvents(ready: true) { type } }");
    await marker.waitFor(1); // the same merchant's topic is listening on this instance by now
    // Only a real event arrives on the plain subscription (it may have started listening a moment later: retry).
    for (let i = 0; i < 20 && plain.results.length === 0; i++) {
      const reference = await pay();
      await marker.waitFor((r) => r.data?.transactionEvents?.type === "transaction.completed" && marker.results.filter((m) => m.data?.transactionEvents?.type === "transaction.completed").length > i);
      void reference;
    }
    await plain.waitFor(1);
    expect(plain.results.length).toBeGreaterThan(0);
    expect(plain.results.every((r) => r.extensions === undefined && typeof r.data?.transactionEvents?.type === "string")).toBe(true);
    plain.stop();
    marker.stop();
  });

  it("over SSE the first event is the ready message, then the payment", async () => {
    const document = parse("subscription { transactionEvents(ready: true) { type transaction { reference } } }");
    const sse = await sseSubscribe(gw.url, merchant.testKey, document);
    expect(sse.status).toBe(200);
    await sse.waitFor(() => sse.events.length >= 1);
    expect(sse.events[0]).toEqual({ event: "next", data: { extensions: { ready: true } } });
    const reference = await pay();
    await sse.waitFor(() => sse.events.some((e) => completed(reference)(e.data)));
    expect(sse.events.slice(1).every((e) => e.data.data?.transactionEvents !== undefined)).toBe(true);
    sse.close();
  });
});
