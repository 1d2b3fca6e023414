import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { CARD_CHARGE_LEASE_MS } from "../../src/modules/transactions/service.ts";
import { launchChromium } from "../support/browser.ts";
import { apiClient, startTestGateway, type HttpResult, type TestGateway } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "408" });
const SUCCESS = card("4084084084084081");
const DECLINED = card("4000000000000002");
const UNAVAILABLE = card("4000000000005035");

const IN_PROGRESS = { status: "error", code: "conflict", message: "A payment for this transaction is in progress" };
const inProgressOrSettled = (status: string) => [IN_PROGRESS, { status: "error", code: "conflict", message: `Transaction is already ${status}` }];

/**
 * A checkout card payment claims its transaction before the charge: concurrent submissions get a 409,
 * never a second charge, and each caller is told its own outcome. Charges are counted from the
 * gateway's own log line ("card charge sent", written right before the connector is called).
 */
describe("checkout payment claim", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  const logLines: string[] = [];

  beforeAll(async () => {
    gw = await startTestGateway({
      env: { RATE_LIMIT_ENABLED: "false" },
      logger: createLogger("info", { write: (line: string) => void logLines.push(line) }),
    });
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    // A real card charge takes a moment; the sandbox's simulated latency is the window the racers overlap in (long
    // enough that 50 requests all arrive within it on a loaded machine: 150 ms was not, once they got faster).
    const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: { charge_delay_ms: 1000 } });
    expect(channel.status, channel.text).toBe(201);
  });
  afterAll(() => gw?.close());

  const prisma = () => gw.gateway.db.prisma;
  const pay = (reference: string, body: unknown) => apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, body);
  const chargesOf = (reference: string) =>
    logLines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === "card charge sent" && entry.reference === reference).length;

  async function newTransaction(amount = 2500) {
    const init = await api.post("/api/transactions/initialize", { amount, email: "payer@example.com" });
    expect(init.status, init.text).toBe(200);
    const row = await prisma().transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
    return { reference: init.body.reference as string, id: row.id };
  }

  const eventTypes = async (transactionId: number) =>
    (await prisma().event.findMany({ where: { transactionId }, orderBy: { id: "asc" } })).map((e) => e.type);

  const byStatus = (answers: HttpResult[]) => {
    const counts: Record<number, number> = {};
    for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
    return counts;
  };

  it("50 concurrent payments with a valid card: one charge, one success, 49 x 409 envelopes, one completed event", async () => {
    const { reference, id } = await newTransaction();
    const answers = await Promise.all(Array.from({ length: 50 }, () => pay(reference, SUCCESS)));
    expect(byStatus(answers)).toEqual({ 200: 1, 409: 49 });
    const winner = answers.find((a) => a.status === 200)!;
    expect(winner.body).toEqual({
      status: "success",
      message: "Payment completed",
      transaction: { reference, amount: 2500, currency: "KES", status: "completed" },
    });
    for (const loser of answers.filter((a) => a.status === 409)) expect(inProgressOrSettled("completed")).toContainEqual(loser.body);
    // The racers really overlapped the charge (not merely arrived after it settled).
    expect(answers.filter((a) => a.body?.message === IN_PROGRESS.message).length).toBeGreaterThan(0);
    expect(chargesOf(reference)).toBe(1);
    expect(await eventTypes(id)).toEqual(["transaction.completed"]);
    const row = await prisma().transaction.findUniqueOrThrow({ where: { id } });
    expect(row).toMatchObject({ status: "completed", paymentMethod: "card" });
    expect(row.providerReference).toMatch(/^sbx_/);
  });

  it("50 concurrent payments with a declined card: one 402 decline, the rest 409, nobody told \"Payment completed\"", async () => {
    const { reference, id } = await newTransaction();
    const answers = await Promise.all(Array.from({ length: 50 }, () => pay(reference, DECLINED)));
    expect(byStatus(answers)).toEqual({ 402: 1, 409: 49 });
    expect(answers.find((a) => a.status === 402)!.body).toEqual({ status: "error", code: "payment_declined", message: "Card declined by the issuer" });
    for (const loser of answers.filter((a) => a.status === 409)) expect(inProgressOrSettled("failed")).toContainEqual(loser.body);
    expect(answers.filter((a) => a.body?.message === IN_PROGRESS.message).length).toBeGreaterThan(0);
    expect(answers.some((a) => a.text.includes("Payment completed"))).toBe(false);
    expect(chargesOf(reference)).toBe(1);
    expect(await eventTypes(id)).toEqual(["transaction.failed"]);
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "failed", failureCode: "card_declined" });
  });

  it("mixed cards racing: the one charged caller is told its own card's outcome, which is the recorded one", async () => {
    for (let round = 0; round < 4; round++) {
      const { reference, id } = await newTransaction();
      const cards = Array.from({ length: 50 }, (_, i) => (i % 2 ? DECLINED : SUCCESS));
      const answers = await Promise.all(cards.map((c) => pay(reference, c)));
      const charged = answers.map((a, i) => ({ a, c: cards[i] })).filter(({ a }) => a.status !== 409);
      expect(charged).toHaveLength(1);
      const row = await prisma().transaction.findUniqueOrThrow({ where: { id } });
      if (charged[0]!.c === SUCCESS) {
        expect(charged[0]!.a.status).toBe(200);
        expect(row.status).toBe("completed");
      } else {
        expect(charged[0]!.a.body).toEqual({ status: "error", code: "payment_declined", message: "Card declined by the issuer" });
        expect(row.status).toBe("failed");
      }
      for (const a of answers.filter((x) => x.status === 409)) expect(inProgressOrSettled(row.status)).toContainEqual(a.body);
      expect(chargesOf(reference)).toBe(1);
      expect(await eventTypes(id)).toEqual([`transaction.${row.status}`]);
    }
  });

  it("a provider failure answers 503 and releases the claim, so a retry can pay", async () => {
    const { reference, id } = await newTransaction();
    const failed = await pay(reference, UNAVAILABLE);
    expect(failed.status).toBe(503);
    expect(failed.body).toEqual({ status: "error", code: "provider_unavailable", message: "The sandbox card processor is unavailable (test card)" });
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "pending", chargeStartedAt: null });
    // As if never tried: its attempt went with the claim (one statement), so the page counts no failed try.
    expect(await prisma().transactionAttempt.count({ where: { transactionId: id } })).toBe(0);
    expect(await eventTypes(id)).toEqual([]);

    const retry = await pay(reference, SUCCESS);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body.message).toBe("Payment completed");
    expect(chargesOf(reference)).toBe(2);
    expect(await eventTypes(id)).toEqual(["transaction.completed"]);
  });

  it("a claim held by another attempt is a 409 with no charge; a claim older than the lease is taken over", async () => {
    const { reference, id } = await newTransaction();
    // Another instance is mid-charge: its claim is a few seconds old.
    await prisma().transaction.update({ where: { id }, data: { chargeStartedAt: new Date(Date.now() - 5_000) } });
    const refused = await pay(reference, SUCCESS);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual(IN_PROGRESS);
    // Bad input is still a 400 naming the field, and takes no claim.
    const invalid = await pay(reference, { ...SUCCESS, cvc: "x" });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ status: "error", code: "validation_failed", message: "cvc: must be 3 or 4 digits" });
    expect(chargesOf(reference)).toBe(0);
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id } })).status).toBe("pending");

    // That instance crashed: once its lease has lapsed the payer can pay.
    await prisma().transaction.update({ where: { id }, data: { chargeStartedAt: new Date(Date.now() - CARD_CHARGE_LEASE_MS - 1_000) } });
    const paid = await pay(reference, SUCCESS);
    expect(paid.status, paid.text).toBe(200);
    expect(chargesOf(reference)).toBe(1);
    expect(await eventTypes(id)).toEqual(["transaction.completed"]);

    // Settled is final: the existing conflict, whatever the claim says.
    const after = await pay(reference, SUCCESS);
    expect(after.body).toEqual({ status: "error", code: "conflict", message: "Transaction is already completed" });
    expect(chargesOf(reference)).toBe(1);
  });

  it("refuses a sandbox charge_delay_ms outside 0..10000 with a 400 naming the field", async () => {
    for (const value of [-1, 10_001, 1.5, "100"]) {
      const res = await api.post("/api/payment-channels/create", { name: "Slow", provider: "sandbox", config: { charge_delay_ms: value } });
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message).toMatch(/charge_delay_ms/);
    }
  });

  describe("on the hosted page", () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(() => browser?.close());

    it("shows the in-progress 409 and refreshes to the payment's result", async () => {
      const { reference, id } = await newTransaction(150000);
      const page = await browser.newPage();
      try {
        await page.goto(`${gw.url}/payment/checkout/${reference}`);
        await prisma().transaction.update({ where: { id }, data: { chargeStartedAt: new Date() } });
        if (await page.isVisible("#methods")) await page.check('#methods input[value="card"]'); // M-Pesa is offered first for KES
        await page.fill('input[name="card_number"]', "4242424242424242");
        await page.fill('input[name="expiry_month"]', "12");
        await page.fill('input[name="expiry_year"]', String(new Date().getUTCFullYear() + 1));
        await page.fill('input[name="cvc"]', "123");
        await page.click('#pay button[type="submit"]');
        await page.waitForSelector("#result.pending");
        expect(await page.textContent("#result")).toBe("A payment for this transaction is in progress. This page will refresh shortly.");
        // The form is put away (not removed: if the other attempt fails, this payer may try again).
        expect(await page.isVisible("form#pay")).toBe(false);

        // The other attempt finishes (its claim lapses here and a payment settles it); the refresh shows it.
        await prisma().transaction.update({ where: { id }, data: { chargeStartedAt: null } });
        expect((await pay(reference, SUCCESS)).status).toBe(200);
        await page.waitForSelector("#result.completed", { timeout: BROWSER_MS });
        expect(await page.textContent("#result")).toBe("Payment completed. Thank you.");
        expect(chargesOf(reference)).toBe(1);
      } finally {
        await page.close();
      }
    });
  });
});
