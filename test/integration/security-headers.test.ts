import { createHash } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * Issue 21, item 4: the checkout page, GraphiQL and GET / carry nosniff, a Referrer-Policy and a CSP
 * whose scripts need a nonce (checkout) or a hash (GraphiQL), never 'unsafe-inline'. Chromium enforces
 * them: the pages still work, with no CSP report, and a script injected into the page does not run.
 */
describe("security headers on the gateway's pages", () => {
  let gw: TestGateway;
  let browser: Browser;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { NODE_ENV: "development", RATE_LIMIT_ENABLED: "false" } });
    const merchant = await gw.createMerchant("Headers Ltd");
    api = apiClient(gw.url, merchant.testKey);
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" })).status).toBe(201);
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  async function checkoutPath(): Promise<string> {
    const init = await api.post("/api/transactions/initialize", { amount: 5000, email: "payer@example.com" });
    expect(init.status, init.text).toBe(200);
    return new URL(init.body.authorization_url).pathname;
  }

  /** A CSP's directives by name. */
  const directives = (policy: string | null) =>
    Object.fromEntries((policy ?? "").split(";").map((d) => d.trim().split(/\s+/)).filter((d) => d[0]).map(([name, ...values]) => [name!, values]));

  function expectCommonHeaders(headers: Headers) {
    expect(headers.get("x-content-type-options")).toBe("nosniff");
    expect(headers.get("referrer-policy")).toBe("no-referrer");
    expect(headers.get("content-security-policy")).toBeTruthy();
  }

  /** Opens a page, recording CSP refusals Chromium reports on the console. */
  async function open(path: string): Promise<{ page: Page; refusals: string[] }> {
    const page = await browser.newPage();
    const refusals: string[] = [];
    page.on("console", (message) => {
      if (/Content Security Policy/i.test(message.text())) refusals.push(message.text());
    });
    await page.goto(`${gw.url}${path}`);
    return { page, refusals };
  }

  /** Whether a script added to the page without the nonce runs (it must not). */
  async function injectedScriptRuns(page: Page): Promise<boolean> {
    await page.addScriptTag({ content: "window.__injected = true;" }).catch(() => undefined);
    return page.evaluate(() => (window as unknown as { __injected?: boolean }).__injected === true);
  }

  it("the injection used below does run on a page without a CSP (so its refusal below is the CSP's doing)", async () => {
    const page = await browser.newPage();
    await page.setContent("<p>no policy</p>");
    expect(await injectedScriptRuns(page)).toBe(true);
    await page.close();
  });

  it("checkout: a fresh nonce per response on its one script and style, no 'unsafe-inline'", async () => {
    const path = await checkoutPath();
    const [first, second] = [await apiClient(gw.url).get(path), await apiClient(gw.url).get(path)];
    for (const res of [first, second]) {
      expect(res.status).toBe(200);
      expectCommonHeaders(res.headers);
      const csp = directives(res.headers.get("content-security-policy"));
      expect(csp["script-src"]).toHaveLength(1);
      expect(csp["script-src"]![0]).toMatch(/^'nonce-[A-Za-z0-9+/]{24}'$/);
      expect(res.headers.get("content-security-policy")).not.toContain("unsafe-inline");
      const nonce = csp["script-src"]![0]!.slice("'nonce-".length, -1);
      expect(res.text.match(/<script[^>]*>/g)).toEqual([`<script nonce="${nonce}">`]);
      expect(res.text.match(/<style[^>]*>/g)).toEqual([`<style nonce="${nonce}">`]);
    }
    expect(first.headers.get("content-security-policy")).not.toBe(second.headers.get("content-security-policy"));
  });

  it("checkout in Chromium: the card form still pays, nothing is refused, an injected script does not run", async () => {
    const path = await checkoutPath();
    const { page, refusals } = await open(path);
    expect(await injectedScriptRuns(page)).toBe(false);
    await expect.poll(() => refusals.some((r) => /script/i.test(r)), { timeout: BROWSER_MS }).toBe(true);
    refusals.length = 0; // that refusal was the point; the page's own must be none
    await page.check('#methods input[value="card"]'); // M-Pesa is offered first for KES (issue 25)
    await page.fill('input[name="card_number"]', "4084084084084081");
    await page.fill('input[name="expiry_month"]', "12");
    await page.fill('input[name="expiry_year"]', String(new Date().getUTCFullYear() + 1));
    await page.fill('input[name="cvc"]', "408");
    await page.click('#pay button[type="submit"]');
    await page.waitForSelector("#result.completed", { timeout: BROWSER_MS });
    expect(await page.evaluate(() => getComputedStyle(document.querySelector("button, #result")!).fontFamily)).toMatch(/system-ui|sans-serif/);
    expect(refusals).toEqual([]);
    await page.close();
  });

  it("GraphiQL: its inline scripts allowed by hash, not 'unsafe-inline'; it renders with no refusal", async () => {
    const res = await apiClient(gw.url).get("/graphql", { accept: "text/html" });
    expect(res.status).toBe(200);
    expectCommonHeaders(res.headers);
    const csp = directives(res.headers.get("content-security-policy"));
    expect(csp["script-src"]).not.toContain("'unsafe-inline'");
    const inline = [...res.text.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    expect(inline.length).toBeGreaterThan(0);
    for (const script of inline) expect(csp["script-src"]).toContain(`'sha256-${createHash("sha256").update(script).digest("base64")}'`);

    const { page, refusals } = await open("/graphql");
    await page.waitForSelector(".graphiql-container", { timeout: BROWSER_MS });
    expect(refusals).toEqual([]);
    expect(await injectedScriptRuns(page)).toBe(false);
    await page.close();
  });

  it("GET / and API answers carry the same headers", async () => {
    const root = await apiClient(gw.url).get("/");
    expect(root.status).toBe(200);
    expectCommonHeaders(root.headers);
    expect(directives(root.headers.get("content-security-policy"))["default-src"]).toEqual(["'none'"]);
    const status = await api.get("/v1/status");
    expectCommonHeaders(status.headers);
    const refused = await apiClient(gw.url).get("/v1/status");
    expect(refused.status).toBe(401);
    expectCommonHeaders(refused.headers);
  });
});
