import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import {
  expectNoHorizontalScroll,
  expectNoSeriousAxeViolations,
  initialize,
  payerBrowser,
  payByCard,
  screenshot,
} from "../support/checkout-page.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/** The hosted checkout's headers, languages, phone screen, keyboard and accessibility (issue 25), in Chromium. */
describe("hosted checkout page: headers, Swahili, 360 px, keyboard, axe", () => {
  let gw: TestGateway;
  let browser: Browser;
  let key: string;

  beforeAll(async () => {
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3", SANDBOX_STK_DELAY_MS: "300" } })]);
    key = (await createSandboxMerchant(gw, "Mama Mboga Ltd")).testKey;
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("sends a nonce CSP without unsafe-inline, img-src 'self', frame-ancestors 'none', nosniff and no-referrer, on the checkout and the link page", async () => {
    const { path } = await initialize(gw, key);
    const link = await apiClient(gw.url, key).post("/v1/payment-links", { amount: 5000, description: "Headers" });
    for (const target of [path, `/pay/${link.body.data.slug}`]) {
      const res = await fetch(`${gw.url}${target}`);
      expect(res.status, target).toBe(200);
      const csp = res.headers.get("content-security-policy")!;
      const nonce = /script-src 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
      expect(nonce, csp).toBeDefined();
      expect(csp).toMatch(/default-src 'none'/);
      expect(csp).toMatch(/img-src 'self'/);
      expect(csp).toMatch(/frame-ancestors 'none'/);
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      expect(res.headers.get("vary")).toMatch(/accept-language/i);
      const html = await res.text();
      // Every script and style carries this response's nonce; no inline handlers, nothing from another host.
      for (const tag of html.match(/<(script|style)\b[^>]*>/g) ?? []) expect(tag).toContain(`nonce="${nonce}"`);
      expect(html).not.toMatch(/\son[a-z]+=|(src|href)="(https?:)?\/\/(?!127\.0\.0\.1)/);
    }
    // A second response gets another nonce.
    const again = (await fetch(`${gw.url}${path}`)).headers.get("content-security-policy");
    expect(again).not.toBe((await fetch(`${gw.url}${path}`)).headers.get("content-security-policy"));
  });

  it("speaks Swahili by Accept-Language (q-values), and by the switch, which the link page carries to the checkout", async () => {
    const { path } = await initialize(gw, key);
    const html = async (headers: Record<string, string>, query = "") => (await fetch(`${gw.url}${path}${query}`, { headers })).text();
    expect(await html({ "accept-language": "sw-KE,sw;q=0.9,en;q=0.8" })).toContain('<html lang="sw">');
    expect(await html({ "accept-language": "en-GB,en;q=0.9,sw;q=0.8" })).toContain('<html lang="en">');
    expect(await html({ "accept-language": "fr;q=1, sw;q=0.5, en;q=0.4" })).toContain('<html lang="sw">');
    expect(await html({ "accept-language": "sw;q=0, fr" })).toContain('<html lang="en">');
    expect(await html({ "accept-language": "sw" }, "?lang=en")).toContain('<html lang="en">');

    const sw = await payerBrowser(browser, gw, { locale: "sw-KE", width: 360 });
    const page = await sw.open(path);
    expect(await page.getAttribute("html", "lang")).toBe("sw");
    expect(await page.textContent(".test-ribbon")).toBe("Hali ya majaribio: hakuna pesa halisi inayotumwa");
    expect(await page.textContent("#pay button")).toBe("Lipa KES 1,500.00");
    expect(await page.textContent("label[for=phone]")).toBe("Namba ya simu ya M-Pesa");
    await payByCard(page, "4000 0000 0000 0002");
    await page.waitForSelector("#result.failed");
    expect(await page.textContent("#result")).toContain("kadi imekataliwa na benki iliyoitoa");
    await expectNoSeriousAxeViolations(page, "declined (Swahili)");
    await screenshot(page, "swahili");
    await payByCard(page, "4084 0840 8408 4081");
    await page.waitForSelector("#result.completed");
    expect(await page.textContent("#result")).toBe("Malipo yamekamilika. Asante.");
    await page.close();
    expect(sw.errors).toEqual([]);
    await sw.close();

    // The switch: an English browser picks Kiswahili on the link page; the checkout it is sent to stays in Swahili.
    const link = await apiClient(gw.url, key).post("/v1/payment-links", { amount: 2500, description: "Ada ya shule" });
    const en = await payerBrowser(browser, gw, { locale: "en-US" });
    const linkPage = await en.open(`/pay/${link.body.data.slug}`);
    expect(await linkPage.getAttribute("html", "lang")).toBe("en");
    await linkPage.click("#lang-switch");
    await linkPage.waitForSelector('html[lang="sw"]');
    // M-Pesa comes first where it is offered; this payer chooses the card (the button says what happens next).
    await linkPage.check('#methods input[value="card"]');
    expect(await linkPage.innerText("button")).toBe("Endelea kulipa");
    await expectNoSeriousAxeViolations(linkPage, "payment-link (Swahili)");
    await linkPage.fill("#email", "mteja@example.com");
    await Promise.all([linkPage.waitForURL(/\/payment\/checkout\/[^?]+\?(?:.*&)?lang=sw(?:&.*)?$/), linkPage.click("button")]);
    expect(await linkPage.getAttribute("html", "lang")).toBe("sw");
    // And back: the checkout's own switch.
    await linkPage.click("#lang-switch");
    await linkPage.waitForSelector('html[lang="en"]');
    expect(await linkPage.textContent("#pay button")).toBe("Pay KES 25.00");
    await en.close();
    expect(en.errors).toEqual([]);
  });

  it("at 360 px: no horizontal scroll; pays by keyboard alone, focus visible, the fields labelled", async () => {
    const phone = await payerBrowser(browser, gw, { width: 360 });
    const { path, reference } = await initialize(gw, key, { amount: 24999900 });
    const page = await phone.open(path);
    await expectNoHorizontalScroll(page, 360);
    // Keyboard only: Tab from the top until the card choice, arrows to choose it, then the card fields in order.
    const focused = () =>
      page.evaluate(() => {
        const el = document.activeElement as HTMLInputElement | null;
        const style = el ? getComputedStyle(el) : null;
        return { id: el?.id ?? "", name: el?.name ?? "", label: el?.labels?.[0]?.textContent?.trim() ?? "", outline: style?.outlineStyle ?? "none" };
      });
    for (let i = 0; i < 10 && (await focused()).name !== "method"; i++) await page.keyboard.press("Tab");
    expect((await focused()).name).toBe("method");
    expect((await focused()).outline).not.toBe("none");
    await page.keyboard.press("ArrowRight"); // M-Pesa -> Card
    await page.keyboard.press("Tab");
    expect(await focused()).toMatchObject({ name: "card_number", label: "Card number" });
    expect((await focused()).outline).not.toBe("none");
    await page.keyboard.type("4084084084084081");
    await page.keyboard.press("Tab");
    expect((await focused()).label).toBe("Month");
    await page.keyboard.type("12");
    await page.keyboard.press("Tab");
    expect((await focused()).label).toBe("Year");
    await page.keyboard.type(String(new Date().getUTCFullYear() + 1));
    await page.keyboard.press("Tab");
    expect((await focused()).label).toBe("CVC");
    await page.keyboard.type("408");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#result.completed");
    await expectNoHorizontalScroll(page, 360);
    const verify = await apiClient(gw.url, key).get(`/api/transactions/verify/${reference}`);
    expect(verify.body.transaction.status).toBe("completed");
    await phone.close();
    expect(phone.offHost).toEqual([]);
    expect(phone.errors).toEqual([]);
  });
});
