import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { startFakePaystack } from "../fakes/paystack-api.ts";
import { startSmtpFake } from "../fakes/smtp.ts";
import { confineToGateway, launchChromium, recordPageErrors, openSection } from "../support/browser.ts";
import { expectNoSeriousAxeViolations } from "../support/checkout-page.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * The go-live checklist on the Overview, in a real Chromium: shown in live mode only, each item with its message and
 * a link to where it is fixed; "Check again" asks the provider about the live channel's credentials (refused, then
 * accepted once Daraja knows the secret); the live channels and transactions pages speak of live channels; once every
 * check is ok (a production-configured gateway) the list is gone. axe finds nothing serious.
 */
const SHOTS = "/tmp/dashboard-shots";

describe("dashboard go-live checklist", () => {
  let gw: TestGateway;
  let browser: Browser;
  let daraja: FakeDaraja;
  let merchant: TestMerchant;
  let owner: { email: string; password: string };
  const offHost: string[] = [];
  const browserErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    daraja = await startFakeDaraja();
    // Daraja refuses the app at first (not yet approved for production, say): the check made on saving is refused.
    daraja.switches.wrongCredentials = true;
    browser = await launchChromium();
    gw = await startTestGateway({ env: { MPESA_BASE_URL: daraja.url, RATE_LIMIT_ENABLED: "false", JOB_POLL_INTERVAL_MS: "100" } });
    merchant = await gw.createMerchant("Duka la Go-Live");
    owner = await gw.createUser(merchant.id, "owner");
    await gw.createLiveChannel(merchant, { name: "Duka paybill", provider: "mpesa", config: { ...daraja.channelConfig(), environment: "production" } });
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    await daraja?.close();
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  async function signedIn(at: TestGateway = gw, user: { email: string; password: string } = owner): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, at.url, offHost);
    recordPageErrors(page, browserErrors);
    await page.goto(`${at.url}/dashboard`);
    await page.getByLabel("E-mail").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('#live-status[data-status="live"]').waitFor();
    return page;
  }

  it("shows the checklist in live mode with each item's message and where to fix it; Check again asks the provider", async () => {
    const page = await signedIn();
    await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
    // Test mode: no checklist.
    await page.locator(".stat-cards").waitFor();
    expect(await page.locator("#go-live").count()).toBe(0);

    await page.getByRole("group", { name: "Mode" }).getByRole("button", { name: "Live" }).click();
    await page.locator("#mode-badge.live").waitFor();
    const list = page.locator("#go-live");
    await list.waitFor();
    expect(await list.getByRole("heading", { level: 2 }).textContent()).toBe("Before you take live payments");
    const item = (id: string) => list.locator(`li[data-check="${id}"]`);
    expect(await list.locator("li").evaluateAll((items) => items.map((li) => li.getAttribute("data-check")))).toEqual([
      "public_https_url",
      "live_channel",
      "live_channel_credentials",
      "c2b_urls",
      "webhook_endpoint",
      "live_api_key",
      "owners",
      "mail",
    ]);
    // The channel's saved credentials were checked when it was made: refused, in Daraja's words.
    const credentials = item("live_channel_credentials");
    await expect.poll(() => credentials.locator(".go-live-message").textContent(), { timeout: BROWSER_MS }).toMatch(/Invalid Authentication passed/);
    expect(await credentials.getAttribute("data-ok")).toBe("false");
    expect(await item("live_channel").getAttribute("data-ok")).toBe("true");
    expect(await item("live_api_key").getAttribute("data-ok")).toBe("true");
    // Two owners: the one signed in here and the one who made the live channel.
    expect(await item("owners").locator(".go-live-message").textContent()).toBe("2 owners can sign in");
    expect(await item("webhook_endpoint").locator(".go-live-message").textContent()).toMatch(/^There is no live webhook endpoint/);
    expect(await item("mail").locator(".go-live-fix code").textContent()).toMatch(/^Set SMTP_URL/);
    expect(await list.locator("#go-live-progress").textContent()).toMatch(/^3 of 8 done/);

    await page.screenshot({ path: `${SHOTS}/go-live-checklist.png`, fullPage: true });
    await expectNoSeriousAxeViolations(page, "go-live checklist");

    // The app is approved in the Daraja portal: Check again asks Daraja now.
    daraja.switches.wrongCredentials = false;
    await credentials.getByRole("button", { name: "Check again" }).click();
    await expect.poll(() => credentials.getAttribute("data-ok"), { timeout: BROWSER_MS }).toBe("true");
    expect(await credentials.locator(".go-live-message").textContent()).toBe("Duka paybill (mpesa): M-Pesa accepted the consumer key and secret (production app, shortcode 174379)");
    expect(await list.locator("#go-live-progress").textContent()).toMatch(/^4 of 8 done/);
    await page.screenshot({ path: `${SHOTS}/go-live-checked.png`, fullPage: true });

    // Each fix links to its page: the webhooks', where a live endpoint is added.
    await item("webhook_endpoint").getByRole("link", { name: /Fix in Webhooks/ }).click();
    await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/webhooks");
    await page.context().close();
  });

  it("a live merchant without channels or payments reads of live channels, not sandbox ones", async () => {
    const other = await gw.createMerchant("Duka Mpya");
    owner = await gw.createUser(other.id, "owner");
    const page = await signedIn();
    await page.getByRole("group", { name: "Mode" }).getByRole("button", { name: "Live" }).click();
    await page.locator("#mode-badge.live").waitFor();
    await openSection(page, "Payment channels");
    const empty = page.getByText(/Add a live channel \(New channel\): M-Pesa with your production Daraja app, or Paystack with your live keys/);
    await empty.waitFor();
    expect(await page.getByText(/sandbox channel/i).count()).toBe(0);
    await page.getByRole("button", { name: "New channel" }).click();
    const providers = await page.getByLabel("Provider").locator("option").evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
    expect(providers).toEqual(["paystack", "mpesa"]);
    await expectNoSeriousAxeViolations(page, "live channels, empty");

    // The transactions page's empty state in live mode points at live channels and the Overview's checklist.
    await openSection(page, "Transactions");
    await page.getByRole("heading", { name: "No payments yet" }).waitFor();
    await page.getByText(/Live payments appear here as soon as your customers pay through a live channel/).waitFor();
    expect(await page.getByText(/what is left before you go live/).count()).toBe(1);
    expect(await page.getByText(/sandbox/i).count()).toBe(0);
    await page.screenshot({ path: `${SHOTS}/go-live-transactions-empty.png`, fullPage: true });
    await page.context().close();
  });

  it("is gone from the live Overview once every check is ok", async () => {
    // A gateway configured for production (https address, SMTP) and a merchant that did everything the list asks.
    const paystack = await startFakePaystack({ secretKey: `sk_live_${"a1".repeat(20)}`, publicKey: `pk_live_${"b2".repeat(20)}` });
    const smtp = await startSmtpFake();
    const ready = await startTestGateway({
      env: { PUBLIC_BASE_URL: "https://pay.duka.co.ke", SMTP_URL: smtp.url, PAYSTACK_BASE_URL: paystack.url, RATE_LIMIT_ENABLED: "false", JOB_POLL_INTERVAL_MS: "100" },
    });
    try {
      const shop = await ready.createMerchant("Duka Tayari");
      const user = await ready.createUser(shop.id, "owner");
      // Its owner (the second one) adds a live Paystack channel, whose keys the provider accepts, and a live endpoint.
      await ready.createLiveChannel(shop, { name: "Duka cards", provider: "paystack", config: paystack.channelConfig() });
      const liveOwner = bearerClient(ready.url, await ready.signIn(shop.id, "owner", "live"));
      const endpoint = await liveOwner.post("/v1/webhooks", { url: "https://93.184.215.14/hooks" });
      expect(endpoint.status, endpoint.text).toBe(201);
      // The endpoint answered a live event with a 200 today, as the delivery job records it (no loopback receiver is a
      // public https address).
      const prisma = ready.gateway.db.prisma;
      const event = await prisma.event.create({ data: { merchantId: shop.id, mode: "live", type: "transaction.completed", payload: {} } });
      await prisma.webhookDelivery.create({
        data: { endpointId: endpoint.body.data.id, eventId: event.id, merchantId: shop.id, mode: "live", status: "succeeded", attempts: 1, lastStatusCode: 200, nextAttemptAt: null, deliveredAt: new Date() },
      });
      const report = await until(
        () => apiClient(ready.url, shop.liveKey).get("/v1/go-live"),
        (r) => r.body?.data?.ready === true,
      ).catch(async () => Promise.reject(new Error(`not ready: ${(await apiClient(ready.url, shop.liveKey).get("/v1/go-live")).text}`)));
      expect(report.body.data.checks.every((c: { ok: boolean }) => c.ok)).toBe(true);

      const page = await signedIn(ready, user);
      await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
      await page.locator(".stat-cards").waitFor();
      // The Overview in live mode asks for the checklist and, everything being ready, shows none.
      const answered = page.waitForResponse((r) => r.url().endsWith("/graphql") && (r.request().postData() ?? "").includes("DashboardGoLive"));
      await page.getByRole("group", { name: "Mode" }).getByRole("button", { name: "Live" }).click();
      await page.locator("#mode-badge.live").waitFor();
      const goLive = (await (await answered).json()) as { data: { goLive: { ready: boolean } } };
      expect(goLive.data.goLive.ready).toBe(true);
      await page.locator(".stat-cards").waitFor();
      // The answer has been read by the page: give it time to render what it would (a list shows within a frame).
      await page.waitForTimeout(1_000);
      expect(await page.locator("#go-live").count()).toBe(0);
      await page.screenshot({ path: `${SHOTS}/go-live-ready.png`, fullPage: true });
      await page.context().close();
    } finally {
      await ready.close();
      await smtp.close();
      await paystack.close();
    }
  });
});
