import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, signedInDashboard, openSection } from "../support/browser.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * The dashboard's API keys page in a real Chromium: a key's role is chosen when it is made (at most the user's own)
 * and shown in the list, and the key then does exactly what that role may (issue 35, item 1).
 */
describe("dashboard API keys: a role per key", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    merchant = await gw.createMerchant("Keys Ltd");
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(browserErrors).toEqual([]);
  });

  async function keysPage(user: { email: string; password: string }): Promise<Page> {
    const page = await signedInDashboard(browser, gw.url, user, browserErrors);
    await openSection(page, "API keys");
    await page.getByRole("heading", { name: /API keys/, level: 1 }).waitFor();
    return page;
  }

  it("an owner makes a viewer key: listed as viewer, it reads and is refused every write", async () => {
    const page = await keysPage(await gw.createUser(merchant.id, "owner"));
    expect(await page.getByLabel("Role").locator("option").allTextContents()).toEqual(["owner", "developer", "viewer"]);
    await page.getByLabel("Role").selectOption("viewer");
    await page.getByRole("button", { name: "Create test key" }).click();
    const secret = (await page.locator("#secret-value").textContent())!;
    expect(secret).toMatch(/^sk_test_/);
    await page.getByRole("button", { name: "I have saved it" }).click();
    const row = page.locator("#api-keys tr").filter({ hasText: secret.slice(0, 16) });
    await row.getByText("viewer", { exact: true }).waitFor();
    const key = apiClient(gw.url, secret);
    expect((await key.get("/api/transactions/list")).status).toBe(200);
    const write = await key.post("/api/customers/create", { email: "someone@keys.test" });
    expect([write.status, write.body.code]).toEqual([403, "forbidden"]);
    expect((await gw.gateway.db.prisma.apiKey.findFirstOrThrow({ where: { prefix: secret.slice(0, 16) } })).role).toBe("viewer");
  });

  it("a developer is offered no owner keys", async () => {
    const page = await keysPage(await gw.createUser(merchant.id, "developer"));
    expect(await page.getByLabel("Role").locator("option").allTextContents()).toEqual(["developer", "viewer"]);
  });
});
