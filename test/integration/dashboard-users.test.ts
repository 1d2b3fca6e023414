import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, openSection } from "../support/browser.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The dashboard's Users page in a real Chromium: an owner adds a viewer, changes its role and disables it; a viewer
 * sees no team controls but changes its own password. What the page shows is checked against the gateway (sign-in
 * over HTTP, the database through the service).
 */
const SHOTS = "/tmp/dashboard-shots";

describe("dashboard users page", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let owner: { id: number; email: string; password: string };
  const browserErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    gw = await startTestGateway();
    merchant = await gw.createMerchant("Team Ltd");
    owner = await gw.createUser(merchant.id, "owner");
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(browserErrors).toEqual([]);
  });

  async function signedIn(user: { email: string; password: string }): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    page.on("pageerror", (error) => browserErrors.push(error.message));
    await page.goto(`${gw.url}/dashboard`);
    await page.getByLabel("E-mail").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#merchant-name").filter({ hasNotText: "…" }).waitFor();
    await openSection(page, "Users");
    await page.getByRole("heading", { name: "Users", level: 1 }).waitFor();
    return page;
  }
  const login = (email: string, password: string) => apiClient(gw.url).post("/v1/auth/login", { email, password });
  const roleInDatabase = async (email: string) => (await gw.gateway.services.users.listUsers(merchant.id)).find((u) => u.email === email)?.role;

  it("an owner adds a viewer, makes it a developer, then disables it", async () => {
    const page = await signedIn(owner);
    const team = page.locator("#users");
    await team.locator(`tr[data-email="${owner.email}"]`).getByText("(you)").waitFor();
    // No controls on one's own row: an owner cannot demote or disable themselves.
    expect(await team.locator(`tr[data-email="${owner.email}"] select, tr[data-email="${owner.email}"] button`).count()).toBe(0);

    await page.getByRole("button", { name: "Add user" }).click();
    await page.getByLabel("E-mail").fill("clerk@team.test");
    await page.getByLabel("First password").fill("clerk-first-password");
    await page.getByLabel("Role", { exact: true }).selectOption("viewer");
    await page.getByRole("form", { name: "Add a user" }).getByRole("button", { name: "Add user" }).click();
    const clerk = team.locator('tr[data-email="clerk@team.test"]');
    await clerk.waitFor();
    expect(await page.getByLabel("Role of clerk@team.test").inputValue()).toBe("viewer");
    expect((await login("clerk@team.test", "clerk-first-password")).body.data.user.role).toBe("viewer");

    await page.getByLabel("Role of clerk@team.test").selectOption("developer");
    await page.locator("#live-region", { hasText: "clerk@team.test is now developer" }).waitFor();
    expect(await roleInDatabase("clerk@team.test")).toBe("developer");
    expect(await page.getByLabel("Role of clerk@team.test").inputValue()).toBe("developer");
    await page.screenshot({ path: `${SHOTS}/users-01-owner.png`, fullPage: true });

    await clerk.getByRole("button", { name: "Disable" }).click();
    await clerk.getByRole("button", { name: "Disable user" }).click();
    await clerk.locator(".badge", { hasText: /^Disabled / }).waitFor();
    // A disabled user keeps its row but loses its controls, and can no longer sign in.
    expect(await clerk.locator("select, button").count()).toBe(0);
    expect((await login("clerk@team.test", "clerk-first-password")).status).toBe(401);
    await page.screenshot({ path: `${SHOTS}/users-02-disabled.png`, fullPage: true });
    await page.context().close();
  });

  it("a viewer sees no team controls, and changes its own password", async () => {
    const viewer = await gw.createUser(merchant.id, "viewer");
    const page = await signedIn(viewer);
    await page.getByText("Only an owner can see and manage the team").waitFor();
    expect(await page.locator("#users").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Add user" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Disable" }).count()).toBe(0);
    expect(await page.locator("select").count()).toBe(0);

    const form = page.getByRole("form", { name: "Your password" });
    await form.getByLabel("Current password").fill("not my password");
    await form.getByLabel("New password").fill("a-brand-new-password");
    await form.getByRole("button", { name: "Change password" }).click();
    await form.getByText("currentPassword: is not your current password").waitFor();

    await form.getByLabel("Current password").fill(viewer.password);
    await form.getByLabel("New password").fill("a-brand-new-password");
    await form.getByRole("button", { name: "Change password" }).click();
    await form.getByText("Password changed").waitFor();
    await page.screenshot({ path: `${SHOTS}/users-03-viewer.png`, fullPage: true });
    expect((await login(viewer.email, viewer.password)).status).toBe(401);
    expect((await login(viewer.email, "a-brand-new-password")).status).toBe(200);
    await page.context().close();
  });
});
