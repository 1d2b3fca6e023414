import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { PublishedEvent } from "../../src/modules/events/publisher.ts";
import { applyTransition, type StatusMachineDeps } from "../../src/modules/events/status-machine.ts";
import { PAYOUT_STATUS, payoutSnapshot } from "../../src/modules/payouts/store.ts";
import { CREATED_NOTICE, transactionSnapshot } from "../../src/modules/transactions/status.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin } from "../support/wait.ts";

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
    await expectNothingMoreWithin(100, () => statusEvents().length, "no second status event");
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
    // The payload is written by SQL in the status change's statement: it must be transactionSnapshot() of the row.
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
    expect(result.transaction).toEqual(row);
    expect(result.event!.payload).toEqual({ transaction: transactionSnapshot(row) });
    const stored = await gw.gateway.db.prisma.event.findFirstOrThrow({ where: { transactionId: transaction.id } });
    expect(stored.payload).toEqual({ transaction: transactionSnapshot(row) });
  });

  it("writes the same snapshot for a failure, with its nulls, and queues follow-up jobs only when applied", async () => {
    const res = await api.post("/api/transactions/initialize", {
      amount: 12345, email: "nulls@example.com", description: "Ünïcode \"quoted\" ☃", currency: "KES",
      // jsonb in the SQL snapshot and the model's Json in transactionSnapshot() must agree, nesting and unicode included.
      metadata: { order: 7, tags: ["a", "ü"], nested: { ok: true, none: null, n: 1.5 } },
    });
    const transaction = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: res.body.reference } });
    const jobs = [{ kind: "test.follow-up", payload: { reference: transaction.reference, n: 1 }, runAt: new Date(Date.now() + 3_600_000) }];
    const result = await gw.gateway.services.transactions.transition({
      transactionId: transaction.id, to: "failed", changes: { failureCode: "1032", failureReason: null }, jobs,
    });
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
    expect(row).toMatchObject({ status: "failed", failureCode: "1032", failureReason: null, completedAt: null });
    expect(result.event!.payload).toEqual({ transaction: transactionSnapshot(row) });
    const again = await gw.gateway.services.transactions.transition({ transactionId: transaction.id, to: "completed", jobs });
    expect(again).toMatchObject({ applied: false, event: null });
    expect(again.transaction).toEqual(row);
    const queued = await gw.gateway.db.prisma.job.findMany({ where: { kind: "test.follow-up" } });
    expect(queued.filter((j) => (j.payload as { reference: string }).reference === transaction.reference)).toEqual([
      expect.objectContaining({ payload: { reference: transaction.reference, n: 1 }, runAt: jobs[0]!.runAt, status: "queued" }),
    ]);
  });

  it("publishes nothing and writes nothing when the database transaction fails", async () => {
    const transaction = await newTransaction();
    const before = statusEvents().length;
    // A follow-up job the jobs table refuses (no kind) fails the statement: the status change and its event go with it.
    await expect(
      gw.gateway.services.transactions.transition({
        transactionId: transaction.id,
        to: "completed",
        jobs: [{ kind: null as unknown as string, payload: { reference: transaction.reference } }],
      }),
    ).rejects.toThrow();
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
    expect(row.status).toBe("pending");
    expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: transaction.id } })).toBe(0);
    await expectNothingMoreWithin(100, () => statusEvents().length, "no event of the rolled-back change");
    expect(statusEvents().length).toBe(before);
  });
});

/** Payouts change status through the same function, with their own table, event link and snapshot. */
describe("payout status changes on the same machine", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let deps: StatusMachineDeps;

  beforeAll(async () => {
    gw = await startTestGateway();
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    const { services, db } = gw.gateway;
    deps = { prisma: db.prisma, sql: db.sql, publisher: services.publisher, jobs: services.jobs };
  });
  afterAll(() => gw?.close());

  /** A sandbox payout to the number that never answers: it stays pending until someone settles it. */
  async function pendingPayout() {
    const res = await api.post("/v1/payouts", { amount: 98700, phone_number: "254700001019", reference: "SM-1" });
    expect(res.body.message ?? res.status).toBe(201);
    return gw.gateway.db.prisma.payout.findUniqueOrThrow({ where: { reference: res.body.data.reference } });
  }

  it("applies exactly one of many concurrent changes, with one event linked to the payout", async () => {
    const payout = await pendingPayout();
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        applyTransition(deps, PAYOUT_STATUS, { id: payout.id, to: i % 2 ? "failed" : "completed", changes: i % 2 ? { failureCode: `f${i}` } : { providerReference: `R${i}` } }),
      ),
    );
    const applied = results.filter((r) => r.applied);
    expect(applied).toHaveLength(1);
    const row = await gw.gateway.db.prisma.payout.findUniqueOrThrow({ where: { id: payout.id } });
    for (const r of results) expect(r.row).toEqual(row);
    const events = await gw.gateway.db.prisma.event.findMany({ where: { payoutId: payout.id } });
    expect(events.map((e) => [e.type, e.transactionId])).toEqual([[`payout.${row.status}`, null]]);
    expect(applied[0]!.event).toMatchObject({ type: `payout.${row.status}`, payoutId: payout.id, transactionId: null });
  });

  it("never changes a terminal payout, and writes the snapshot payoutSnapshot() gives for the row", async () => {
    const payout = await pendingPayout();
    const done = await applyTransition(deps, PAYOUT_STATUS, { id: payout.id, to: "completed", changes: { providerReference: "RCPT1" } });
    const row = await gw.gateway.db.prisma.payout.findUniqueOrThrow({ where: { id: payout.id } });
    expect(row).toMatchObject({ status: "completed", providerReference: "RCPT1", failureCode: null });
    expect(row.completedAt).toBeInstanceOf(Date);
    // Written by SQL in the change's own statement: every kind (amount, msisdn, times, nulls) as the TypeScript form has it.
    expect(done.event!.payload).toEqual({ payout: payoutSnapshot(row) });
    expect(done.event!.payload).toMatchObject({ payout: { amount: 98700, phone_number: "254700001019", failure_reason: null } });
    const stored = await gw.gateway.db.prisma.event.findFirstOrThrow({ where: { payoutId: payout.id } });
    expect(stored.payload).toEqual({ payout: payoutSnapshot(row) });

    const again = await applyTransition(deps, PAYOUT_STATUS, { id: payout.id, to: "failed", changes: { failureCode: "late" } });
    expect(again).toMatchObject({ applied: false, event: null });
    expect(again.row).toEqual(row);
    expect(await gw.gateway.db.prisma.event.count({ where: { payoutId: payout.id } })).toBe(1);
  });
});
