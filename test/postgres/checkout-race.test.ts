import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { apiClient as plainApiClient, startTwoInstances, type TestGateway } from "../support/gateway.ts";
import { retrying } from "../support/retry.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" });
const IN_PROGRESS = { status: "error", code: "conflict", message: "A payment for this transaction is in progress" };

/**
 * Two gateway instances on one PostgreSQL: 50 concurrent checkout payments of one transaction, split
 * across both, make one card charge. Charges are counted from each instance's "card charge sent" log
 * line, written right before the connector is called.
 */
describe("checkout payment race across two instances", () => {
  let a: TestGateway;
  let b: TestGateway;
  let api: ReturnType<typeof apiClient>;
  const logLines: string[] = [];
  const logger = () => createLogger("info", { write: (line: string) => void logLines.push(line) });

  beforeAll(async () => {
    const env = { RATE_LIMIT_ENABLED: "false" };
    [a, b] = await startTwoInstances({ env, logger: logger() }, { logger: logger() });
    const merchant = await a.createMerchant();
    api = apiClient(a.url, merchant.testKey);
    // The sandbox's simulated processor latency: the window in which the racers overlap, as with a real provider.
    const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: { charge_delay_ms: 150 } });
    expect(channel.status, channel.text).toBe(201);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  const chargesOf = (reference: string) =>
    logLines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === "card charge sent" && entry.reference === reference).length;

  async function race(number: string) {
    const init = await api.post("/api/transactions/initialize", { amount: 5000, email: "payer@example.com" });
    expect(init.status, init.text).toBe(200);
    const reference: string = init.body.reference;
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => apiClient(i % 2 ? a.url : b.url).post(`/payment/checkout/${reference}/pay`, card(number))),
    );
    const row = await a.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
    const events = await a.gateway.db.prisma.event.findMany({ where: { transactionId: row.id } });
    const conflicts = answers.filter((x) => x.status === 409);
    for (const c of conflicts) expect([IN_PROGRESS, { ...IN_PROGRESS, message: `Transaction is already ${row.status}` }]).toContainEqual(c.body);
    // Both instances refused someone while the other's (or their own) charge was in flight.
    expect(answers.filter((x, i) => i % 2 === 0 && x.body?.message === IN_PROGRESS.message).length).toBeGreaterThan(0);
    expect(answers.filter((x, i) => i % 2 === 1 && x.body?.message === IN_PROGRESS.message).length).toBeGreaterThan(0);
    return { reference, answers, row, events, conflicts };
  }

  it("a valid card: one charge, one success, 49 x 409, one completed event", async () => {
    for (let round = 0; round < 3; round++) {
      const { reference, answers, row, events, conflicts } = await race("4242424242424242");
      const successes = answers.filter((x) => x.status === 200);
      expect(successes).toHaveLength(1);
      expect(successes[0]!.body).toMatchObject({ status: "success", message: "Payment completed", transaction: { reference, status: "completed" } });
      expect(conflicts).toHaveLength(49);
      expect(chargesOf(reference)).toBe(1);
      expect(row.status).toBe("completed");
      expect(events.map((e) => e.type)).toEqual(["transaction.completed"]);
    }
  });

  it("a declined card: one charge, one 402, 49 x 409, nobody told \"Payment completed\"", async () => {
    const { reference, answers, row, events, conflicts } = await race("4000000000009995");
    const declines = answers.filter((x) => x.status === 402);
    expect(declines.map((d) => d.body)).toEqual([{ status: "error", code: "payment_declined", message: "Insufficient funds" }]);
    expect(conflicts).toHaveLength(49);
    expect(answers.some((x) => x.text.includes("Payment completed"))).toBe(false);
    expect(chargesOf(reference)).toBe(1);
    expect(row).toMatchObject({ status: "failed", failureCode: "insufficient_funds" });
    expect(events.map((e) => e.type)).toEqual(["transaction.failed"]);
  });
});
