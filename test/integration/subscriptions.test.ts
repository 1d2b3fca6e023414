import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { graphql } from "../gql/index.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { collect, listeningTo, sseSubscribe, wsClient, type ClosedSocket } from "../support/subscriptions.ts";
import { transactionSnapshot } from "../../src/modules/transactions/snapshot.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";

const StatusChanged = graphql(`
  subscription StatusChanged($reference: String!) {
    transactionStatusChanged(reference: $reference) {
      id
      type
      occurredAt
      transaction {
        reference
        status
        amount
        currency
        paymentMethod
        failureCode
        completedAt
        customer {
          email
        }
      }
    }
  }
`);

const AllEvents = graphql(`
  subscription AllEvents {
    transactionEvents(ready: true) {
      type
      transaction {
        reference
        status
      }
    }
  }
`);

const CARD = { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 1, cvc: "123" };
const DECLINED = { ...CARD, card_number: "4000000000000002" };

describe("GraphQL subscriptions", () => {
  let gw: TestGateway;
  let a: TestMerchant;
  let b: TestMerchant;

  const initialize = async (merchant: TestMerchant, key = merchant.testKey) => {
    const res = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 4321, email: "sub@example.com" });
    expect(res.status).toBe(200);
    return res.body.reference as string;
  };
  const pay = (reference: string, card = CARD) => apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, card);

  beforeAll(async () => {
    gw = await startTestGateway();
    a = await createSandboxMerchant(gw, "A");
    b = await createSandboxMerchant(gw, "B");
    // Sandbox channels are test-mode only (hardening issue item 9); A's live payments come through Paystack,
    // whose channel a signed-in live owner creates (issue 35).
    await gw.createLiveChannel(a, { name: "Paystack", provider: "paystack", config: { public_key: "pk_live_x", secret_key: "sk_live_x" } });
  });
  afterAll(() => gw?.close());

  it("transactionStatusChanged over WebSocket delivers the change with the transaction as of it, then completes", async () => {
    const reference = await initialize(a);
    const client = wsClient(gw.url, a.testKey);
    // Listening before the payment, so the change arrives live (not as the already-settled answer of the next test).
    const sub = await listeningTo(gw.gateway, () => collect(client, StatusChanged, { reference }));
    expect((await pay(reference)).status).toBe(200);
    await sub.done();
    expect(sub.results).toHaveLength(1);
    const event = sub.results[0]!.data!.transactionStatusChanged;
    expect(event.type).toBe("transaction.completed");
    expect(event.occurredAt).toMatch(/Z$/);
    expect(event.transaction).toMatchObject({
      reference,
      status: "completed",
      amount: 4321,
      currency: "KES",
      paymentMethod: "card",
      failureCode: null,
      customer: { email: "sub@example.com" },
    });
    await client.dispose();
  });

  it("transactionStatusChanged skips the creation notice when it arrives after the subscription started (as Redis may deliver it)", async () => {
    const reference = await initialize(a);
    const client = wsClient(gw.url, a.testKey);
    const sub = await listeningTo(gw.gateway, () => collect(client, StatusChanged, { reference }));
    // The notice initialize published, delivered again now: a late copy from another instance looks just like this.
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
    gw.gateway.services.publisher.publish({
      id: `transaction.created:${row.id}`,
      type: "transaction.created",
      merchantId: row.merchantId,
      mode: row.mode,
      transactionId: row.id,
      payoutId: null,
      createdAt: row.createdAt.toISOString(),
      payload: { transaction: transactionSnapshot(row) },
    });
    expect((await pay(reference)).status).toBe(200);
    await sub.done();
    expect(sub.results.map((r) => [r.data?.transactionStatusChanged.type, r.data?.transactionStatusChanged.transaction.status])).toEqual([
      ["transaction.completed", "completed"],
    ]);
    await client.dispose();
  });

  it("delivers a failure too, and an already-settled transaction's last change at once", async () => {
    const reference = await initialize(a);
    expect((await pay(reference, DECLINED)).status).toBe(402);
    const client = wsClient(gw.url, a.testKey);
    const sub = collect(client, StatusChanged, { reference });
    await sub.done();
    expect(sub.results.map((r) => r.data?.transactionStatusChanged.transaction)).toEqual([
      expect.objectContaining({ status: "failed", failureCode: "card_declined" }),
    ]);
    await client.dispose();
  });

  it("an unknown or foreign reference is an error", async () => {
    const foreign = await initialize(b);
    const client = wsClient(gw.url, a.testKey);
    for (const reference of ["txn_nope", foreign]) {
      const sub = collect(client, StatusChanged, { reference });
      await sub.done();
      const failure = sub.results[0]?.errors ?? (sub.error as { message: string }[]);
      expect(JSON.stringify(failure)).toContain("Transaction not found");
    }
    await client.dispose();
  });

  it("transactionEvents sees only the key's own merchant and mode", async () => {
    const aTest = wsClient(gw.url, a.testKey);
    const aLive = wsClient(gw.url, a.liveKey);
    const bTest = wsClient(gw.url, b.testKey);
    const subs = { aTest: collect(aTest, AllEvents), aLive: collect(aLive, AllEvents), bTest: collect(bTest, AllEvents) };
    await Promise.all(Object.values(subs).map((sub) => sub.ready()));
    const aRef = await initialize(a);
    const bRef = await initialize(b);
    await pay(aRef);
    await pay(bRef, DECLINED);
    // A live payment without calling a real provider: recorded as a provider's confirmation would be.
    const [aLiveChannel] = await gw.gateway.services.channels.listChannels({ merchantId: a.id, mode: "live", role: "owner" as const, userId: null, keyId: null, keyPrefix: null });
    const aLiveRef = (
      await gw.gateway.services.transactions.recordProviderPayment(aLiveChannel!, {
        providerReference: "LIVE-SUB-1", amount: 4321n, currency: "KES", phoneNumber: null, clientReference: null, paymentMethod: "card",
      })
    ).transaction.reference;
    await subs.aTest.waitFor(2);
    await subs.bTest.waitFor(2);
    await subs.aLive.waitFor(1);
    await expectNothingMoreWithin(300, () => Object.values(subs).map((sub) => sub.results.length), "no other merchant's or mode's event");
    const seen = (s: typeof subs.aTest) => s.results.map((r) => `${r.data!.transactionEvents.type} ${r.data!.transactionEvents.transaction.reference}`);
    // A checkout payment is news when it starts (created, live only) and when it settles.
    expect(seen(subs.aTest)).toEqual([`transaction.created ${aRef}`, `transaction.completed ${aRef}`]);
    expect(seen(subs.bTest)).toEqual([`transaction.created ${bRef}`, `transaction.failed ${bRef}`]);
    expect(seen(subs.aLive)).toEqual([`transaction.completed ${aLiveRef}`]);
    await Promise.all([aTest.dispose(), aLive.dispose(), bTest.dispose()]);
  });

  it.each([
    ["a missing key", undefined],
    ["a wrong key", "sk_test_wrongwrongwrongwrongwrongwrong"],
  ])("closes the socket with 4403 for %s", async (_label, key) => {
    let closed: ClosedSocket | undefined;
    const client = wsClient(gw.url, key, (event) => (closed = event));
    const sub = collect(client, AllEvents);
    await sub.done().catch(() => {});
    await waitUntil(() => closed !== undefined, "the socket to close");
    expect(closed?.code).toBe(4403);
    expect(sub.results).toEqual([]);
    await client.dispose();
  });

  it("applies the GraphQL armor limits over WebSocket (an alias bomb is refused)", async () => {
    const client = wsClient(gw.url, a.testKey);
    const bomb = graphql(`
      subscription AliasBomb {
        transactionEvents {
          a0: type a1: type a2: type a3: type a4: type a5: type a6: type a7: type a8: type a9: type a10: type a11: type a12: type a13: type a14: type a15: type a16: type a17: type a18: type a19: type
        }
      }
    `);
    const sub = collect(client, bomb);
    await sub.done().catch(() => {});
    const errors = JSON.stringify(sub.results[0]?.errors ?? sub.error);
    expect(errors).toMatch(/alias/i);
    expect(sub.results.some((r) => r.data)).toBe(false);
    await client.dispose();
  });

  it("counts each subscribe operation against the key's rate limit", async () => {
    // 4: connection_init counts one request of the key's budget too, like an HTTP request.
    const limited = await startTestGateway({ env: { RATE_LIMIT_PER_MINUTE: "4" } });
    try {
      const merchant = await limited.createMerchant();
      const client = wsClient(limited.url, merchant.testKey);
      const subs = Array.from({ length: 4 }, () => collect(client, AllEvents));
      await subs[3]!.done();
      expect(JSON.stringify(subs[3]!.results[0]?.errors ?? subs[3]!.error)).toMatch(/Rate limit exceeded, retry in \d+ seconds/);
      for (const sub of subs.slice(0, 3)) {
        expect(sub.error).toBeUndefined();
        expect(sub.completed).toBe(false);
        sub.dispose();
      }
      await client.dispose();
    } finally {
      await limited.close();
    }
  });

  it("closes open WebSocket subscriptions and SSE streams cleanly on shutdown", async () => {
    const other = await startTestGateway();
    const merchant = await other.createMerchant();
    let closed: ClosedSocket | undefined;
    const client = wsClient(other.url, merchant.testKey, (event) => (closed = event));
    const sub = collect(client, AllEvents);
    const stream = await sseSubscribe(other.url, merchant.testKey, AllEvents);
    await Promise.all([sub.ready(), stream.ready()]);
    // An open stream holding close() would hold it forever; a busy machine only makes it slower.
    const closedInTime = await Promise.race([other.close().then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), EVENTUALLY_MS).unref())]);
    expect(closedInTime, "close() returned with a WebSocket subscription and an SSE stream open").toBe(true);
    await stream.waitFor(() => stream.ended());
    await sub.done().catch(() => {});
    expect(sub.completed || closed !== undefined).toBe(true);
    await client.dispose();
  });

  it("pings idle WebSocket connections (keep-alive)", async () => {
    // 1 s, not less: graphql-ws ends a connection whose pong does not come back within the interval, and a client on a
    // busy CI machine can take longer than 100 ms to answer one.
    const pinging = await startTestGateway({ env: { GRAPHQL_WS_KEEPALIVE_MS: "1000" } });
    try {
      const merchant = await pinging.createMerchant();
      const socket = new WebSocket(`${pinging.url.replace("http", "ws")}/graphql`, "graphql-transport-ws");
      let pings = 0;
      socket.on("ping", () => pings++);
      await new Promise((resolve) => socket.on("open", resolve));
      socket.send(JSON.stringify({ type: "connection_init", payload: { "X-API-Key": merchant.testKey } }));
      // Two pings within 8 s, before the default interval (12 s) would have sent one: the configured interval sent them.
      await waitUntil(() => pings >= 2, "two pings", 8_000);
      expect(pings).toBeGreaterThanOrEqual(2);
      socket.close();
    } finally {
      await pinging.close();
    }
  });

  it("delivers over SSE as well", async () => {
    const reference = await initialize(a);
    const stream = await listeningTo(gw.gateway, () => sseSubscribe(gw.url, a.testKey, StatusChanged, { reference }));
    expect(stream.status).toBe(200);
    await pay(reference);
    await stream.waitFor(() => stream.events.some((e) => e.event === "next"));
    const next = stream.events.find((e) => e.event === "next")!;
    expect(next.data.data.transactionStatusChanged.transaction).toMatchObject({ reference, status: "completed" });
    await stream.waitFor(() => stream.ended() || stream.events.some((e) => e.event === "complete"));
    await stream.close();
  });

  it("SSE without a valid key gets the 401 envelope", async () => {
    const res = await fetch(`${gw.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", "x-api-key": "nope" },
      body: JSON.stringify({ query: "subscription { transactionEvents { type } }" }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ status: "error", message: "Invalid API key", code: "invalid_api_key" });
  });
});
