import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, signedInLive, openSection } from "../support/browser.ts";
import { apiClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { until } from "../support/wait.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * Refunds in the dashboard, in a real Chromium against the running gateway: an owner refunds part of a paid
 * sandbox payment from its page and watches the refund go from pending to completed (refundEvents), the list
 * badges the payment "Partially refunded", a refusal says what remains in the page's units, a refund of the
 * refund-failing test card shows failed with its reason, and a viewer gets no Refund action. Other hosts are
 * blocked and recorded.
 */
const SHOTS = "/tmp/dashboard-shots";
const PAYS = "4084084084084081";
const REFUNDS_FAIL = "4000000000005126";

describe("dashboard refunds", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let api: ReturnType<typeof apiClient>;
  let owner: { email: string; password: string };
  const offHost: string[] = [];
  const browserErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    // Refunds settle 800 ms after they are made: long enough to see one pending, short for the test.
    gw = await startTestGateway({ env: { SANDBOX_REFUND_DELAY_MS: "800", JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_PER_MINUTE: "2000" } });
    merchant = await createSandboxMerchant(gw, "Duka la Mama");
    api = apiClient(gw.url, merchant.testKey);
    owner = await gw.createUser(merchant.id, "owner");
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  // Signed in from the transactions page, the app stays on it (the landing page is the Overview).
  const signedIn = (user: { email: string; password: string }) => signedInLive(browser, gw.url, user, "/transactions", { offHost, errors: browserErrors });

  const paid = (amount: number, card = PAYS) =>
    paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount, description: "Kikapu" }, { ...SANDBOX_CARD, card_number: card });

  const refundRows = (page: Page) => page.locator("#transaction-refunds tr");
  const refund = (page: Page, status: string) => page.locator(`#transaction-refunds tr[data-status="${status}"]`);
  const listRow = (page: Page, reference: string) => page.locator(`#transactions-rows tr[data-reference="${reference}"]`);

  it("an owner refunds part of a payment from its page: pending, then completed, and the list says Partially refunded", async () => {
    const reference = await paid(10_000);
    const page = await signedIn(owner);
    await listRow(page, reference).locator("a").click();
    await page.getByRole("heading", { name: `Transaction ${reference}` }).waitFor();
    expect(await refundRows(page).count()).toBe(0);

    // The form opens on the amount, prefilled with all that remains, in major units.
    await page.getByRole("button", { name: "Refund", exact: true }).click();
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("refund-amount");
    expect(await page.getByLabel("Amount (KES)").inputValue()).toBe("100.00");
    expect(await page.locator("#refund-form").textContent()).toContain("KES 100.00 can be refunded");

    // More than was paid: the API's refusal, saying what remains as the page shows amounts.
    await page.getByLabel("Amount (KES)").fill("150");
    await page.locator("#refund-form").getByRole("button", { name: "Refund" }).click();
    await expect.poll(() => page.locator("#refund-form [role=alert]").textContent()).toBe(
      "At most KES 100.00 can still be refunded on this transaction (refunds still pending count too).",
    );
    await page.screenshot({ path: `${SHOTS}/22-refund-form-refused.png`, fullPage: true });
    // Not an amount at all: said before anything is sent.
    await page.getByLabel("Amount (KES)").fill("12.345");
    await page.locator("#refund-form").getByRole("button", { name: "Refund" }).click();
    await expect.poll(() => page.locator("#refund-form [role=alert]").textContent()).toBe("Amount: enter it in KES, e.g. 100.00");

    await page.getByLabel("Amount (KES)").fill("25.50");
    await page.getByLabel("Reason (optional)").selectOption("requested_by_customer");
    await page.getByLabel("Internal note (optional)").fill("Two mangoes were bruised");
    await page.getByLabel("Note to customer (optional)").fill("Sorry about the mangoes");
    await page.locator("#refund-form").getByRole("button", { name: "Refund" }).click();

    // Listed pending at once, then completed when refund.completed arrives, without a reload.
    const pending = refund(page, "pending");
    await pending.waitFor();
    expect(await page.locator("#refund-form").count()).toBe(0);
    expect(await pending.locator('[data-label="Amount"]').textContent()).toBe("KES 25.50");
    expect(await pending.locator('[data-label="Status"] .badge').textContent()).toBe("Pending");
    const refundReference = (await pending.getAttribute("data-reference"))!;
    expect(refundReference).toMatch(/^re_/);
    const row = page.locator(`#transaction-refunds tr[data-reference="${refundReference}"]`);
    await refund(page, "completed").waitFor({ timeout: BROWSER_MS });
    expect(await refundRows(page).count()).toBe(1);
    expect(await row.locator('[data-label="Status"] .badge').textContent()).toBe("Completed");
    expect(await row.locator('[data-label="Reason"]').textContent()).toBe("Requested by customerTwo mangoes were bruised · To the customer: Sorry about the mangoes");
    await expect.poll(() => page.textContent("#live-region")).toContain(`Refund ${refundReference} of KES 25.50 on payment ${reference} completed`);
    // The payment stays completed, with what was refunded beside it.
    const fields = page.locator("#transaction-fields");
    await fields.getByText("Partially refunded").waitFor();
    expect(await fields.textContent()).toContain("RefundedKES 25.50 Partially refunded");
    expect(await fields.textContent()).toContain("StatusCompleted");
    // What the gateway holds is what the page shows.
    const stored = await api.get(`/v1/refunds/${refundReference}`);
    expect(stored.body.data).toMatchObject({
      transaction_reference: reference,
      amount: 2550,
      status: "completed",
      reason: "requested_by_customer",
      merchant_note: "Two mangoes were bruised",
      customer_note: "Sorry about the mangoes",
    });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: `${SHOTS}/20-transaction-refunded.png`, fullPage: true });
    // On a phone the refunds stack as cards, with no sideways scrolling.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
    await page.screenshot({ path: `${SHOTS}/23-phone-transaction-refunded.png`, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    // Refund again: what remains now is prefilled.
    await page.getByRole("button", { name: "Refund", exact: true }).click();
    expect(await page.getByLabel("Amount (KES)").inputValue()).toBe("74.50");
    await page.getByRole("button", { name: "Cancel" }).click();

    await page.getByRole("link", { name: "← All transactions" }).click();
    await listRow(page, reference).locator(".badge", { hasText: "Partially refunded" }).waitFor();
    expect(await listRow(page, reference).locator('[data-label="Status"]').textContent()).toBe("Completed Partially refunded");

    // A refund made elsewhere (the API) while the list is open: its badge follows live.
    const other = await paid(5_000);
    await listRow(page, other).locator(".badge", { hasText: "Completed" }).waitFor();
    expect((await api.post("/v1/refunds", { transaction: other })).status).toBe(201);
    await listRow(page, other).locator(".badge", { hasText: /^Refunded$/ }).waitFor({ timeout: BROWSER_MS });
    await page.screenshot({ path: `${SHOTS}/21-transactions-refund-badges.png`, fullPage: true });
    await page.context().close();
  });

  it("a refund of the refund-failing test card shows failed with its reason, and the amount can be refunded again", async () => {
    const reference = await paid(3_000, REFUNDS_FAIL);
    const page = await signedIn(owner);
    await page.goto(`${gw.url}/dashboard/transactions/${reference}`);
    await page.getByRole("button", { name: "Refund", exact: true }).click();
    await page.locator("#refund-form").getByRole("button", { name: "Refund" }).click();
    const row = refund(page, "failed");
    await row.waitFor({ timeout: BROWSER_MS });
    expect(await row.locator('[data-label="Status"]').textContent()).toBe("FailedThe sandbox fails every refund of this test payment (refund_failed)");
    expect(await page.textContent("#transaction-fields")).not.toContain("Refunded");
    // A failed refund gives its amount back: the action is offered again, for all of it.
    await page.getByRole("button", { name: "Refund", exact: true }).click();
    expect(await page.getByLabel("Amount (KES)").inputValue()).toBe("30.00");
    await page.context().close();
  });

  it("a viewer sees the refunds but no Refund action; a developer in test mode has it", async () => {
    const reference = await paid(2_000);
    expect((await api.post("/v1/refunds", { transaction: reference, amount: 500 })).status).toBe(201);
    await until(() => api.get(`/api/transactions/verify/${reference}`), (r) => r.body.transaction.amount_refunded === 500);

    const viewer = await signedIn(await gw.createUser(merchant.id, "viewer"));
    await viewer.goto(`${gw.url}/dashboard/transactions/${reference}`);
    await refundRows(viewer).first().waitFor();
    expect(await viewer.getByRole("button", { name: "Refund", exact: true }).count()).toBe(0);
    expect(await viewer.locator("main button").count()).toBe(0);
    await viewer.context().close();

    const developer = await signedIn(await gw.createUser(merchant.id, "developer"));
    await developer.goto(`${gw.url}/dashboard/transactions/${reference}`);
    await developer.getByRole("button", { name: "Refund", exact: true }).click();
    expect(await developer.getByLabel("Amount (KES)").inputValue()).toBe("15.00");
    await developer.context().close();
  });

  it("offers refund events in the webhook endpoint form", async () => {
    const page = await signedIn(owner);
    await openSection(page, "Webhooks");
    await page.getByRole("button", { name: "New endpoint" }).click();
    const offered = await page.locator('input[name="events"]').evaluateAll((boxes) => boxes.map((box) => (box as HTMLInputElement).value));
    expect(offered).toEqual(["transaction.pending", "transaction.completed", "transaction.failed", "payout.completed", "payout.failed", "refund.completed", "refund.failed",
      "dispute.created", "dispute.updated", "dispute.closed",
      "subscription.created", "subscription.updated", "subscription.canceled", "invoice.created", "invoice.paid", "invoice.payment_failed"]);
    await page.context().close();
  });
});
