import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, signedInDashboard } from "../support/browser.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The server closes a graphql-ws socket whose access token expired (4401), which graphql-ws clients treat as final
 * (issue 35, item 3). The dashboard keeps its live updates anyway: it sends each refreshed token on the socket, and
 * when a socket was closed for expiry (a tab that slept through its refresh) it opens a new one with a fresh token.
 */
const TOKEN_TTL_SECONDS = 3;

describe("dashboard live updates outlive their access token", () => {
  let gw: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    browser = await launchChromium();
    // The dashboard refreshes a minute before expiry, or 5 s in at the earliest: with 3 s tokens every socket meets a 4401 first.
    gw = await startTestGateway({ env: { ACCESS_TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS), RATE_LIMIT_ENABLED: "false" } });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("a payment made after several token lifetimes still appears live", async () => {
    const merchant = await createSandboxMerchant(gw, "Sleepy Tab Ltd");
    const errors: string[] = [];
    const page = await signedInDashboard(browser, gw.url, await gw.createUser(merchant.id, "owner"), errors);
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Transactions" }).click();
    await page.locator('#live-status[data-status="live"]').waitFor({ timeout: BROWSER_MS });
    // Sockets the page opens from now on: the server closes the first when its token expires (4401), and only the
    // dashboard opening another brings live updates back.
    let opened = 0;
    page.on("websocket", () => opened++);
    await expect.poll(() => opened, { timeout: BROWSER_MS }).toBeGreaterThan(0);
    await page.waitForTimeout(TOKEN_TTL_SECONDS * 2 * 1000);
    await page.locator('#live-status[data-status="live"]').waitFor({ timeout: BROWSER_MS });
    const init = await apiClient(gw.url, merchant.testKey).post("/api/transactions/initialize", { amount: 2500, email: "late@example.com" });
    expect(init.status, init.text).toBe(200);
    await page.locator(`#transactions-rows tr[data-reference="${init.body.reference}"]`).waitFor({ timeout: BROWSER_MS });
    expect(await page.getByRole("heading", { name: "Sign in to the dashboard" }).count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
