import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MailBrand, PaymentFacts } from "../../src/modules/mail/content.ts";
import { renderReceiptPage } from "../../src/modules/mail/receipt-page.ts";
import { renderPayerMail } from "../../src/modules/mail/templates.ts";
import { launchChromium, recordPageErrors } from "../support/browser.ts";
import { BROWSER_MS } from "../support/timing.ts";
import { solidPng } from "../support/png.ts";

/**
 * The receipt e-mail and the public receipt page in Chromium: a 360 px phone without sideways scrolling, and the page
 * printed on A4 (one sheet, no buttons). The pictures are the module's own (src/modules/mail/screenshot-*.png),
 * rewritten only when asked (UPDATE_SCREENSHOTS=1), so a test run leaves the tree clean.
 */

const brand: MailBrand = { name: "Mama Mboga Groceries", accentColor: "#1a56db", supportEmail: "msaada@mamamboga.example", website: "https://mamamboga.example", logoSrc: "cid:logo" };
const payment: PaymentFacts = {
  mode: "test",
  amount: 1234550n,
  currency: "KES",
  paidAt: new Date("2026-11-28T22:30:00Z"),
  timezone: "Africa/Nairobi",
  reference: "T_01JDZ8Q4M3X9V7K2RB6N5C8WYF",
  clientReference: "ORDER-2026-000123-NAIROBI-WESTLANDS",
  method: { kind: "mpesa", receiptCode: "QKT7ABC123", phone: "254712345149" },
  description: "Weekly delivery: 2 bags of maize flour, 5 kg of sukuma wiki, tomatoes and onions",
  amountRefunded: 250000n,
  receiptUrl: "https://pay.example/receipts/0123456789abcdef0123456789abcdef",
};
const refunds = [
  { reference: "R_01JE0A1B2C3D4E5F6G7H8J9K0M", amount: 150000n, refundedAt: new Date("2026-11-29T07:05:00Z") },
  { reference: "R_01JE0B9Z8Y7X6W5V4T3S2R1Q0P", amount: 100000n, refundedAt: new Date("2026-11-30T21:40:00Z") },
];

/** The logo as the harness's own data: URL (the templates emit only cid: or a same-origin path). */
const logo = `data:image/png;base64,${solidPng(96, 48, [26, 86, 219]).toString("base64")}`;

const shot = (name: string) => (process.env.UPDATE_SCREENSHOTS === "1" ? `src/modules/mail/screenshot-${name}.png` : `/tmp/mail-screenshot-${name}.png`);

describe("receipt e-mail and page in Chromium", () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(() => browser?.close());

  async function open(html: string, viewport: { width: number; height: number }): Promise<{ page: Page; errors: string[] }> {
    const context = await browser.newContext({ viewport, locale: "en-KE" });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    const errors: string[] = [];
    recordPageErrors(page, errors);
    // Nothing leaves the page: a remote request would show up here.
    const requests: string[] = [];
    await page.route("**/*", (route) => {
      requests.push(route.request().url());
      return route.abort();
    });
    await page.setContent(html, { waitUntil: "load" });
    expect(requests).toEqual([]);
    return { page, errors };
  }

  it("the payment receipt e-mail fits a 360 px phone", async () => {
    const { html } = renderPayerMail({ kind: "payment_receipt", payment }, brand, "en");
    const { page, errors } = await open(html.replace('src="cid:logo"', `src="${logo}"`), { width: 360, height: 800 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    expect(await page.locator("img").evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(96);
    expect(await page.getByRole("link", { name: "View or print your receipt" }).isVisible()).toBe(true);
    await page.screenshot({ path: shot("receipt-email"), fullPage: true });
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("the receipt page fits a 360 px phone, and prints on one A4 sheet without its buttons", async () => {
    const html = renderReceiptPage({ brand: { ...brand, logoSrc: "/brand/1/logo.png" }, payment, refunds, lang: "en", nonce: "test-nonce", switchHref: "/receipts/x?lang=sw" });
    const { page, errors } = await open(html.replace('src="/brand/1/logo.png"', `src="${logo}"`), { width: 360, height: 800 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    expect(await page.locator("#refunds li").count()).toBe(2);
    expect(await page.textContent("#remaining")).toBe("KES 9,845.50");
    expect(await page.isVisible("#print")).toBe(true);
    // The button is wired to window.print(), by the page's own (nonce'd) script.
    await page.evaluate(() => {
      (window as unknown as { printed: number }).printed = 0;
      window.print = () => void (window as unknown as { printed: number }).printed++;
    });
    await page.click("#print");
    expect(await page.evaluate(() => (window as unknown as { printed: number }).printed)).toBe(1);
    await page.screenshot({ path: shot("receipt-page"), fullPage: true });

    await page.emulateMedia({ media: "print" });
    expect(await page.isVisible("#print")).toBe(false);
    expect(await page.isVisible("#lang-switch")).toBe(false);
    expect(await page.isVisible("#amount")).toBe(true);
    expect(await page.locator("body").evaluate((body) => getComputedStyle(body).color)).toBe("rgb(0, 0, 0)");
    // A4's printable width at 96 dpi (210 mm less 2 x 15 mm margins): the picture of what goes on the sheet.
    await page.setViewportSize({ width: 680, height: 1009 });
    await page.screenshot({ path: shot("receipt-print"), fullPage: true });
    // One sheet: the PDF Chromium prints has a single page.
    const pdf = (await page.pdf({ preferCSSPageSize: true, printBackground: true })).toString("latin1");
    expect(pdf.match(/\/Type\s*\/Page\b(?!s)/g)).toHaveLength(1);
    expect(errors).toEqual([]);
    await page.context().close();
  });
});
