import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { confineToGateway, launchChromium, recordPageErrors } from "../support/browser.ts";
import { expectNoSeriousAxeViolations } from "../support/checkout-page.ts";
import { apiClient, bearerClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { until } from "../support/wait.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The merchant's daily pages (issue 41) in a real Chromium at 1280 and 390 px: the nav on one line (a Menu on
 * phones), Refunds with filters and live status, Balances apart from the Overview, an owner's payout with its
 * confirmation step paying once for two fast clicks (both sent, with the form's one Idempotency-Key), payment links' QR,
 * Copy and payments, the webhook test event and its delivery's Details, and axe on every dashboard page in both modes
 * (the sign-in page and each detail page included). Screenshots go to /tmp/dashboard-shots.
 */
const SHOTS = "/tmp/dashboard-shots";

describe("dashboard daily pages", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant & { channelId: number };
  let api: ReturnType<typeof apiClient>;
  let owner: { email: string; password: string };
  let viewer: { email: string; password: string };
  let receiver: WebhookReceiver;
  const offHost: string[] = [];
  const errors: string[] = [];
  let paid: string;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    [browser, gw, receiver] = await Promise.all([
      launchChromium(),
      startTestGateway({ env: { SANDBOX_REFUND_DELAY_MS: "1500", SANDBOX_DISPUTE_DELAY_MS: "300", WEBHOOK_ALLOW_PRIVATE_URLS: "true", JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_PER_MINUTE: "5000" } }),
      startWebhookReceiver(),
    ]);
    merchant = await createSandboxMerchant(gw, "Duka Daily");
    api = apiClient(gw.url, merchant.testKey);
    owner = await gw.createUser(merchant.id, "owner");
    viewer = await gw.createUser(merchant.id, "viewer");
    paid = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 500_000, description: "Gunia la mchele" });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    await receiver?.close();
    expect(offHost).toEqual([]);
    expect(errors).toEqual([]);
  });

  async function signedIn(user: { email: string; password: string }, path: string, width = 1280): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, gw.url, offHost);
    recordPageErrors(page, errors);
    await page.goto(`${gw.url}/dashboard${path}`);
    await page.getByLabel("E-mail").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('#live-status[data-status="live"]').waitFor();
    return page;
  }
  const shot = (page: Page, name: string) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
  const nav = (page: Page) => page.getByRole("navigation", { name: "Sections" });

  it("the nav fits one line at 1280 px, the rest behind More; at 390 px a Menu lists every section", async () => {
    const page = await signedIn(owner, "/overview");
    const tops = await nav(page).locator(".section-links > a, .section-links > .more").evaluateAll((nodes) => nodes.map((n) => (n as HTMLElement).getBoundingClientRect().top));
    expect(new Set(tops).size).toBe(1);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1280);
    // The Overview keeps a short view of the balances, and the way to the page.
    await page.locator("#balance-summary-rows tr").first().waitFor();
    await page.locator("#more-toggle").click();
    await shot(page, "daily-nav-more-1280");
    await nav(page).getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
    expect(await page.locator("#more-toggle").textContent()).toContain("Webhooks");
    await page.context().close();

    const phone = await signedIn(owner, "/overview", 390);
    expect(await nav(phone).getByRole("link", { name: "Refunds" }).isVisible()).toBe(false);
    await phone.locator("#menu-toggle").click();
    expect(await phone.locator("#menu-toggle").getAttribute("aria-expanded")).toBe("true");
    await shot(phone, "daily-nav-menu-390");
    await nav(phone).getByRole("link", { name: "Brand" }).click();
    await phone.getByRole("heading", { name: "Brand", level: 1 }).waitFor();
    expect(await nav(phone).getByRole("link", { name: "Refunds" }).isVisible()).toBe(false);
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await phone.context().close();
  });

  it("Refunds lists every refund, filters by status, and shows a new refund go from pending to completed", async () => {
    const page = await signedIn(owner, "/refunds");
    await page.getByRole("heading", { name: "Refunds", level: 1 }).waitFor();
    const made = await api.post("/v1/refunds", { transaction: paid, amount: 10_000 });
    expect(made.status, made.text).toBe(201);
    const reference = made.body.data.reference as string;
    const row = page.locator(`#refund-rows tr[data-reference="${reference}"]`);
    await row.waitFor();
    await page.locator(`#refund-rows tr[data-reference="${reference}"][data-status="completed"]`).waitFor({ timeout: BROWSER_MS });
    expect(await row.locator('[data-label="Amount"]').textContent()).toBe("KES 100.00");
    expect(await row.locator('[data-label="Payment"] a').textContent()).toBe(paid);
    await page.getByLabel("Status").selectOption("failed");
    await page.getByText("No refunds match these filters").waitFor();
    await page.getByLabel("Status").selectOption("completed");
    await row.waitFor();
    await shot(page, "daily-refunds-1280");
    await page.context().close();

    const phone = await signedIn(owner, "/refunds", 390);
    await phone.locator(`#refund-rows tr[data-reference="${reference}"]`).waitFor();
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(phone, "daily-refunds-390");
    await phone.context().close();
  });

  it("Balances shows each channel and its balance transactions, apart from the Overview", async () => {
    for (const width of [1280, 390]) {
      const page = await signedIn(owner, "/balances", width);
      await page.getByRole("heading", { name: "Balances", level: 1 }).waitFor();
      const row = page.locator(`#balance-rows tr[data-channel="${merchant.channelId}"]`);
      await row.waitFor();
      expect(await row.locator('[data-label="Collected"]').textContent()).toBe("KES 5,000.00");
      await page.locator("#balance-transaction-rows tr").first().waitFor();
      expect(await page.locator("#balance-transactions-export").getAttribute("href")).toBe("/v1/reports/balance-transactions.csv");
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await shot(page, `daily-balances-${width}`);
      await page.context().close();
    }
  });

  it("an owner sends a payout after a confirmation that repeats it; two fast clicks on Confirm pay once; a viewer has no form", async () => {
    const page = await signedIn(owner, "/payouts");
    // Every createPayout the page sends, with its Idempotency-Key.
    const payoutRequests: (string | undefined)[] = [];
    page.on("request", (request) => {
      if (request.url().endsWith("/graphql") && request.method() === "POST" && (request.postData() ?? "").includes("createPayout")) payoutRequests.push(request.headers()["idempotency-key"]);
    });
    await page.locator("#send-payout").click();
    await page.getByLabel("Amount (KES)").fill("150");
    await page.getByLabel("Recipient's M-Pesa phone").fill("0708374149");
    await page.getByLabel("Reason (sent as the payout's remarks)").fill("Supplier: mchele");
    await shot(page, "daily-payout-form-1280");
    await expectNoSeriousAxeViolations(page, "payout form at 1280 px");
    await page.getByRole("button", { name: "Review payout" }).click();
    expect(await page.locator("#payout-confirm-amount").textContent()).toBe("KES 150.00");
    expect(await page.locator("#payout-confirm-recipient").textContent()).toBe("0708374149");
    expect(await page.locator("#payout-confirm-channel").textContent()).toContain("Sandbox");
    await shot(page, "daily-payout-confirm-1280");
    await expectNoSeriousAxeViolations(page, "payout confirmation at 1280 px");
    // Two clicks in the same task: both reach the handler before the button can be disabled.
    await page.locator("#payout-confirm button[type=submit]").evaluate((button: HTMLButtonElement) => {
      button.click();
      button.click();
    });
    await page.locator("#payout-rows tr").first().waitFor();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const payouts = await gw.gateway.db.prisma.payout.findMany({ where: { merchantId: merchant.id } });
    expect(payouts).toHaveLength(1);
    expect(payouts[0]!.amount).toBe(15_000n);
    expect(await page.locator("#payout-rows tr").count()).toBe(1);
    expect(await page.locator("[role=alert]").count()).toBe(0);
    // Both clicks reached the gateway, with the form's one key: the key, not a disabled button, made them one payout.
    expect(payoutRequests.length).toBeGreaterThanOrEqual(2);
    expect(payoutRequests[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(payoutRequests)).toEqual(new Set([payoutRequests[0]]));
    await shot(page, "daily-payouts-1280");
    await page.context().close();

    const phone = await signedIn(owner, "/payouts", 390);
    await phone.locator("#send-payout").click();
    await phone.getByLabel("Amount (KES)").fill("200");
    await phone.getByLabel("Recipient's M-Pesa phone").fill("0708374149");
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(phone, "daily-payout-form-390");
    await phone.getByRole("button", { name: "Review payout" }).click();
    expect(await phone.locator("#payout-confirm-amount").textContent()).toBe("KES 200.00");
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(phone, "daily-payout-confirm-390");
    await expectNoSeriousAxeViolations(phone, "payout confirmation at 390 px");
    await phone.context().close();

    const reader = await signedIn(viewer, "/payouts");
    await reader.locator("#payout-rows tr").first().waitFor();
    expect(await reader.locator("#send-payout").count()).toBe(0);
    await reader.context().close();
  });

  it("payment links: a QR code, Copy in the list, the payments a link took, no Deactivate once a single-use link is used", async () => {
    const created = await api.post("/v1/payment-links", { amount: 25_000, currency: "KES", description: "Kikapu cha sokoni" });
    expect(created.status, created.text).toBe(201);
    const link = created.body.data as { id: number; slug: string; url: string };
    const unused = (await api.post("/v1/payment-links", { amount: 5_000, currency: "KES", description: "Maziwa" })).body.data as { slug: string };
    // A payer opens the link and goes on to pay: the link is used.
    const form = await fetch(`${gw.url}/pay/${link.slug}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "email=mama%40example.com", redirect: "manual" });
    expect(form.status).toBe(303);
    const reference = decodeURIComponent(form.headers.get("location")!.split("/").pop()!.split("?")[0]!);

    const page = await signedIn(owner, "/payment-links");
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
    const row = page.locator(`#payment-links tr[data-slug="${link.slug}"]`);
    await row.waitFor();
    expect(await row.getAttribute("data-state")).toBe("used");
    expect(await row.getByRole("button", { name: "Deactivate" }).count()).toBe(0);
    expect(await page.locator(`#payment-links tr[data-slug="${unused.slug}"]`).getByRole("button", { name: "Deactivate" }).count()).toBe(1);
    await page.locator(`#copy-${link.slug}`).click();
    await expect.poll(() => page.locator(`#copy-${link.slug}`).textContent()).toBe("Copied");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(link.url);
    await row.getByRole("button", { name: "QR and payments" }).click();
    const qr = page.locator("#payment-link-detail img.qr");
    await qr.waitFor();
    expect(await qr.getAttribute("src")).toMatch(/^data:image\/svg\+xml/);
    expect(await qr.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBeGreaterThan(0);
    await page.locator(`#payment-link-payments tr[data-reference="${reference}"]`).waitFor();
    await shot(page, "daily-payment-links-1280");
    await expectNoSeriousAxeViolations(page, "payment link's QR and payments at 1280 px");
    await page.context().close();

    const phone = await signedIn(owner, "/payment-links", 390);
    await phone.locator(`#payment-links tr[data-slug="${link.slug}"]`).getByRole("button", { name: "QR and payments" }).click();
    await phone.locator("#payment-link-detail img.qr").waitFor();
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(phone, "daily-payment-links-390");
    await expectNoSeriousAxeViolations(phone, "payment link's QR and payments at 390 px");
    await phone.context().close();
  });

  it("webhooks: Send test event delivers a signed webhook.test to that one endpoint, listed with the deliveries", async () => {
    const quiet = await startWebhookReceiver();
    try {
      for (const url of [receiver.url, quiet.url]) expect((await api.post("/v1/webhooks", { url })).status).toBe(201);
      const page = await signedIn(owner, "/webhooks");
      await page.getByRole("button", { name: `Send test event to ${receiver.url}` }).click();
      await expect.poll(() => receiver.received.length, { timeout: BROWSER_MS }).toBe(1);
      const sent = receiver.received[0]!;
      expect(sent.json.type).toBe("webhook.test");
      expect(sent.headers["webhook-signature"]).toMatch(/^v1,/);
      expect(quiet.received).toHaveLength(0);
      await expect
        .poll(async () => (await page.locator("table").last().textContent()) ?? "", { timeout: BROWSER_MS })
        .toContain("webhook.test");
      await shot(page, "daily-webhooks-1280");
      await page.context().close();
      const phone = await signedIn(owner, "/webhooks", 390);
      await phone.getByRole("button", { name: `Send test event to ${receiver.url}` }).waitFor();
      // The test event's delivery: its Details show the request it sent and what the endpoint answered.
      await phone.getByLabel(`Details of webhook.test to ${receiver.url}`).click();
      const details = phone.locator("details.delivery-details[open]");
      expect(JSON.parse((await details.locator('[data-part="request-body"]').textContent())!)).toMatchObject({ type: "webhook.test" });
      expect(await details.textContent()).toContain("HTTP 200");
      expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await shot(phone, "daily-webhooks-390");
      await expectNoSeriousAxeViolations(phone, "webhook delivery details at 390 px");
      await phone.context().close();
    } finally {
      await quiet.close();
    }
  });

  it("axe finds nothing serious or critical on any dashboard page, in test and live mode", async () => {
    // A test-mode object behind each detail page: a dispute (the disputing test card), a customer, a reconciliation, a kept e-mail.
    const disputedPayment = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 2_000 }, { ...SANDBOX_CARD, card_number: "4000000000000259" });
    const dispute = (await until(() => api.get(`/v1/disputes?transaction=${disputedPayment}`), (r) => r.body?.data?.length === 1)).body.data[0].id as string;
    const customer = await api.post("/v1/customers", { email: "mteja@example.com", first_name: "Amina" });
    expect(customer.status, customer.text).toBe(201);
    const ownerApi = bearerClient(gw.url, await gw.signIn(merchant.id, "owner"));
    const run = await ownerApi.post("/graphql", {
      query: "mutation($input: RunReconciliationInput!) { runReconciliation(input: $input) { __typename ... on Reconciliation { databaseId } ... on Error { message } } }",
      variables: { input: { date: new Date().toISOString().slice(0, 10), paymentChannelId: merchant.channelId } },
    });
    expect(run.body.data?.runReconciliation?.__typename, run.text).toBe("Reconciliation");
    const mails = await until(
      () => api.post("/graphql", { query: '{ mailMessages(status: "kept", first: 1) { ... on MailMessagePage { items { databaseId } } } }' }),
      (r) => r.body.data?.mailMessages?.items?.length === 1,
    );
    const testOnly = [
      `/transactions/${paid}`,
      `/disputes/${dispute}`,
      `/customers/${customer.body.data.id}`,
      `/reconciliations/${run.body.data.runReconciliation.databaseId}`,
      "/inbox",
      `/inbox/${mails.body.data.mailMessages.items[0].databaseId}`,
    ];
    const routes = ["/overview", "/transactions", "/refunds", "/balances", "/payouts", "/payment-links", "/disputes", "/customers", "/subscriptions", "/plans", "/channels", "/api-keys", "/webhooks", "/reconciliations", "/users", "/brand", "/profile"];

    // The sign-in page, at both widths.
    for (const width of [1280, 390]) {
      const context = await browser.newContext({ viewport: { width, height: 900 } });
      context.setDefaultTimeout(BROWSER_MS);
      const signIn = await context.newPage();
      await confineToGateway(signIn, gw.url, offHost);
      await signIn.goto(`${gw.url}/dashboard/overview`);
      await signIn.getByLabel("E-mail").waitFor();
      await expectNoSeriousAxeViolations(signIn, `sign-in page at ${width} px`);
      await shot(signIn, `daily-sign-in-${width}`);
      await context.close();
    }

    const page = await signedIn(owner, "/overview");
    for (const mode of ["test", "live"] as const) {
      if (mode === "live") {
        await page.locator(".mode-switch").getByRole("button", { name: "Live" }).click();
        await page.locator("#mode-badge.live").waitFor();
      }
      for (const route of mode === "test" ? [...routes, ...testOnly] : routes) {
        await page.evaluate((path) => {
          history.pushState(null, "", `/dashboard${path}`);
          dispatchEvent(new PopStateEvent("popstate"));
        }, route);
        await page.locator("main h1").waitFor();
        await page.waitForFunction(() => !document.querySelector("main [aria-busy=true], main .loading"));
        if (route.startsWith("/inbox/")) await page.locator("#mail-view").waitFor();
        // A detail page shows its object, not "not found".
        if (/^\/(disputes|customers|reconciliations)\/./.test(route)) expect(await page.locator("main h1").textContent(), route).not.toMatch(/not found/i);
        await expectNoSeriousAxeViolations(page, `${mode} ${route}`);
      }
    }
    await page.context().close();
  }, 300_000);
});
