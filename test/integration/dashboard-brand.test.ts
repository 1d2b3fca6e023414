import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { confineToGateway, launchChromium, recordPageErrors, openSection } from "../support/browser.ts";
import { startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { solidPng } from "../support/png.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The dashboard's Brand page in a real Chromium, confined to the gateway: an owner sees the colour's contrast while
 * typing, uploads a PNG made here (previewed before saving), saves, and finds it all again after a reload, served
 * by the gateway; a viewer reads the same brand with no way to change it. Checked against the service too.
 */
const SHOTS = "/tmp/dashboard-shots";

describe("dashboard brand page", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  const errors: string[] = [];
  const offHost: string[] = [];
  const logo = solidPng(120, 40, [0x0b, 0x53, 0x94]);

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway()]);
    merchant = await gw.createMerchant("Duka Ltd");
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(errors).toEqual([]);
    expect(offHost).toEqual([]);
  });

  async function brandPage(user: { email: string; password: string }): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, gw.url, offHost);
    recordPageErrors(page, errors);
    await page.goto(`${gw.url}/dashboard`);
    await page.getByLabel("E-mail").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#merchant-name").filter({ hasNotText: "…" }).waitFor();
    await openSection(page, "Brand");
    await page.getByRole("heading", { name: "Brand", level: 1 }).waitFor();
    return page;
  }

  /** The image decoded (a broken or refused image has no natural width). */
  const decodedWidth = (page: Page, selector: string) =>
    page.locator(selector).evaluate(async (img: HTMLImageElement) => {
      await img.decode().catch(() => undefined);
      return img.naturalWidth;
    });

  it("an owner renames the merchant and sets display name, colour (with its contrast shown live), e-mail and a logo, and sees them saved", async () => {
    const owner = await gw.createUser(merchant.id, "owner");
    const page = await brandPage(owner);
    const form = page.getByRole("form", { name: "Brand settings" });
    // The merchant's own name (what `merchants rename` changes) is renamed here too.
    expect(await form.getByLabel("Business name").inputValue()).toBe("Duka Ltd");
    await form.getByLabel("Business name").fill("Duka la Mama Ltd");
    await form.getByLabel("Display name").fill("Mama Duka");
    const colour = form.getByLabel("Accent colour", { exact: true });
    await colour.fill("#ffcc00");
    await form.locator("#brand-contrast.contrast-low").getByText("1.51:1").waitFor();
    await colour.fill("#0b5394");
    await form.locator("#brand-contrast.contrast-ok").getByText(/Contrast with white text \d+\.\d\d:1: readable/).waitFor();
    await form.getByLabel("Support e-mail").fill("help@duka.test");

    // Too big a file is refused before upload; a small PNG is previewed.
    await page.setInputFiles("#brand-logo", { name: "huge.png", mimeType: "image/png", buffer: Buffer.alloc(300 * 1024, 1) });
    await form.getByText("a logo may be at most 256 KB").waitFor();
    await page.setInputFiles("#brand-logo", { name: "logo.png", mimeType: "image/png", buffer: logo });
    await form.locator("#brand-preview img").waitFor();
    expect(await decodedWidth(page, "#brand-preview img")).toBe(120);
    expect(await form.locator("#brand-preview .brand-preview-name").textContent()).toBe("Mama Duka");
    await page.screenshot({ path: `${SHOTS}/brand-01-owner-editing.png`, fullPage: true });

    await form.getByRole("button", { name: "Save brand" }).click();
    await form.locator("#brand-saved").waitFor();

    const saved = await gw.gateway.services.brand.checkoutBrand(merchant.id);
    expect(saved).toEqual({ displayName: "Mama Duka", accentColor: "#0b5394", supportEmail: "help@duka.test", logoUrl: expect.stringMatching(/^\/brand\/\d+\/logo\/[0-9a-f]{64}$/) });
    expect((await gw.gateway.db.prisma.merchant.findUniqueOrThrow({ where: { id: merchant.id } })).name).toBe("Duka la Mama Ltd");
    const served = await fetch(`${gw.url}${saved.logoUrl}`);
    expect(Buffer.from(await served.arrayBuffer()).equals(logo)).toBe(true);

    // After a reload the form holds what was saved and the logo comes from the gateway's route.
    await page.reload();
    await page.getByRole("heading", { name: "Brand", level: 1 }).waitFor();
    await expect.poll(() => form.getByLabel("Display name").inputValue()).toBe("Mama Duka");
    expect(await form.getByLabel("Business name").inputValue()).toBe("Duka la Mama Ltd");
    expect(await page.locator("#merchant-name").textContent()).toBe("Duka la Mama Ltd");
    expect(await form.getByLabel("Accent colour", { exact: true }).inputValue()).toBe("#0b5394");
    expect(await form.getByLabel("Support e-mail").inputValue()).toBe("help@duka.test");
    expect(await form.locator("#brand-preview img").getAttribute("src")).toBe(saved.logoUrl);
    expect(await decodedWidth(page, "#brand-preview img")).toBe(120);
    await page.screenshot({ path: `${SHOTS}/brand-02-owner-saved.png`, fullPage: true });

    // A colour the gateway refuses is said in the form, and nothing changes.
    await colour.fill("#eeeeee");
    await form.getByRole("button", { name: "Save brand" }).click();
    await form.getByRole("alert").getByText(/contrast ratio of 1\.\d\d:1/).waitFor();
    expect((await gw.gateway.services.brand.checkoutBrand(merchant.id)).accentColor).toBe("#0b5394");
    await page.context().close();
  });

  it("a viewer reads the brand and has nothing to change it with", async () => {
    const viewer = await gw.createUser(merchant.id, "viewer");
    const page = await brandPage(viewer);
    await page.locator("#brand-read-only").getByText("Only an owner can change the brand").waitFor();
    expect(await page.locator("#brand-display-name").textContent()).toBe("Mama Duka");
    expect(await page.locator("#brand-accent-color").textContent()).toBe("#0b5394");
    expect(await page.locator("#brand-support-email").textContent()).toBe("help@duka.test");
    expect(await decodedWidth(page, "#brand-fields img")).toBe(120);
    expect(await page.locator("main input, main button").count()).toBe(0);
    await page.screenshot({ path: `${SHOTS}/brand-03-viewer.png`, fullPage: true });
    await page.context().close();
  });
});
