import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * One e-mail, a user at two merchants: the sign-in asks which merchant before any password is checked (issue 35,
 * item 2), and the dashboard's form then asks for the merchant's ID and signs in to that one.
 */
describe("dashboard sign-in for an e-mail at several merchants", () => {
  let gw: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("asks for the merchant's ID, then signs in to the merchant named", async () => {
    const first = await gw.createMerchant("First Shop");
    const second = await gw.createMerchant("Second Shop");
    const email = "both@shops.test";
    for (const merchant of [first, second]) {
      await gw.gateway.services.users.createUser({ merchantId: merchant.id, email, password: "the-same-long-password", role: "owner" });
    }
    const context = await browser.newContext();
    context.setDefaultTimeout(20_000);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(`${gw.url}/dashboard`);
    await page.getByLabel("E-mail").fill(email);
    await page.getByLabel("Password").fill("the-same-long-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("signs in to more than one merchant").waitFor();
    await page.getByLabel("Merchant ID").fill(String(second.id));
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#merchant-name", { hasText: "Second Shop" }).waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });
});
