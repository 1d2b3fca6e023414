import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import {
  expectNoHorizontalScroll,
  expectNoSeriousAxeViolations,
  initialize,
  payerBrowser,
  payByCard,
  payByMpesa,
  recorded,
  screenshot,
  type PayerBrowser,
} from "../support/checkout-page.ts";
import { apiClient, bearerClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { solidPng } from "../support/png.ts";

/**
 * Every state of the hosted checkout in Chromium at 360 px (issue 25): the form, a declined card with another try,
 * the attempts limit, waiting on the phone, success, expiry; each checked by axe and photographed for docs/card-payments.md;
 * and the merchant's brand on the checkout and the payment-link page.
 */
describe("hosted checkout page: states, retries, expiry, brand", () => {
  let gw: TestGateway;
  let browser: Browser;
  let payer: PayerBrowser;
  let key: string;
  let merchantId: number;

  beforeAll(async () => {
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3", SANDBOX_STK_DELAY_MS: "300" } })]);
    ({ testKey: key, id: merchantId } = await createSandboxMerchant(gw, "Mama Mboga Ltd"));
    payer = await payerBrowser(browser, gw, { width: 360 });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  /** Each state: accessible (axe), no wider than the phone, and its picture. */
  async function checkState(page: Page, state: string) {
    await expectNoSeriousAxeViolations(page, state);
    await expectNoHorizontalScroll(page, 360);
    await screenshot(page, state);
  }

  it("form, then a declined card keeps the form for another card, which pays: same link, two attempts recorded", async () => {
    const { path, reference } = await initialize(gw, key);
    const page = await payer.open(path);
    await checkState(page, "form");
    await payByCard(page, "4000 0000 0000 0002");
    await page.waitForSelector("#result.failed");
    expect(await page.textContent("#result")).toBe("That did not go through: Card declined by the issuer.");
    expect(await page.textContent("#attempts-left")).toBe("You can try 2 more time(s). Enter another card to try again.");
    expect(await page.isVisible("#pay")).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("card_number");
    await checkState(page, "declined");
    await payByCard(page, "4084 0840 8408 4081");
    await page.waitForSelector("#result.completed");
    await checkState(page, "success");
    expect(await recorded(gw, reference)).toMatchObject({
      status: "completed",
      attempts: [
        { method: "card", status: "failed", code: "card_declined" },
        { method: "card", status: "succeeded" },
      ],
    });
    await page.close();
  });

  it("the attempts limit: the third decline fails the payment with its reason, and the page's final state has no form", async () => {
    const { path, reference } = await initialize(gw, key);
    const page = await payer.open(path);
    for (const [card, left] of [["4000 0000 0000 0002", "2"], ["4000 0000 0000 0069", "1"]] as const) {
      await payByCard(page, card);
      await page.waitForFunction((n) => document.getElementById("attempts-left")?.textContent?.startsWith(`You can try ${n} more`), left);
    }
    await payByCard(page, "4000 0000 0000 9995");
    await page.waitForFunction(() => !document.getElementById("pay"));
    expect(await page.textContent("#result")).toBe("This payment did not go through: Insufficient funds.");
    expect(await page.getAttribute("#result", "class")).toBe("failed");
    await checkState(page, "failed");
    expect(await recorded(gw, reference)).toMatchObject({ status: "failed", failureCode: "insufficient_funds" });
    // Reloaded: the same final state, from the server.
    await page.reload();
    expect(await page.textContent("#result")).toBe("This payment did not go through: Insufficient funds.");
    expect(await page.locator("form").count()).toBe(0);
    await page.close();
  });

  it("waiting on the phone: the state is announced (role=status) and survives a reload", async () => {
    const { path } = await initialize(gw, key);
    const page = await payer.open(path);
    // The sandbox never answers this number: the push stays out.
    await payByMpesa(page, "254700001019");
    await page.waitForSelector("#waiting:not([hidden])");
    expect(await page.getAttribute("#result", "aria-live")).toBe("polite");
    await checkState(page, "waiting");
    await page.reload();
    expect(await page.isVisible("#waiting")).toBe(true);
    expect(await page.textContent("#result")).toContain("2547*****019");
    expect(await page.isVisible("#mpesa")).toBe(false);
    await page.close();
  });

  it("expiry: an unpaid payment past CHECKOUT_EXPIRY_MS fails as abandoned, and its page says it has expired, with no form", async () => {
    const { path, reference } = await initialize(gw, key);
    const page = await payer.open(path);
    // A day later (the default CHECKOUT_EXPIRY_MS), the sweep runs.
    await gw.gateway.db.prisma.transaction.update({ where: { reference }, data: { createdAt: new Date(Date.now() - 25 * 3_600_000) } });
    await gw.gateway.services.transactions.expireCheckouts();
    expect(await recorded(gw, reference)).toMatchObject({ status: "failed", failureCode: "abandoned" });
    await page.reload();
    expect(await page.textContent("#expired")).toBe("This payment has expired");
    expect(await page.textContent("#result")).toBe("The time to pay has passed. Ask Mama Mboga Ltd for a new payment link.");
    expect(await page.locator("form").count()).toBe(0);
    await checkState(page, "expired");
    // A payment attempted anyway is refused.
    expect((await apiClient(gw.url).post(`/payment/checkout/${reference}/mpesa`, { phone: "0708374149" })).status).toBe(409);
    await page.close();
  });

  it("the merchant's brand on the checkout and the payment-link page: name, logo with alt, accent, support e-mail", async () => {
    const api = apiClient(gw.url, key);
    // The brand is a signed-in owner's to change (issue 35).
    const owner = bearerClient(gw.url, await gw.signIn(merchantId, "owner"));
    const logo = await owner.raw("/v1/brand/logo", { method: "PUT", headers: { "content-type": "image/png" }, body: new Uint8Array(solidPng(96, 48, [0x1a, 0x56, 0xdb])) });
    expect(logo.status, logo.text).toBeLessThan(300);
    const update = await owner.post("/graphql", {
      query: `mutation($input: UpdateBrandInput!) { updateBrand(input: $input) { __typename ... on Brand { logoUrl } } }`,
      variables: { input: { displayName: "Mama Mboga", accentColor: "#1a56db", supportEmail: "help@mamamboga.example" } },
    });
    expect(update.body.data.updateBrand.__typename, JSON.stringify(update.body)).toBe("Brand");
    const link = await api.post("/v1/payment-links", { amount: 2500, description: "Sukuma wiki, 2 kg" });
    const { path } = await initialize(gw, key);
    for (const [target, state] of [[path, "brand"], [`/pay/${link.body.data.slug}`, "link-brand"]] as const) {
      const page = await payer.open(target);
      expect(await page.textContent(".merchant")).toBe("Mama Mboga");
      expect(await page.getAttribute("img.logo", "alt")).toBe("Mama Mboga logo");
      await page.waitForFunction(() => (document.querySelector("img.logo") as HTMLImageElement).naturalWidth === 96);
      expect(await page.getAttribute("#support", "href")).toBe("mailto:help@mamamboga.example");
      expect(await page.$eval("button[type=submit]", (b) => getComputedStyle(b).backgroundColor)).toBe("rgb(26, 86, 219)");
      await checkState(page, state);
      await page.close();
    }
    expect(payer.offHost).toEqual([]);
    expect(payer.errors).toEqual([]);
  });
});
