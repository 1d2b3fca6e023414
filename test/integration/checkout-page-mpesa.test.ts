import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { firstWaiting, initialize, payerBrowser, payByMpesa, recordFirstWaiting, recorded, type PayerBrowser } from "../support/checkout-page.ts";
import { createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Paying by M-Pesa on the hosted checkout in Chromium (issue 25): the STK push from the page, the "check your phone"
 * state followed live (the page looks every 2 s, the sandbox answers after 0.5 s), the provider's reason with another
 * try. A push racing a card: checkout-page-race.test.ts.
 */
describe("hosted checkout page: M-Pesa", () => {
  let gw: TestGateway;
  let browser: Browser;
  let payer: PayerBrowser;
  let key: string;
  let merchantSite: Server;
  let site: string;

  beforeAll(async () => {
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3", SANDBOX_STK_DELAY_MS: "500" } })]);
    key = (await createSandboxMerchant(gw, "Mama Mboga Ltd")).testKey;
    payer = await payerBrowser(browser, gw);
    merchantSite = createServer((request, response) => response.end(`merchant page ${request.url}`));
    await new Promise<void>((resolve) => merchantSite.listen(0, "127.0.0.1", resolve));
    site = `http://127.0.0.1:${(merchantSite.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    merchantSite?.close();
    await browser?.close();
    await gw?.close();
  });

  it("offers M-Pesa first with the sandbox's numbers, shows 'check your phone' while the push is out, then pays and goes back to callback_url", async () => {
    const { path, reference } = await initialize(gw, key, { callback_url: `${site}/thanks` });
    // The merchant's site is another host: let the page go there (and only there).
    const page = await payer.context.newPage();
    await page.route("**/*", (route) => (route.request().url().startsWith(gw.url) || route.request().url().startsWith(site) ? route.continue() : route.abort()));
    await recordFirstWaiting(page);
    await page.goto(`${gw.url}${path}`);
    expect(await page.isChecked('#methods input[value="mpesa"]')).toBe(true);
    expect(await page.isVisible("#pay")).toBe(false);
    expect(await page.textContent("#phone-test-hint")).toContain("254708374149 pays");
    await payByMpesa(page, "0708 374 149");
    // Focus follows the payer to the new state (keyboard and screen-reader users).
    expect(await firstWaiting(page)).toEqual({
      title: "Check your phone",
      role: "status",
      result: "Enter your M-Pesa PIN on the prompt sent to 2547*****149 to pay KES 1,500.00. This page updates by itself.",
      focused: "waiting-title",
    });
    await page.waitForURL(`${site}/thanks?**`);
    expect(new URL(page.url()).searchParams.get("reference")).toBe(reference);
    expect(await recorded(gw, reference)).toMatchObject({ status: "completed", attempts: [{ method: "mpesa", status: "succeeded" }] });
    await page.close();
  });

  it("a cancelled push shows the reason and attempts left; 'Use another number' then pays, with no reload", async () => {
    const { path, reference } = await initialize(gw, key);
    const page = await payer.open(path);
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
    await payByMpesa(page, "254700001032");
    await page.waitForSelector("#result.failed");
    expect(await page.textContent("#result")).toBe("That did not go through: Request cancelled by user.");
    expect(await page.textContent("#attempts-left")).toBe("You can try 2 more time(s).");
    expect(await page.isVisible("#retry")).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("try-again");
    await page.click("#another-number");
    expect(await page.inputValue("#phone")).toBe("");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("phone");
    await page.keyboard.type("0708374149");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#result.completed");
    expect(await page.textContent("#result")).toBe("Payment completed. Thank you.");
    expect(await page.isVisible("#phone")).toBe(false);
    // The same document throughout: followed by polling, not reloads.
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
    expect(await recorded(gw, reference)).toMatchObject({
      status: "completed",
      attempts: [
        { method: "mpesa", status: "failed", code: "1032" },
        { method: "mpesa", status: "succeeded" },
      ],
    });
    await page.close();
  });

  it("timeouts: 'Try again' resends to the same number; the third failure is final, with the provider's reason and no form", async () => {
    const { path, reference } = await initialize(gw, key);
    const page = await payer.open(path);
    await payByMpesa(page, "+254 700 001 037");
    for (const left of ["You can try 2 more time(s).", "You can try 1 more time."]) {
      await page.waitForSelector("#retry:not([hidden])");
      expect(await page.textContent("#result")).toBe("That did not go through: DS timeout user cannot be reached.");
      expect(await page.textContent("#attempts-left")).toBe(left);
      await page.click("#try-again");
      await page.waitForSelector("#waiting:not([hidden])");
    }
    await page.waitForSelector("#result.failed:not(.pending)");
    await page.waitForFunction(() => !document.getElementById("phone"));
    expect(await page.textContent("#result")).toBe("This payment did not go through: DS timeout user cannot be reached.");
    expect(await page.locator("form").count()).toBe(0);
    const after = await recorded(gw, reference);
    expect(after).toMatchObject({ status: "failed", failureCode: "1037" });
    expect(after.attempts.map((a) => a.code)).toEqual(["1037", "1037", "1037"]);
    // Reloaded, the page says the same.
    await page.reload();
    expect(await page.textContent("#result")).toBe("This payment did not go through: DS timeout user cannot be reached.");
    await page.close();
    expect(payer.offHost).toEqual([]);
    expect(payer.errors).toEqual([]);
  });
});
