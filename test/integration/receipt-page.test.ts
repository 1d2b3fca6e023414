import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { launchChromium } from "../support/browser.ts";
import { expectNoHorizontalScroll, expectNoSeriousAxeViolations, initialize, payByCard, payerBrowser, type PayerBrowser } from "../support/checkout-page.ts";
import { bearerClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * The payer's proof of payment in Chromium (issue 38): after paying, the checkout's success page shows the reference,
 * the card, the date and "Back to <merchant>" (no callback_url), and links to the receipt page, which reads on a
 * 360 px phone, passes axe, and prints without its buttons. Pictures: src/modules/mail/screenshot-success-*.png
 * (UPDATE_SCREENSHOTS=1).
 */
const UpdateBrand = graphql(`
  mutation ReceiptPageBrand($input: UpdateBrandInput!) { updateBrand(input: $input) { __typename ... on Error { code message } } }
`);

const shot = (name: string) => (process.env.UPDATE_SCREENSHOTS === "1" ? `src/modules/mail/screenshot-${name}.png` : `/tmp/mail-screenshot-${name}.png`);

describe("success page and receipt page", () => {
  let gw: TestGateway;
  let browser: Browser;
  let payer: PayerBrowser;
  let key: string;

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    const merchant = await createSandboxMerchant(gw, "Mama Mboga Ltd");
    key = merchant.testKey;
    const owner = bearerClient(gw.url, await gw.signIn(merchant.id, "owner"));
    const res = await owner.graphql(UpdateBrand, { input: { website: "https://mamamboga.example", timezone: "Africa/Nairobi", supportEmail: "help@mamamboga.example" } });
    expect(res.body.data?.updateBrand.__typename, res.text).toBe("Brand");
    payer = await payerBrowser(browser, gw, { width: 360 });
  });
  afterAll(async () => {
    await payer?.close();
    await browser?.close();
    await gw?.close();
  });

  it("pays by card, shows the receipt's essentials and the way back, and opens a printable receipt", async () => {
    const { path, reference } = await initialize(gw, key, { amount: 250_000, reference: "ORDER-77" });
    const page = await payer.open(path);
    await payByCard(page, "4084084084084081");
    // The page comes again from the server once paid, with the essentials.
    await page.locator("#receipt").waitFor();
    expect(await page.textContent("#receipt-reference")).toBe(reference);
    expect(await page.textContent("#receipt-client-reference")).toBe("ORDER-77");
    expect(await page.textContent("#receipt-method")).toContain("4081");
    expect(await page.textContent("#receipt-date")).toContain("(Africa/Nairobi)");
    expect(await page.getAttribute("#back-to-shop", "href")).toBe("https://mamamboga.example/");
    await expectNoHorizontalScroll(page, 360);
    await expectNoSeriousAxeViolations(page, "success with receipt");
    await page.screenshot({ path: shot("success-receipt"), fullPage: true });

    await page.click("#receipt-link");
    await page.locator("#amount").waitFor();
    expect(await page.textContent("#amount")).toContain("KES 2,500.00");
    expect(await page.textContent("#reference")).toContain(reference);
    expect(await page.isVisible("#print")).toBe(true);
    await expectNoHorizontalScroll(page, 360);
    await expectNoSeriousAxeViolations(page, "receipt page");
    await page.emulateMedia({ media: "print" });
    expect(await page.isVisible("#print")).toBe(false);
    await page.emulateMedia({ media: "screen" });
    expect(payer.errors).toEqual([]);
    expect(payer.offHost).toEqual([]);
  });
});
