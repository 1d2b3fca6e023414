import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient as plainApiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { retrying } from "../support/retry.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

const card = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };

/**
 * Two gateway instances on one PostgreSQL: 50 concurrent refunds of a tenth of one payment, split across
 * both, are decided in the database one at a time: exactly 10 are accepted, and the refunds that have not
 * failed never add up to more than was paid.
 */
describe("refund race across two instances", () => {
  let a: TestGateway;
  let b: TestGateway;
  let key: string;

  beforeAll(async () => {
    const env = { RATE_LIMIT_ENABLED: "false", SANDBOX_REFUND_DELAY_MS: "60000" };
    a = await startTestGateway({ env });
    b = await startTestGateway({ env, database: a.database });
    key = (await a.createMerchant()).testKey;
    const channel = await apiClient(a.url, key).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(channel.status, channel.text).toBe(201);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("50 requests for a tenth each: 10 x 201 and 40 x 409 amount_exceeds_refundable, three rounds", async () => {
    for (let round = 0; round < 3; round++) {
      const init = await apiClient(a.url, key).post("/api/transactions/initialize", { amount: 20_000, email: "payer@example.com" });
      expect((await apiClient(b.url).post(`/payment/checkout/${init.body.reference}/pay`, card)).status).toBe(200);
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) => apiClient(i % 2 ? a.url : b.url, key).post("/v1/refunds", { transaction: init.body.reference, amount: 2_000 })),
      );
      const accepted = answers.filter((x) => x.status === 201);
      expect(accepted).toHaveLength(10);
      // Both instances accepted some: the lock, not one process, decided.
      expect(answers.filter((x, i) => i % 2 === 0 && x.status === 201).length).toBeGreaterThan(0);
      expect(answers.filter((x, i) => i % 2 === 1 && x.status === 201).length).toBeGreaterThan(0);
      for (const x of answers.filter((x) => x.status !== 201)) {
        expect(x.status).toBe(409);
        expect(x.body).toMatchObject({ status: "error", code: "amount_exceeds_refundable" });
      }
      const rows = await a.gateway.db.prisma.refund.findMany({ where: { transactionReference: init.body.reference } });
      expect(rows.reduce((sum, r) => sum + r.amount, 0n)).toBe(20_000n);
    }
  });
});
