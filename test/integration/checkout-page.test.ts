import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

/** The payer's hosted checkout page in a real Chromium, against the running gateway. */
describe("hosted checkout page", () => {
  let gw: TestGateway;
  let browser: Browser;
  let api: ReturnType<typeof apiClient>;
  /** Requests the last opened checkout page made to any host but the gateway. */
  let elsewhere: string[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway();
    const merchant = await gw.createMerchant("Mama Mboga Ltd");
    api = apiClient(gw.url, merchant.testKey);
    await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  async function openCheckout(amount: number) {
    const init = await api.post("/api/transactions/initialize", { amount, email: "payer@example.com", description: "Order 42" });
    expect(init.status).toBe(200);
    // PUBLIC_BASE_URL defaults to localhost:PORT; the test server listens on an ephemeral port.
    const url = new URL(init.body.authorization_url);
    const page = await browser.newPage();
    // The page must need nothing but the gateway (no CDN, no web fonts): every other host is blocked and recorded.
    const origin = new URL(gw.url).origin;
    elsewhere = [];
    page.on("request", (request) => {
      const target = request.url();
      if (!target.startsWith(origin) && !target.startsWith("data:")) elsewhere.push(target);
    });
    await page.route("**/*", (route) => (route.request().url().startsWith(origin) ? route.continue() : route.abort()));
    await page.goto(`${gw.url}${url.pathname}`);
    return { page, reference: init.body.reference as string };
  }

  async function fillCard(page: import("playwright-core").Page, number: string) {
    // Where M-Pesa is offered (KES in whole shillings) it comes first (issue 25): these payers choose the card.
    if (await page.isVisible("#methods")) await page.check('#methods input[value="card"]');
    await page.fill('input[name="card_number"]', number);
    await page.fill('input[name="expiry_month"]', "12");
    await page.fill('input[name="expiry_year"]', String(new Date().getUTCFullYear() + 1));
    await page.fill('input[name="cvc"]', "408");
    await page.click('#pay button[type="submit"]');
  }

  it("shows the merchant and amount, takes a test card, and completes the transaction", async () => {
    const { page, reference } = await openCheckout(150000);
    expect(await page.textContent(".merchant")).toBe("Mama Mboga Ltd");
    expect(await page.textContent("#amount")).toBe("KES 1,500.00");
    mkdirSync("/tmp/checkout-shots", { recursive: true });
    await page.screenshot({ path: "/tmp/checkout-shots/checkout.png", fullPage: true });
    await fillCard(page, "4084 0840 8408 4081");
    await page.waitForSelector("#result.completed");
    expect(await page.textContent("#result")).toBe("Payment completed. Thank you.");
    expect(elsewhere).toEqual([]);
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "completed", payment_method: "card" });
    // Reloading a settled payment shows its state instead of the form.
    await page.reload();
    expect(await page.textContent("#result")).toBe("Payment completed. Thank you.");
    expect(await page.$("form#pay")).toBeNull();
    await page.close();
  });

  it("shows a declined card's reason and records the transaction as failed", async () => {
    const { page, reference } = await openCheckout(2500);
    await fillCard(page, "4000 0000 0000 0002");
    await page.waitForSelector("#result.failed");
    // One attempt (the test gateway's CHECKOUT_MAX_ATTEMPTS=1): the decline is the payment's final state.
    expect(await page.textContent("#result")).toBe("This payment did not go through: Card declined by the issuer.");
    expect(await page.locator("form").count()).toBe(0);
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction.status).toBe("failed");
    await page.close();
  });

  it("shows an invalid card number's error and lets the payer correct it", async () => {
    const { page, reference } = await openCheckout(990);
    await fillCard(page, "1234 5678 9012 3456");
    await page.waitForSelector("#result.failed");
    expect(await page.textContent("#result")).toBe("card_number: is not a valid card number");
    await page.fill('input[name="card_number"]', "4242424242424242");
    await page.click('#pay button[type="submit"]');
    await page.waitForSelector("#result.completed");
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction.status).toBe("completed");
    await page.close();
  });

  it("in test mode: a ribbon says no real money moves, and the sandbox's test cards are listed", async () => {
    const { page } = await openCheckout(1000);
    expect(await page.textContent(".test-ribbon")).toBe("Test mode: no real money moves");
    expect(await page.textContent("#card-hint")).toContain("4084 0840 8408 4081 succeeds");
    await page.close();
  });

  it("a declined payment's verify carries failure_code and failure_reason; the page reloads with the reason", async () => {
    const { page, reference } = await openCheckout(1200);
    await fillCard(page, "4000 0000 0000 9995");
    await page.waitForSelector("#result.failed");
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "failed", failure_code: "insufficient_funds", failure_reason: "Insufficient funds" });
    await page.reload();
    expect(await page.textContent("#result")).toBe("This payment did not go through: Insufficient funds.");
    const paid = await openCheckout(1300);
    await fillCard(paid.page, "4084 0840 8408 4081");
    await paid.page.waitForSelector("#result.completed");
    const ok = await api.get(`/api/transactions/verify/${paid.reference}`);
    expect(ok.body.transaction).toMatchObject({ status: "completed", failure_code: null, failure_reason: null });
    await page.close();
    await paid.page.close();
  });

  it("callback_url: after paying the payer is sent to the merchant's page with trxref and reference; the result page links back", async () => {
    const merchantSite = createServer((request, response) => response.end(`merchant page ${request.url}`));
    await new Promise<void>((resolve) => merchantSite.listen(0, "127.0.0.1", resolve));
    const site = `http://127.0.0.1:${(merchantSite.address() as AddressInfo).port}`;
    try {
      const init = await api.post("/api/transactions/initialize", { amount: 4200, email: "payer@example.com", callback_url: `${site}/thanks?order=42` });
      expect(init.status, init.text).toBe(200);
      const reference = init.body.reference as string;
      const page = await browser.newPage();
      await page.goto(`${gw.url}${new URL(init.body.authorization_url).pathname}`);
      await fillCard(page, "4084 0840 8408 4081");
      await page.waitForURL(`${site}/thanks?**`, { timeout: BROWSER_MS });
      const landed = new URL(page.url());
      expect(Object.fromEntries(landed.searchParams)).toEqual({ order: "42", trxref: reference, reference });
      // Coming back to the checkout link shows the outcome and the way back.
      await page.goto(`${gw.url}/payment/checkout/${reference}`);
      expect(await page.getAttribute("#return", "href")).toBe(`${site}/thanks?order=42&trxref=${reference}&reference=${reference}`);
      expect(await page.textContent("#return")).toBe("Return to Mama Mboga Ltd");
      await page.close();
    } finally {
      merchantSite.close();
    }
  });

  it("callback_url must be an absolute http(s) URL: 400 naming it, and nothing created", async () => {
    for (const callback_url of ["javascript:alert(1)", "/relative", "ftp://example.com/x", "https://user:pw@example.com/", `https://example.com/${"x".repeat(2100)}`]) {
      const res = await api.post("/api/transactions/initialize", { amount: 100, email: "payer@example.com", callback_url });
      expect(res.status, callback_url).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message).toMatch(/^callback_url: /);
    }
  });
});
