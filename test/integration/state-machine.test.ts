import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { PublishedEvent } from "../../src/modules/events/publisher.ts";
import { CREATED_NOTICE } from "../../src/modules/transactions/state-machine.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/** The one function that changes a transaction's status: exactly once, terminal states final, events after commit. */
describe("transaction state machine", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  const published: PublishedEvent[] = [];
  // Status changes only: a new checkout transaction also sends live subscribers a created notice (no event row).
  const statusEvents = () => published.filter((e) => e.type !== CREATED_NOTICE);

  beforeAll(async () => {
    gw = await startTestGateway();
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    void (async () => {
      for await (const event of gw.gateway.services.publisher.subscribe(merchant.id, "test")) published.push(event);
    })();
  });
  afterAll(() => gw?.close());

  async function newTransaction() {
    const res = await api.post("/api/transactions/initialize", { amount: 5000, email: "sm@example.com" });
    return gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: res.body.reference } });
  }

  it("applies exactly one of many concurrent transitions and writes one event", async () => {
    const transaction = await newTransaction();
    const transitions = gw.gateway.services.transactions;
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        transitions.transition({
          transactionId: transaction.id,
          to: i % 2 ? "failed" : "completed",
          changes: i % 2 ? { failureCode: `f${i}` } : { providerReference: `p${i}` },
        }),
      ),
    );
    const applied = results.filter((r) => r.applied);
    expect(applied).toHaveLength(1);
    const finalRow = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
    expect(finalRow.status).toBe(applied[0]!.transaction.status);
    for (const r of results) expect(r.transaction.status).toBe(finalRow.status);
    const events = await gw.gateway.db.prisma.event.findMany({ where: { transactionId: transaction.id } });
    expect(events).toHaveLength(1);
    expect(events[0]!.type).toBe(`transaction.${finalRow.status}`);
    await vi.waitFor(() => expect(statusEvents().filter((e) => e.transactionId === transaction.id)).toHaveLength(1));
    await new Promise((resolve) => setTimeout(resolve, 100)); // and no second one arrives
    expect(statusEvents().filter((e) => e.transactionId === transaction.id)).toHaveLength(1);
    expect(published.filter((e) => e.transactionId === transaction.id).map((e) => e.type)).toEqual([CREATED_NOTICE, `transaction.${finalRow.status}`]);
  });

  it("never changes a terminal state", async () => {
    const transaction = await newTransaction();
    const first = await gw.gateway.services.transactions.transition({ transactionId: transaction.id, to: "failed", changes: { failureCode: "x" } });
    expect(first.applied).toBe(true);
    const second = await gw.gateway.services.transactions.transition({ transactionId: transaction.id, to: "completed" });
    expect(second.applied).toBe(false);
    expect(second.event).toBeNull();
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
    expect(row).toMatchObject({ status: "failed", failureCode: "x", completedAt: null });
  });

  it("records the transaction as of the event in the event payload", async () => {
    const transaction = await newTransaction();
    const result = await gw.gateway.services.transactions.transition({
      transactionId: transaction.id,
      to: "completed",
      changes: { paymentMethod: "card", providerReference: "sbx_1" },
    });
    expect(result.event).toMatchObject({ type: "transaction.completed", merchantId: transaction.merchantId, mode: "test" });
    expect(result.event!.payload).toMatchObject({
      transaction: { reference: transaction.reference, amount: 5000, status: "completed", payment_method: "card", provider_reference: "sbx_1" },
    });
    expect(result.transaction.completedAt).toBeInstanceOf(Date);
  });

  it("publishes nothing and writes nothing when the database transaction fails", async () => {
    const transaction = await newTransaction();
    const before = statusEvents().length;
    // A change that violates a constraint (unique checkout_request_id) rolls the whole transition back.
    const taken = await newTransaction();
    await gw.gateway.db.prisma.transaction.update({ where: { id: taken.id }, data: { checkoutRequestId: "ws_CO_TAKEN" } });
    await expect(
      gw.gateway.services.transactions.transition({ transactionId: transaction.id, to: "completed", changes: { checkoutRequestId: "ws_CO_TAKEN" } }),
    ).rejects.toThrow();
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
    expect(row.status).toBe("pending");
    expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: transaction.id } })).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(statusEvents().length).toBe(before);
  });
});
