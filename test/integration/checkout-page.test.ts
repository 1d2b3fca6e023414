import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/** The payer's hosted checkout page in a real Chromium, against the running gateway. */
describe("hosted checkout page", () => {
  let gw: TestGateway;
  let browser: Browser;
  let api: ReturnType<typeof apiClient>;

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
    await page.goto(`${gw.url}${url.pathname}`);
    return { page, reference: init.body.reference as string };
  }

  async function fillCard(page: import("playwright-core").Page, number: string) {
    await page.fill('input[name="card_number"]', number);
    await page.fill('input[name="expiry_month"]', "12");
    await page.fill('input[name="expiry_year"]', String(new Date().getUTCFullYear() + 1));
    await page.fill('input[name="cvc"]', "408");
    await page.click('button[type="submit"]');
  }

  it("shows the merchant and amount, takes a test card, and completes the transaction", async () => {
    const { page, reference } = await openCheckout(150000);
    expect(await page.textContent(".merchant")).toBe("Mama Mboga Ltd");
    expect(await page.textContent("#amount")).toBe("KES 1,500.00");
    await fillCard(page, "4084 0840 8408 4081");
    await page.waitForSelector("#result.completed");
    expect(await page.textContent("#result")).toBe("Payment completed. Thank you.");
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction).toMatchObject({ status: "completed", payment_method: "card" });
    // Reloading a settled payment shows its state instead of the form.
    await page.reload();
    expect(await page.textContent("#result")).toBe("This payment is completed.");
    expect(await page.$("form#pay")).toBeNull();
    await page.close();
  });

  it("shows a declined card's reason and records the transaction as failed", async () => {
    const { page, reference } = await openCheckout(2500);
    await fillCard(page, "4000 0000 0000 0002");
    await page.waitForSelector("#result.failed");
    expect(await page.textContent("#result")).toBe("Card declined by the issuer");
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
    await page.click('button[type="submit"]');
    await page.waitForSelector("#result.completed");
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction.status).toBe("completed");
    await page.close();
  });
});
