import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withPaystack, type PaystackBench } from "../support/benches.ts";
import { launchChromium } from "../support/browser.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The payer's side of a paystack channel in a real Chromium: the gateway's checkout link sends the payer
 * to Paystack's page (the loopback fake's), and Paystack's redirect back shows the verified result.
 */
describe("hosted checkout on a paystack channel", () => {
  let browser: Browser;
  let { fake, gw, api } = {} as PaystackBench;

  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(() => browser?.close());
  // Paystack sends the payer back to PUBLIC_BASE_URL: the bench's gateway listens on the port it names.
  withPaystack({ merchant: "Accra Crafts", env: { JOBS_ENABLED: "false" } }, (bench) => {
    ({ fake, gw, api } = bench);
  });

  async function startPayment(amount: number) {
    const init = await api.post("/api/transactions/initialize", { amount, currency: "GHS", email: "payer@example.com", description: "Kente cloth" });
    expect(init.status, init.text).toBe(200);
    return { reference: init.body.reference as string, url: init.body.authorization_url as string };
  }

  it("sends the payer to Paystack's page, and after paying shows the completed payment back on the gateway", async () => {
    const { reference, url } = await startPayment(125000);
    const page = await browser.newPage();
    await page.goto(url);
    // On Paystack's page now, for this payment.
    expect(page.url()).toBe(`${fake.url}/checkout/${fake.transactions.get(reference)!.access_code}`);
    await page.click("button#pay");
    await page.waitForURL((u) => u.pathname === `/payment/checkout/${reference}/return`);
    expect(await page.textContent("#result")).toBe("Payment completed. Thank you.");
    expect(await page.textContent("#amount")).toBe("GHS 1,250.00");
    const verified = await api.get(`/api/transactions/verify/${reference}`);
    expect(verified.body.status).toBe("completed");
    await page.close();
  });

  it("shows a declined payment as failed after the payer comes back", async () => {
    const { reference, url } = await startPayment(5000);
    const page = await browser.newPage();
    await page.goto(url);
    await page.click("button#decline");
    await page.waitForURL((u) => u.pathname === `/payment/checkout/${reference}/return`);
    expect(await page.textContent("#result")).toBe("This payment did not go through: Declined.");
    expect((await api.get(`/api/transactions/verify/${reference}`)).body.status).toBe("failed");
    await page.close();
  });

  it("a payer who comes back before Paystack settles sees that it is being confirmed, and the page updates by itself", async () => {
    fake.switches.chargeWebhooks = false;
    try {
      const { reference } = await startPayment(7000);
      const page = await browser.newPage();
      await page.goto(`${gw.url}/payment/checkout/${reference}/return?trxref=${reference}&reference=${reference}`);
      expect(await page.textContent("#result")).toBe("We are confirming your payment. This page updates by itself.");
      await fake.pay(reference);
      // The page refreshes itself (every 5 s) and verifies again.
      await page.waitForFunction(() => document.querySelector("#result")?.textContent === "Payment completed. Thank you.", undefined, { timeout: BROWSER_MS });
      await page.close();
    } finally {
      fake.switches.chargeWebhooks = true;
    }
  });
});
