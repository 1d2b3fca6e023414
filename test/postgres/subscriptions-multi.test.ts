import { describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { withGateways } from "../support/fixture.ts";
import { apiClient, createSandboxMerchant, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { collect, listeningTo, sseSubscribe, wsClient } from "../support/subscriptions.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";

const Changed = graphql(`
  subscription ChangedAcrossInstances($reference: String!) {
    transactionStatusChanged(reference: $reference) {
      type
      transaction {
        reference
        status
        amount
      }
    }
  }
`);

const Everything = graphql(`
  subscription EverythingAcrossInstances {
    transactionEvents(ready: true) {
      transaction {
        reference
        status
      }
    }
  }
`);

/** Two gateway instances on one PostgreSQL database and one Redis: events cross instances. */
describe("subscriptions across gateway instances", () => {
  let a: TestGateway;
  let b: TestGateway;
  let merchant: TestMerchant;
  let other: TestMerchant;

  withGateways({ redis: true }, async (started) => {
    [a, b] = started.gateways as [TestGateway, TestGateway];
    merchant = await createSandboxMerchant(a, "Crossing");
    other = await createSandboxMerchant(a, "Bystander");
  });

  const initializeOnA = async (m: TestMerchant) => {
    const res = await apiClient(a.url, m.testKey).post("/api/transactions/initialize", { amount: 777, email: "x@example.com" });
    expect(res.status).toBe(200);
    return res.body.reference as string;
  };
  const payOnA = (reference: string) =>
    apiClient(a.url).post(`/payment/checkout/${reference}/pay`, {
      card_number: "4242424242424242",
      expiry_month: 1,
      expiry_year: new Date().getUTCFullYear() + 3,
      cvc: "123",
    });

  it("a WebSocket subscriber on B receives a completion made through A; another merchant's subscriber on B does not", async () => {
    const reference = await initializeOnA(merchant);
    const client = wsClient(b.url, merchant.testKey);
    const bystander = wsClient(b.url, other.testKey);
    const sub = await listeningTo(b.gateway, () => collect(client, Changed, { reference }));
    const all = collect(client, Everything);
    const theirs = collect(bystander, Everything);
    await Promise.all([all.ready(), theirs.ready()]);
    expect((await payOnA(reference)).status).toBe(200);
    await sub.done();
    expect(sub.results.map((r) => r.data?.transactionStatusChanged)).toEqual([
      { type: "transaction.completed", transaction: { reference, status: "completed", amount: 777 } },
    ]);
    await all.waitFor(1);
    expect(all.results[0]!.data!.transactionEvents.transaction.reference).toBe(reference);
    await expectNothingMoreWithin(300, () => theirs.results.length, "nothing for the other merchant");
    expect(theirs.results).toEqual([]);
    all.dispose();
    theirs.dispose();
    await Promise.all([client.dispose(), bystander.dispose()]);
  });

  it("WebSocket subscribers on B share one execution per event, through Redis, each getting it once", async () => {
    const stats = () => b.gateway.subscriptions.stats();
    await waitUntil(() => stats().groups === 0, "the previous test's subscribers to go");
    const clients = Array.from({ length: 5 }, () => wsClient(b.url, merchant.testKey));
    const subs = clients.map((client) => collect(client, Everything));
    const bystander = wsClient(b.url, other.testKey);
    const theirs = collect(bystander, Everything);
    await waitUntil(() => stats().subscribers === 6, "6 subscribers");
    expect(stats().groups).toBe(2);
    await Promise.all([...subs, theirs].map((sub) => sub.ready())); // B's Redis SUBSCRIBE is asynchronous
    // Counted from here: starting a subscription (its ready signal) is not an event's execution.
    const before = stats();
    const reference = await initializeOnA(merchant);
    expect((await payOnA(reference)).status).toBe(200);
    for (const sub of subs) await sub.waitFor(2);
    await expectNothingMoreWithin(300, () => [...subs, theirs].map((sub) => sub.results.length), "no repeated or foreign event");
    for (const sub of subs) {
      expect(sub.results.map((r) => r.data?.transactionEvents.transaction)).toEqual([
        { reference, status: "pending" },
        { reference, status: "completed" },
      ]);
    }
    expect(theirs.results).toEqual([]);
    const after = b.gateway.subscriptions.stats();
    expect(after.executions - before.executions).toBe(2);
    expect(after.deliveries - before.deliveries).toBe(10);
    await Promise.all([...clients, bystander].map((client) => client.dispose()));
  });

  it("an SSE subscriber on B receives the same", async () => {
    const reference = await initializeOnA(merchant);
    const stream = await listeningTo(b.gateway, () => sseSubscribe(b.url, merchant.testKey, Changed, { reference }));
    await payOnA(reference);
    await stream.waitFor(() => stream.events.some((e) => e.event === "next"));
    expect(stream.events.find((e) => e.event === "next")!.data.data.transactionStatusChanged.transaction).toEqual({
      reference,
      status: "completed",
      amount: 777,
    });
    await stream.close();
  });
});
