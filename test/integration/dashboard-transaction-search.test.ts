import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { confineToGateway, launchChromium } from "../support/browser.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The dashboard's transactions view in Chromium: the search box finds a payment by the provider's
 * receipt (the API's `search`), and the detail shows that receipt. Other hosts are blocked.
 */
describe("dashboard: transaction search and provider reference", () => {
  let gw: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { RATE_LIMIT_PER_MINUTE: "2000" } });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("finds a payment by its receipt and shows the receipt in its detail", async () => {
    const merchant = await createSandboxMerchant(gw, "Search Shop");
    const api = apiClient(gw.url, merchant.testKey);
    const references: string[] = [];
    for (const email of ["first@example.com", "second@example.com"]) {
      const init = await api.post("/api/transactions/initialize", { amount: 2500, email });
      expect(init.status, init.text).toBe(200);
      references.push(init.body.reference);
    }
    const paid = references[0]!;
    const card = { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 1, cvc: "408" };
    expect((await api.post(`/payment/checkout/${paid}/pay`, card)).status).toBe(200);
    const receipt = (await api.get(`/api/transactions/verify/${paid}`)).body.transaction.provider_reference as string;
    expect(receipt).toMatch(/^sbx_/);
    const owner = await gw.createUser(merchant.id, "owner");

    const context = await browser.newContext();
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    const offHost: string[] = [];
    await confineToGateway(page, gw.url, offHost);
    await page.goto(`${gw.url}/dashboard/transactions`);
    await page.getByLabel("E-mail").fill(owner.email);
    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    const row = (reference: string) => page.locator(`tr[data-reference="${reference}"]`);
    await row(references[1]!).waitFor();

    await page.getByLabel("Search").fill(receipt);
    await page.getByLabel("Search").press("Enter");
    await expect.poll(() => page.locator("#transactions-rows tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-reference")))).toEqual([paid]);

    await row(paid).locator("a").click();
    await page.getByRole("heading", { name: `Transaction ${paid}` }).waitFor();
    expect(await page.textContent("#transaction-fields")).toContain(`Provider reference${receipt}`);
    await context.close();
    expect(offHost).toEqual([]);
  });
});
