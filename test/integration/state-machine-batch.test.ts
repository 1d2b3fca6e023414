import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Transaction } from "../../src/db/generated/prisma/client.ts";
import type { PublishedEvent } from "../../src/modules/events/publisher.ts";
import { CREATED_NOTICE, transactionSnapshot, type TransitionRequest } from "../../src/modules/transactions/status.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin } from "../support/wait.ts";

/**
 * The status machine's batched form (a billing batch's settled charges, transitionMany): the same guarantees as one
 * change at a time, for every row of the batch: exactly once however many callers race, terminal states final, the
 * attempt's verdict, event, postings and follow-up jobs with each change that applies, and nothing at all when the
 * statement fails.
 */
describe("transaction state machine, many changes in one statement", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let channelId: number;
  const published: PublishedEvent[] = [];
  const statusEvents = (ids: number[]) => published.filter((e) => e.type !== CREATED_NOTICE && ids.includes(e.transactionId ?? -1));

  beforeAll(async () => {
    gw = await startTestGateway();
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(channel.status, channel.text).toBe(201);
    channelId = channel.body.channel.id;
    void (async () => {
      for await (const event of gw.gateway.services.publisher.subscribe(merchant.id, "test")) published.push(event);
    })();
  });
  afterAll(() => gw?.close());
  afterAll(() => expectCleanLedger(gw));

  const transitions = () => gw.gateway.services.transactions;

  /** Pending payments, each with a pending API card attempt (as a saved card's charge has). */
  async function pendingCharges(n: number, amount = 5000): Promise<{ t: Transaction; attemptId: number }[]> {
    const made = [];
    for (let i = 0; i < n; i++) {
      const res = await api.post("/api/transactions/initialize", { amount: amount + i, email: `batch${i}@example.com` });
      const t = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: res.body.reference } });
      const attempt = await gw.gateway.db.prisma.transactionAttempt.create({
        data: { transactionId: t.id, method: "card", origin: "api", status: "pending", detail: "**** 4081", channelId },
      });
      made.push({ t, attemptId: attempt.id });
    }
    return made;
  }

  const completing = ({ t, attemptId }: { t: Transaction; attemptId: number }, i: number): TransitionRequest => ({
    transactionId: t.id,
    to: "completed",
    changes: { paymentMethod: "card", providerReference: `sbx_batch_${t.id}_${i}` },
    settlesAttempt: { attemptId, status: "succeeded", providerReference: `sbx_batch_${t.id}_${i}` },
    invoiceRecordedByCaller: true,
  });

  const failing = ({ t, attemptId }: { t: Transaction; attemptId: number }): TransitionRequest => ({
    transactionId: t.id,
    to: "failed",
    changes: { paymentMethod: "card", failureCode: "card_declined", failureReason: "Declined" },
    settlesAttempt: { attemptId, status: "failed", code: "card_declined", reason: "Declined" },
    invoiceRecordedByCaller: true,
  });

  it("applies each row once, with its attempt's verdict, its event, its postings and its own jobs, answering in order", async () => {
    const charges = await pendingCharges(4);
    const jobs = charges.map(({ t }) => [{ kind: "test.batch-follow-up", payload: { reference: t.reference }, runAt: new Date(Date.now() + 3_600_000) }]);
    // Out of id order: the answers follow the requests, whatever order the rows are locked in.
    const order = [2, 0, 3, 1];
    const results = await transitions().transitionMany(order.map((k) => ({ ...completing(charges[k]!, k), ...(k % 2 ? { jobs: jobs[k] } : {}) })));
    expect(results.map((r) => [r.applied, r.transaction.id])).toEqual(order.map((k) => [true, charges[k]!.t.id]));
    for (const [i, k] of order.entries()) {
      const { t, attemptId } = charges[k]!;
      const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: t.id } });
      expect(row).toMatchObject({ status: "completed", paymentMethod: "card", providerReference: `sbx_batch_${t.id}_${k}`, amount: BigInt(5000 + k) });
      expect(row.completedAt).toBeInstanceOf(Date);
      expect(results[i]!.transaction).toEqual(row);
      expect(results[i]!.event!.payload).toEqual({ transaction: transactionSnapshot(row) });
      const attempt = await gw.gateway.db.prisma.transactionAttempt.findUniqueOrThrow({ where: { id: attemptId } });
      expect(attempt).toMatchObject({ status: "succeeded", providerReference: `sbx_batch_${t.id}_${k}` });
      const events = await gw.gateway.db.prisma.event.findMany({ where: { transactionId: t.id } });
      expect(events.map((e) => e.type)).toEqual(["transaction.completed"]);
      expect(events[0]!.payload).toEqual({ transaction: transactionSnapshot(row) });
      // One payment entry per payment, for its own amount: each entry joined to its own row, not to the batch's.
      const entries = await gw.gateway.db.prisma.ledgerEntry.findMany({ where: { sourceType: "transaction", sourceId: t.id } });
      expect(entries.map((e) => [e.type, e.amount])).toEqual([["payment", BigInt(5000 + k)]]);
      const legs = await gw.gateway.db.prisma.ledgerPosting.findMany({ where: { entryId: entries[0]!.id } });
      expect(legs.reduce((sum, p) => sum + p.amount, 0n)).toBe(0n);
      expect(legs.map((p) => p.amount)).toContainEqual(BigInt(-(5000 + k)));
    }
    const queued = await gw.gateway.db.prisma.job.findMany({ where: { kind: "test.batch-follow-up" } });
    expect(queued.map((j) => (j.payload as { reference: string }).reference).sort()).toEqual([charges[1]!.t.reference, charges[3]!.t.reference].sort());
    const ids = charges.map(({ t }) => t.id);
    await vi.waitFor(() => expect(statusEvents(ids)).toHaveLength(4));
    expect(new Set(statusEvents(ids).map((e) => e.transactionId))).toEqual(new Set(ids));
  });

  it("changes each row exactly once when batches and single changes race over the same rows", async () => {
    const charges = await pendingCharges(6);
    const ids = charges.map(({ t }) => t.id);
    const results = await Promise.all([
      transitions().transitionMany(charges.map(completing)),
      transitions().transitionMany([...charges].reverse().map(failing)),
      transitions().transitionMany(charges.slice(2).map(completing)),
      ...charges.map((c, i) => transitions().transition(i % 2 ? failing(c) : completing(c, i))),
    ]);
    const all = results.flat();
    for (const id of ids) {
      const applied = all.filter((r) => r.transaction.id === id && r.applied);
      expect(applied).toHaveLength(1);
      const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id } });
      for (const r of all.filter((r) => r.transaction.id === id)) expect(r.transaction.status).toBe(row.status);
      const events = await gw.gateway.db.prisma.event.findMany({ where: { transactionId: id } });
      expect(events.map((e) => e.type)).toEqual([`transaction.${row.status}`]);
      const entries = await gw.gateway.db.prisma.ledgerEntry.count({ where: { sourceType: "transaction", sourceId: id } });
      expect(entries).toBe(row.status === "completed" ? 1 : 0);
      const attempt = await gw.gateway.db.prisma.transactionAttempt.findFirstOrThrow({ where: { transactionId: id } });
      // A completed payment's attempt succeeded; a failed one's failed, or was told of a success after (a late
      // success, recorded on the attempt as a single change records it, the payment staying final).
      if (row.status === "completed") expect(attempt.status).toBe("succeeded");
      else expect(["failed", "succeeded"]).toContain(attempt.status);
    }
    await vi.waitFor(() => expect(statusEvents(ids)).toHaveLength(6));
    await expectNothingMoreWithin(100, () => statusEvents(ids).length, "no second status event");
  });

  it("leaves a terminal row, and one whose attempt was settled already, as they are, and applies the rest", async () => {
    const [done, settledAttempt, open] = await pendingCharges(3);
    await transitions().transition(completing(done!, 0));
    // A verdict is final once it is a success: a failure of it no longer applies, and nor does its payment's.
    await gw.gateway.db.prisma.transactionAttempt.update({ where: { id: settledAttempt!.attemptId }, data: { status: "succeeded" } });
    const results = await transitions().transitionMany([done!, settledAttempt!, open!].map(failing));
    expect(results.map((r) => [r.applied, r.transaction.status, r.event === null])).toEqual([
      [false, "completed", true],
      [false, "pending", true],
      [true, "failed", false],
    ]);
    expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: settledAttempt!.t.id, type: { not: "transaction.pending" } } })).toBe(0);
    expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: done!.t.id } })).toBe(1);
    expect(await gw.gateway.db.prisma.ledgerEntry.count({ where: { sourceType: "transaction", sourceId: { in: [done!.t.id, settledAttempt!.t.id, open!.t.id] } } })).toBe(1);
    // Left pending by the refused verdict: it completes, as its attempt says, so the ledger check sees it whole.
    await transitions().transition({ transactionId: settledAttempt!.t.id, to: "completed", changes: { paymentMethod: "card" } });
  });

  it("writes and publishes nothing for any row when the statement fails", async () => {
    const charges = await pendingCharges(3);
    const ids = charges.map(({ t }) => t.id);
    const before = statusEvents(ids).length;
    // One row's follow-up job the jobs table refuses (no kind) fails the statement: every row's change goes with it.
    const requests = charges.map((c, i) => ({ ...completing(c, i), ...(i === 2 ? { jobs: [{ kind: null as unknown as string, payload: {} }] } : {}) }));
    await expect(transitions().transitionMany(requests)).rejects.toThrow();
    for (const { t, attemptId } of charges) {
      expect((await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: t.id } })).status).toBe("pending");
      expect((await gw.gateway.db.prisma.transactionAttempt.findUniqueOrThrow({ where: { id: attemptId } })).status).toBe("pending");
      expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: t.id, type: { not: "transaction.pending" } } })).toBe(0);
      expect(await gw.gateway.db.prisma.ledgerEntry.count({ where: { sourceType: "transaction", sourceId: t.id } })).toBe(0);
    }
    await expectNothingMoreWithin(100, () => statusEvents(ids).length, "no event of the rolled-back batch");
    expect(statusEvents(ids).length).toBe(before);
    // The same batch without the bad job then applies: nothing of the failed one is left in its way.
    const retried = await transitions().transitionMany(charges.map(completing));
    expect(retried.map((r) => r.applied)).toEqual([true, true, true]);
  });

  it("refuses a batch that mixes statuses or names a payment twice, before writing anything", async () => {
    const [a, b] = await pendingCharges(2);
    await expect(transitions().transitionMany([completing(a!, 0), failing(b!)])).rejects.toThrow(/shares its status/);
    await expect(transitions().transitionMany([completing(a!, 0), completing(a!, 1)])).rejects.toThrow(/twice in one batch/);
    for (const { t } of [a!, b!]) expect((await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: t.id } })).status).toBe("pending");
    await transitions().transitionMany([failing(a!), failing(b!)]);
  });
});
