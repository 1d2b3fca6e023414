import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildStkCallbackBody } from "../../src/providers/mpesa/wire.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { until } from "../support/wait.ts";

const NEVER_ANSWERS = "254700001019";
const PAYS = "0708374149";

/**
 * A checkout attempt's verdict is written together with what it does to its payment. A failed attempt below the
 * attempts limit goes with the release of the payment's claim: a payer whose page shows the failure can try again at
 * once, never into "a payment is in progress". A card's success goes with the payment's completion: a page never
 * reads a succeeded attempt on a payment still pending (it would offer the forms again). The payment's write is
 * held back here by a row lock on it (another session's SELECT ... FOR UPDATE), which shows whether the verdict
 * became visible before it.
 */
describe("a checkout attempt's verdict and its payment", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  const payer = () => apiClient(gw.url);

  beforeAll(async () => {
    gw = await startTestGateway({ env: { CHECKOUT_MAX_ATTEMPTS: "3", SANDBOX_STK_DELAY_MS: "100", RATE_LIMIT_ENABLED: "false" } });
    api = apiClient(gw.url, (await createSandboxMerchant(gw)).testKey);
  });
  afterAll(async () => {
    await expectCleanLedger(gw);
    await gw?.close();
  });

  /**
   * Another session holds the payment's row: `write` starts once it is held (when given), and `whileHeld` runs once a
   * write to the row waits for the lock; then the lock goes. Answers what `write` started.
   */
  async function holdingThePayment<T>(id: number, whileHeld: () => Promise<void>, write?: () => Promise<T>): Promise<T | undefined> {
    const locker = new pg.Client({ connectionString: gw.database.databaseUrl });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM transactions WHERE id = $1 FOR UPDATE", [id]);
      const written = write?.();
      await until(
        () => locker.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted AND a.datname = current_database()"),
        (r) => r.rows[0]!.n === 1,
      );
      await whileHeld();
      await locker.query("COMMIT");
      return await written;
    } finally {
      await locker.end();
    }
  }

  it("the payer sees the failure only once the payment can take another attempt", async () => {
    const init = await api.post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com" });
    expect(init.status, init.text).toBe(200);
    const reference: string = init.body.reference;
    const status = () => payer().get(`/payment/checkout/${reference}/status`);
    expect((await payer().post(`/payment/checkout/${reference}/mpesa`, { phone: NEVER_ANSWERS })).status).toBe(202);
    const prisma = gw.gateway.db.prisma;
    const { id } = await prisma.transaction.findUniqueOrThrow({ where: { reference } });
    const [push] = await prisma.transactionAttempt.findMany({ where: { transactionId: id } });
    const channel = await prisma.paymentChannel.findUniqueOrThrow({ where: { id: push!.channelId! } });
    const callbackPath = new URL(gw.gateway.services.callbackUrls.of(channel).collection!).pathname;

    // The payer cancels the prompt: M-Pesa's callback with ResultCode 1032. Its write waits for the row lock...
    const cancelled = buildStkCallbackBody({ merchantRequestId: "cancel-1", checkoutRequestId: push!.checkoutRequestId!, resultCode: 1032, resultDesc: "Request cancelled by user." });
    const delivered = await holdingThePayment(
      id,
      async () => {
        // ... and until it commits, neither the page nor the attempt's row shows the failure.
        expect((await status()).body).toMatchObject({ status: "pending", attempt: { method: "mpesa", status: "pending" } });
        expect((await prisma.transactionAttempt.findUniqueOrThrow({ where: { id: push!.id } })).status).toBe("pending");
      },
      () => payer().post(callbackPath, cancelled),
    );
    expect(delivered!.status).toBe(200);

    const failed = await until(status, (r) => r.body.attempt?.status === "failed");
    expect(failed.body).toMatchObject({ status: "pending", attempts_left: 2, attempt: { code: "1032", reason: "Request cancelled by user." } });
    expect((await prisma.transaction.findUniqueOrThrow({ where: { id } })).chargeStartedAt).toBeNull();
    // Straight away, another number: accepted, and it pays.
    expect((await payer().post(`/payment/checkout/${reference}/mpesa`, { phone: PAYS })).status).toBe(202);
    expect((await until(status, (r) => r.body.status !== "pending")).body.status).toBe("completed");
  });

  it("a card's success shows on the page only with the payment completed", async () => {
    // The sandbox charges this channel's cards in 3 s: time to take the lock once the claim is made.
    const channel = await api.post("/api/payment-channels/create", { name: "Slow", provider: "sandbox", config: { charge_delay_ms: 3000 } });
    expect(channel.status, channel.text).toBe(201);
    const init = await api.post("/api/transactions/initialize", { amount: 4100, email: "card@example.com", payment_channel_id: channel.body.channel.id });
    expect(init.status, init.text).toBe(200);
    const reference: string = init.body.reference;
    const status = () => payer().get(`/payment/checkout/${reference}/status`);
    const paid = payer().post(`/payment/checkout/${reference}/pay`, { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getFullYear() + 2, cvc: "408" });
    const { id } = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
    await until(status, (r) => r.body.attempt?.status === "pending");
    // The charge's answer comes while the payment's row is held: its verdict waits with the payment's completion.
    await holdingThePayment(id, async () => {
      expect((await status()).body).toMatchObject({ status: "pending", attempt: { method: "card", status: "pending" } });
    });
    expect((await paid).status).toBe(200);
    expect((await status()).body).toMatchObject({ status: "completed", attempt: { method: "card", status: "succeeded" } });
  });
});
