import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, signedInLive } from "../support/browser.ts";
import { expectNoHorizontalScroll, expectNoSeriousAxeViolations } from "../support/checkout-page.ts";
import { apiClient, paidTransaction, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * Issue 41, channels editable, in a real Chromium at 1280 and 390 px: an owner edits a channel's name and fee schedule
 * with a live preview computed by the gateway (feePreview: the same SQL function that fixes each payment's fee), the
 * list shows the schedule; an M-Pesa channel's credentials are replaced from a blank form (the current ones never
 * shown) that says where in the Daraja portal each value is found. axe finds nothing serious. Screenshots in SHOTS.
 */
const SHOTS = "/tmp/dashboard-shots";
const MPESA_CONFIG = {
  consumer_key: "ck_old_key",
  consumer_secret: "cs_OLD_SECRET_123",
  shortcode: "174379",
  passkey: "bfb279f9aa9bdbcf158e97dd71a467cd",
  environment: "sandbox",
  transaction_type: "paybill",
};

describe("dashboard payment channels", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let owner: { email: string; password: string };
  let sandboxId: number;
  let mpesaId: number;
  const record = { offHost: [] as string[], errors: [] as string[] };

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    merchant = await gw.createMerchant("Duka la Ada");
    owner = await gw.createUser(merchant.id, "owner");
    const api = apiClient(gw.url, merchant.testKey);
    mpesaId = (await api.post("/api/payment-channels/create", { name: "M-Pesa paybill", provider: "mpesa", config: MPESA_CONFIG })).body.channel.id;
    sandboxId = (await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).body.channel.id;
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(record.offHost).toEqual([]);
    expect(record.errors).toEqual([]);
  });

  const channelRow = (page: Page, name: string) => page.locator("#channels tr").filter({ hasText: name });
  const channels = async () => (await apiClient(gw.url, merchant.testKey).get("/api/payment-channels/list")).body.channels as any[];

  for (const width of [1280, 390]) {
    it(`at ${width} px: edits a channel's fees with the preview, and replaces an M-Pesa channel's credentials`, async () => {
      const page = await signedInLive(browser, gw.url, owner, "/channels", record);
      await page.setViewportSize({ width, height: 900 });
      await page.getByRole("heading", { name: "Payment channels", level: 1 }).waitFor();
      const row = channelRow(page, "Sandbox");
      await row.locator('[data-field="fees"]').waitFor();

      await row.getByRole("button", { name: /^Edit / }).click();
      const form = page.locator("#edit-channel");
      await form.waitFor();
      await form.getByLabel("Name").fill(`Sandbox ${width}`);
      await form.getByLabel("Fee, percent of each payment").fill("1.5");
      await form.getByLabel(/^Fixed fee per payment/).fill("0");
      await form.getByLabel(/^Most a fee can be/).fill("");
      const preview = page.locator("#edit-channel-fee-preview");
      await expect.poll(() => preview.textContent()).toBe("On KES 1,000.00 you pay KES 15.00 in fees and keep KES 985.00.");
      await form.getByLabel(/^Most a fee can be/).fill("10");
      await expect.poll(() => preview.textContent()).toBe("On KES 1,000.00 you pay KES 10.00 in fees and keep KES 990.00.");
      await form.getByLabel("Fee, percent of each payment").fill("abc");
      await expect.poll(() => preview.textContent()).toContain("The percentage is a number from 0 to 100");
      await form.getByLabel("Fee, percent of each payment").fill("1.5");
      await expect.poll(() => preview.textContent()).toBe("On KES 1,000.00 you pay KES 10.00 in fees and keep KES 990.00.");
      await expectNoSeriousAxeViolations(page, `channel fee form at ${width} px`);
      await expectNoHorizontalScroll(page, width);
      await page.screenshot({ path: `${SHOTS}/channels-fees-${width}.png`, fullPage: true });

      await form.getByRole("button", { name: "Save channel" }).click();
      await form.waitFor({ state: "detached" });
      const saved = channelRow(page, `Sandbox ${width}`);
      await expect.poll(() => saved.locator('[data-field="fees"]').textContent()).toBe("1.5 %, at most KES 10.00");
      expect((await channels()).find((c) => c.id === sandboxId)).toMatchObject({ name: `Sandbox ${width}`, fee_percent_bps: 150, fee_fixed: 0, fee_cap: 1_000 });

      // New credentials for the M-Pesa channel: a blank form, each value's place in the Daraja portal said under it.
      await channelRow(page, "M-Pesa paybill").getByRole("button", { name: "Replace credentials of M-Pesa paybill" }).click();
      const credentials = page.locator("#replace-credentials");
      await credentials.waitFor();
      for (const label of ["Shortcode", "Consumer key", "Consumer secret", "Passkey"]) expect(await credentials.getByLabel(label, { exact: true }).inputValue()).toBe("");
      const text = (await credentials.textContent()) ?? "";
      expect(text).not.toContain("ck_old_key");
      expect(text).toContain("My Apps");
      expect(text).toContain("e-mailed by Safaricom");
      expect(text).toContain("M-Pesa Org Portal");
      expect(await credentials.getByLabel("Passkey", { exact: true }).getAttribute("aria-describedby")).toBe("channel-passkey-help");
      await credentials.getByLabel("Shortcode", { exact: true }).fill("600980");
      await credentials.getByLabel("Consumer key", { exact: true }).fill(`ck_new_${width}`);
      await credentials.getByLabel("Consumer secret", { exact: true }).fill("cs_NEW_SECRET_456");
      await credentials.getByLabel("Passkey", { exact: true }).fill("new-passkey-789");
      await expectNoSeriousAxeViolations(page, `replace credentials form at ${width} px`);
      await expectNoHorizontalScroll(page, width);
      await page.screenshot({ path: `${SHOTS}/channels-credentials-${width}.png`, fullPage: true });
      await credentials.getByRole("button", { name: "Replace credentials" }).click();
      await credentials.waitFor({ state: "detached" });
      const stored = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id: mpesaId } });
      expect(gw.gateway.services.channels.readChannelConfig(stored)).toMatchObject({ shortcode: "600980", consumer_key: `ck_new_${width}`, passkey: "new-passkey-789" });
      // Never shown back: not in the page after saving either.
      expect(await page.content()).not.toContain("cs_NEW_SECRET_456");
      await expectNoSeriousAxeViolations(page, `channel list at ${width} px`);
      await page.screenshot({ path: `${SHOTS}/channels-list-${width}.png`, fullPage: true });

      // A payment on the channel now: its page shows the fee the new schedule took (1.5 % of KES 500.00 = KES 7.50) and the net.
      const card = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 1, cvc: "123" };
      const reference = await paidTransaction(gw.url, merchant.testKey, { amount: 50_000, email: "payer@example.com", payment_channel_id: sandboxId }, card);
      await page.goto(`${gw.url}/dashboard/transactions/${reference}`);
      const fields = page.locator("#transaction-fields");
      await fields.locator('[data-field="fee"]').waitFor();
      expect(await fields.locator('[data-field="fee"]').textContent()).toBe("KES 7.50");
      expect(await fields.locator('[data-field="net"]').textContent()).toBe("KES 492.50");
      await expectNoSeriousAxeViolations(page, `transaction page at ${width} px`);
      await page.screenshot({ path: `${SHOTS}/transaction-fee-net-${width}.png`, fullPage: true });
      await page.context().close();
    });
  }

  it("a new channel takes its fee schedule with the preview, so fees are right from its first payment", async () => {
    const page = await signedInLive(browser, gw.url, owner, "/channels", record);
    await page.getByRole("heading", { name: "Payment channels", level: 1 }).waitFor();
    await page.getByRole("button", { name: "New channel" }).click();
    const form = page.locator("form").filter({ has: page.locator("#new-channel-title") });
    await form.waitFor();
    await form.getByLabel("Provider").selectOption("sandbox");
    await form.getByLabel("Name").fill("Sandbox with fees");
    await form.getByLabel("Fee, percent of each payment").fill("2.9");
    await form.getByLabel(/^Fixed fee per payment/).fill("10");
    await form.getByLabel(/^Most a fee can be/).fill("");
    await expect.poll(() => page.locator("#channel-fee-preview").textContent()).toBe("On KES 1,000.00 you pay KES 39.00 in fees and keep KES 961.00.");
    await form.getByLabel("Fee, percent of each payment").fill("101");
    await form.getByRole("button", { name: "Add channel" }).click();
    await expect.poll(() => form.textContent()).toContain("The percentage is a number from 0 to 100");
    expect((await channels()).some((c) => c.name === "Sandbox with fees")).toBe(false);
    await form.getByLabel("Fee, percent of each payment").fill("2.9");
    await form.getByRole("button", { name: "Add channel" }).click();
    await form.waitFor({ state: "detached" });
    await expect.poll(() => channelRow(page, "Sandbox with fees").locator('[data-field="fees"]').textContent()).toBe("2.9 % + KES 10.00");
    expect((await channels()).find((c) => c.name === "Sandbox with fees")).toMatchObject({ fee_percent_bps: 290, fee_fixed: 1_000, fee_cap: null });
    await expectNoSeriousAxeViolations(page, "channel list after adding one");
    await page.context().close();
  });
});
