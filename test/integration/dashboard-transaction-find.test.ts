import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { confineToGateway, launchChromium, recordPageErrors } from "../support/browser.ts";
import { expectNoHorizontalScroll, expectNoSeriousAxeViolations } from "../support/checkout-page.ts";
import { apiClient, createSandboxMerchant, SANDBOX_CARD, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * Issue 41 in Chromium, at 1280 and 390 px: the transactions list shows the shop's own reference, the payer and how it
 * was paid (Visa •••• 4242, M-Pesa with its receipt); its one search box finds a payment by our reference, the shop's,
 * the receipt, the phone in any form or the e-mail in any case; the payment page shows the metadata, every attempt,
 * its refund's events with the webhook request bodies, and the deliveries, never the endpoint's secret. axe finds
 * nothing serious. Screenshots in /tmp/dashboard-shots.
 */
const SHOTS = "/tmp/dashboard-shots";

describe("dashboard: find a payment the way the shop knows it", () => {
  let gw: TestGateway;
  let browser: Browser;
  let receiver: WebhookReceiver;
  let owner: { email: string; password: string };
  let card = "";
  let stk = "";
  let receipt = "";
  let secret = "";
  const offHost: string[] = [];
  const browserErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    receiver = await startWebhookReceiver();
    gw = await startTestGateway({
      env: { SANDBOX_STK_DELAY_MS: "20", SANDBOX_REFUND_DELAY_MS: "50", JOB_POLL_INTERVAL_MS: "100", WEBHOOK_ALLOW_PRIVATE_URLS: "true", RATE_LIMIT_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3" },
    });
    const merchant = await createSandboxMerchant(gw, "Duka la Wanjiku");
    owner = await gw.createUser(merchant.id, "owner");
    const api = apiClient(gw.url, merchant.testKey);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/hooks` });
    expect(hook.status, hook.text).toBe(201);
    secret = hook.body.data.secret;

    // A declined card first, then one that pays: the payment page lists both attempts.
    const init = await api.post("/api/transactions/initialize", {
      amount: 250000,
      email: "Wanjiku@Example.com",
      reference: "ORDER-1001",
      description: "Two kikoi and a kiondo",
      metadata: { order_id: 1001, channel: "instagram" },
    });
    expect(init.status, init.text).toBe(200);
    card = init.body.reference;
    const declined = await apiClient(gw.url).post(`/payment/checkout/${card}/pay`, { ...SANDBOX_CARD, card_number: "4000000000000002" });
    expect(declined.status, declined.text).toBe(402);
    const charged = await apiClient(gw.url).post(`/payment/checkout/${card}/pay`, SANDBOX_CARD);
    expect(charged.status, charged.text).toBe(200);
    const refund = await api.post("/v1/refunds", { transaction: card, amount: 50000, reason: "requested_by_customer" });
    expect(refund.status, refund.text).toBe(201);
    const push = await api.post("/v1/collections/stk", { amount: 150000, phone_number: "0708374149", reference: "ORDER-1002", metadata: { order_id: 1002 } });
    expect(push.status, push.text).toBe(201);
    stk = push.body.data.reference;
    const paid = await until(() => api.get(`/api/transactions/verify/${stk}`), (r) => r.body.transaction.status === "completed");
    receipt = paid.body.transaction.provider_reference;
    // Some noise the search must leave out.
    for (const n of [1, 2, 3]) expect((await api.post("/api/transactions/initialize", { amount: 1000 * n, email: `other${n}@example.com` })).status).toBe(200);
    await until(() => api.get(`/v1/refunds?transaction=${card}`), (r) => r.body.data[0]?.status === "completed");
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    await receiver?.close();
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  async function signedIn(width: number): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, gw.url, offHost);
    recordPageErrors(page, browserErrors);
    await page.goto(`${gw.url}/dashboard/transactions`);
    await page.getByLabel("E-mail").fill(owner.email);
    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator(`tr[data-reference="${card}"]`).waitFor();
    return page;
  }

  const shownReferences = (page: Page) => page.locator("#transactions-rows tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-reference")));
  async function search(page: Page, term: string, expected: string[]) {
    await page.getByLabel("Search").fill(term);
    await page.getByLabel("Search").press("Enter");
    await expect.poll(() => shownReferences(page), { message: term }).toEqual(expected);
  }

  for (const width of [1280, 390]) {
    it(`lists who paid how, and the search box finds a payment by each thing the shop knows it by (${width} px)`, async () => {
      const page = await signedIn(width);
      const row = (reference: string) => page.locator(`tr[data-reference="${reference}"]`);
      const cardRow = (await row(card).innerText()).replace(/\s+/g, " ");
      expect(cardRow).toContain("ORDER-1001");
      expect(cardRow).toContain("Visa •••• 4242");
      expect(cardRow).toContain("wanjiku@example.com");
      const stkRow = (await row(stk).innerText()).replace(/\s+/g, " ");
      expect(stkRow).toContain("ORDER-1002");
      expect(stkRow).toContain(`M-Pesa ${receipt}`);
      expect(stkRow).toContain("254708374149");
      await page.screenshot({ path: `${SHOTS}/41-find-list-${width}.png`, fullPage: true });
      await expectNoSeriousAxeViolations(page, `transactions list at ${width} px`);
      await expectNoHorizontalScroll(page, width);

      await search(page, "ORDER-1001", [card]);
      await search(page, card, [card]);
      await search(page, "WANJIKU@example.COM", [card]);
      await search(page, receipt, [stk]);
      for (const phone of ["0708374149", "254708374149", "+254708374149"]) await search(page, phone, [stk]);
      await page.screenshot({ path: `${SHOTS}/41-find-search-${width}.png`, fullPage: true });
      await search(page, "ORDER-10", []);
      await page.locator("text=No transactions match these filters").waitFor();
      await page.context().close();
    });

    it(`the payment page shows metadata, attempts, the refund's events with webhook bodies and the deliveries, never a secret (${width} px)`, async () => {
      const page = await signedIn(width);
      await page.locator(`tr[data-reference="${card}"] a`).click();
      await page.getByRole("heading", { name: `Transaction ${card}` }).waitFor();
      const fields = (await page.textContent("#transaction-fields"))!;
      expect(fields).toContain("Visa •••• 4242");
      expect(fields).toContain("Two kikoi and a kiondo");
      expect(fields).toContain("ORDER-1001");
      expect(JSON.parse((await page.textContent("#transaction-metadata"))!)).toEqual({ order_id: 1001, channel: "instagram" });
      // Every attempt, oldest first: the declined card, then the one that paid.
      const attemptRows = page.locator("#transaction-attempts tbody tr");
      expect(await attemptRows.count()).toBe(2);
      const declinedAttempt = (await attemptRows.nth(0).innerText()).replace(/\s+/g, " ");
      expect(declinedAttempt).toContain("**** 0002");
      expect(declinedAttempt).toMatch(/failed/i);
      expect(declinedAttempt).toContain("(card_declined)");
      const paidAttempt = (await attemptRows.nth(1).innerText()).replace(/\s+/g, " ");
      expect(paidAttempt).toContain("**** 4242");
      expect(paidAttempt).toMatch(/succeeded/i);
      // Its own events and its refund's, each with the body the endpoint was sent.
      const events = page.locator("#transaction-events li");
      await expect.poll(() => events.allInnerTexts().then((texts) => texts.join("\n"))).toMatch(/transaction\.completed[\s\S]*refund\.completed/);
      const refundEvent = events.filter({ hasText: "refund.completed" });
      await refundEvent.locator("summary").click();
      const body = JSON.parse((await refundEvent.locator("pre").textContent())!);
      expect(body).toMatchObject({ type: "refund.completed", data: { transaction_reference: card, amount: 50000 } });
      // The deliveries of those events, with what the endpoint answered.
      await expect.poll(() => page.getByRole("region", { name: "Webhook deliveries" }).innerText()).toContain("refund.completed");
      const deliveries = page.getByRole("region", { name: "Webhook deliveries" });
      expect(await deliveries.innerText()).toContain("200");
      // A delivery's Details: the request as sent (its signature withheld) and the endpoint's answer.
      await deliveries.getByLabel(`Details of refund.completed to ${receiver.url}/hooks`).click();
      const details = deliveries.locator("details.delivery-details[open]");
      expect(await details.locator('[data-part="request-headers"]').textContent()).toContain("webhook-signature: (signed; not shown)");
      expect(JSON.parse((await details.locator('[data-part="request-body"]').textContent())!)).toMatchObject({
        type: "refund.completed",
        data: { transaction_reference: card, amount: 50000 },
      });
      expect(await details.textContent()).toContain("HTTP 200");
      expect(await details.locator('[data-part="response-body"]').textContent()).toBe("200");
      expect(await details.locator('[data-part="response-headers"]').textContent()).toContain("content-type: text/plain");
      expect(await page.content()).not.toContain(secret);
      expect(await page.content()).not.toContain("whsec_");
      await page.screenshot({ path: `${SHOTS}/41-find-detail-${width}.png`, fullPage: true });
      await page.locator("#transaction-attempts").screenshot({ path: `${SHOTS}/41-find-detail-attempts-${width}.png` });
      await expectNoSeriousAxeViolations(page, `payment page at ${width} px`);
      await expectNoHorizontalScroll(page, width);
      await page.context().close();
    });
  }
});
