import { mkdirSync } from "node:fs";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";
import { GRAPHIQL_KEY_MESSAGE } from "../../src/app/graphql-endpoint.ts";

/** GraphiQL at /graphql renders and runs queries with every host but the gateway blocked (no CDN). */
describe("GraphiQL, offline", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { NODE_ENV: "development", RATE_LIMIT_ENABLED: "false" } });
    merchant = await gw.createMerchant("GraphiQL Traders");
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("renders from the gateway alone and runs a query with the key in its headers", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const gateway = new URL(gw.url);
    const elsewhere: string[] = [];
    await page.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === "blob:" || url.protocol === "data:" || url.host === gateway.host) return route.continue();
      elsewhere.push(url.href);
      return route.abort();
    });
    const response = await page.goto(`${gw.url}/graphql`);
    expect(response?.status()).toBe(200);
    await page.waitForSelector(".graphiql-container", { timeout: BROWSER_MS });
    expect(await page.title()).toBe("Payment gateway · GraphiQL");

    // It opens on how to authenticate: the hint in the query, the headers tab shown with the key's header to fill.
    const flat = async (selector: string) => ((await page.locator(selector).first().textContent()) ?? "").replace(/\s+/g, " ");
    await expect.poll(() => flat(".graphiql-query-editor")).toContain(`"X-API-Key": your test key (sk_test_...`);
    const headers = page.locator(".graphiql-editor-tool .graphiql-editor").last();
    await expect.poll(async () => ((await headers.textContent()) ?? "").replace(/\s+/g, "")).toContain(`{"X-API-Key":""}`);
    // Fill the key in, then run the default query ({ viewer { name mode } }).
    await headers.click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.press("Backspace");
    await page.keyboard.type(`{"X-API-Key": "${merchant.testKey}"`);
    await page.locator(".graphiql-execute-button").click();
    await expect.poll(async () => ((await page.locator(".result-window").textContent()) ?? "").replace(/\s+/g, " "), { timeout: BROWSER_MS }).toContain(`"name": "GraphiQL Traders", "mode": "test"`);
    mkdirSync("/tmp/graphiql-shots", { recursive: true });
    await page.screenshot({ path: "/tmp/graphiql-shots/graphiql.png" });
    expect(elsewhere).toEqual([]);
    await page.close();
  });

  it("without a key, running the default query shows where the key goes, not the 401 envelope", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    const response = await page.goto(`${gw.url}/graphql`);
    expect(response?.status()).toBe(200);
    await page.waitForSelector(".graphiql-container", { timeout: BROWSER_MS });
    await page.locator(".graphiql-execute-button").click();
    // Without whitespace: the result pane wraps long lines wherever it likes.
    const result = async () => ((await page.locator(".result-window").textContent()) ?? "").replace(/\s+/g, "");
    await expect.poll(result, { timeout: BROWSER_MS }).toContain(GRAPHIQL_KEY_MESSAGE.replace(/\s+/g, ""));
    expect(await result()).not.toMatch(/"status":"error"/);
    mkdirSync("/tmp/graphiql-shots", { recursive: true });
    await page.screenshot({ path: "/tmp/graphiql-shots/graphiql-no-key.png" });
    expect(errors).toEqual([]);
    await page.close();
  });
});
