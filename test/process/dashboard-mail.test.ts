import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { confineToGateway, launchChromium, openSection } from "../support/browser.ts";
import { expectNoSeriousAxeViolations } from "../support/checkout-page.ts";
import { apiClient, bearerClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { solidPng } from "../support/png.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * E-mail in the dashboard, in a real Chromium against a gateway without an SMTP server (so test-mode e-mails are kept):
 * a test payment's receipt arrives in the Inbox and opens rendered (its HTML in a sandboxed frame, its text part); a
 * payment's page lists its e-mails, with why one was skipped, and an owner sends the receipt again; a user unticks a
 * notice on their profile; an owner sets the brand's receipt options and finds them after a reload. Checked against
 * the API too.
 */
const SHOTS = "/tmp/dashboard-shots";
/** The docs' pictures of the Inbox (docs/dashboard.md): rewritten only when asked (UPDATE_SCREENSHOTS=1), so a test run leaves the tree clean. */
const UPDATING = process.env.UPDATE_SCREENSHOTS === "1" && process.env.TEST_BACKEND === "pglite";
const shot = (name: string) => (UPDATING ? new URL(`../../src/dashboard/screenshot-${name}.png`, import.meta.url).pathname : `${SHOTS}/${name}.png`);

const MailOfPayment = graphql(`
  query DashboardMailOfPayment($reference: String) {
    mailMessages(transaction: $reference, first: 50) {
      __typename
      ... on MailMessagePage { total items { databaseId kind status toAddress lastError } }
    }
  }
`);
const MyOptOuts = graphql(`query DashboardMailOptOuts { currentUser { email mailOptOuts } }`);

describe("dashboard e-mail", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let owner: { id: number; email: string; password: string };
  /** A completed test payment with the payer's e-mail: its receipt is kept in the test inbox. */
  let reference: string;
  const errors: string[] = [];
  const offHost: string[] = [];
  const logo = solidPng(96, 48, [0x1a, 0x56, 0xdb]);

  const accessToken = async (user: { email: string; password: string }) => {
    const login = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password });
    expect(login.status, login.text).toBe(200);
    return login.body.data.access_token as string;
  };
  const mailOf = async (payment: string) => {
    const answer = await bearerClient(gw.url, await gw.signIn(merchant.id, "owner")).graphql(MailOfPayment, { reference: payment });
    const page = answer.body.data?.mailMessages;
    if (page?.__typename !== "MailMessagePage") throw new Error(`mailMessages answered ${answer.text}`);
    return page;
  };

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_PER_MINUTE: "2000" } })]);
    merchant = await createSandboxMerchant(gw, "Mama Mboga Groceries");
    owner = await gw.createUser(merchant.id, "owner");
    // A logo: the e-mail carries it as an inline attachment (cid:), which the inbox shows as the brand's logo.
    const uploaded = await apiClient(gw.url).raw("/v1/brand/logo", {
      method: "PUT",
      headers: { authorization: `Bearer ${await accessToken(owner)}`, "content-type": "image/png" },
      body: new Uint8Array(logo),
    });
    expect(uploaded.status, uploaded.text).toBe(200);
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(errors).toEqual([]);
    expect(offHost).toEqual([]);
  });

  /**
   * A page signed in through the dashboard's form at `path`, kept on the gateway, its errors recorded (the e-mail's
   * frame inherits the dashboard's CSP, whose style-src-attr lets the e-mail's inline style attributes apply).
   */
  async function signedIn(user: { email: string; password: string }, path = "", viewport = { width: 1280, height: 900 }): Promise<Page> {
    const context = await browser.newContext({ viewport });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, gw.url, offHost);
    page.on("pageerror", (error) => errors.push(error.message));
    page.on("console", (message) => {
      if (message.type() !== "error" || message.text().startsWith("Failed to load resource")) return;
      errors.push(`${message.location().url}: ${message.text()}`);
    });
    await page.goto(`${gw.url}/dashboard${path}`);
    await page.getByLabel("E-mail").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#merchant-name").filter({ hasNotText: "…" }).waitFor();
    return page;
  }

  const nav = (page: Page) => page.getByRole("navigation", { name: "Sections" });
  /** The nav's rows of links at this width (its links' distinct tops). */
  const navRows = (page: Page) => nav(page).getByRole("link").evaluateAll((links) => new Set(links.map((link) => Math.round(link.getBoundingClientRect().top))).size);

  it("a test payment's receipt is kept in the Inbox and opens rendered, in a sandboxed frame and as plain text", async () => {
    const page = await signedIn(owner);
    await openSection(page, "Inbox");
    await page.getByRole("heading", { name: "Inbox", level: 1 }).waitFor();
    expect(await page.title()).toMatch(/^Inbox · /);
    // Nothing yet: the empty state says why e-mails are here.
    await page.getByText("No SMTP server is configured, so test-mode e-mails are kept here instead of being sent.").waitFor();
    expect(await page.getByLabel("Status").inputValue()).toBe("kept");

    reference = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 123_450, description: "2 bags of maize flour" });
    // Its job keeps it a moment after the payment completes (the page also looks again when the payment's event comes).
    const receipt = page.locator('#mail-rows tr[data-kind="payment_receipt"]');
    await expect
      .poll(async () => {
        if ((await receipt.count()) === 0) await page.locator("#inbox-refresh:enabled").click();
        return receipt.count();
      })
      .toBe(1);
    const [stored] = (await mailOf(reference)).items;
    expect(stored).toMatchObject({ kind: "payment_receipt", status: "kept", toAddress: "payer@example.com" });
    expect(await receipt.getAttribute("data-id")).toBe(String(stored!.databaseId));
    expect(await receipt.locator('[data-label="To"]').textContent()).toBe("payer@example.com");
    expect(await receipt.locator('[data-label="Kind"]').textContent()).toBe("Payment receipt");
    expect(await receipt.locator('[data-label="Status"]').textContent()).toBe("Kept");

    await receipt.locator('[data-label="Subject"] a').click();
    await page.waitForURL(`**/dashboard/inbox/${stored!.databaseId}`);
    const frame = page.locator("#mail-frame");
    await frame.waitFor();
    // The HTML part as written, in a frame with every sandbox restriction: no scripts, an opaque origin.
    expect(await frame.getAttribute("sandbox")).toBe("");
    const srcdoc = (await frame.getAttribute("srcdoc"))!;
    expect(srcdoc).toContain(reference);
    expect(srcdoc).toContain("KES 1,234.50");
    expect(srcdoc).not.toContain("cid:");
    expect(await page.locator("#mail-to").textContent()).toBe("payer@example.com");
    expect(await page.locator("#mail-from").textContent()).toMatch(/^Payments <no-reply@localhost>$/);
    expect(await page.locator("#mail-subject").textContent()).toBeTruthy();
    // Focus moved to the message opened.
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("mail-subject");
    const rendered = page.frameLocator("#mail-frame");
    await rendered.getByText(reference).first().waitFor();
    expect(await rendered.locator("body").textContent()).toContain("KES 1,234.50");
    // The logo: the brand's, from the gateway, in place of the attachment.
    await expect.poll(() => rendered.locator("img").first().evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(96);
    const text = await page.locator("pre#mail-text").textContent();
    expect(text).toContain(reference);
    expect(text).toContain("KES 1,234.50");
    expect((await frame.boundingBox())!.width).toBeGreaterThanOrEqual(360);
    // The receipt's own row is marked as the one open.
    expect(await receipt.getAttribute("class")).toContain("selected");

    await expectNoSeriousAxeViolations(page, "inbox with a message open");
    await page.screenshot({ path: shot("inbox"), fullPage: true });

    // A phone: the message alone (the list behind "All e-mails"), the frame still 360 px wide, nothing sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await expect.poll(() => frame.boundingBox().then((box) => box!.width)).toBeGreaterThanOrEqual(360);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await page.locator(".inbox-list").isVisible()).toBe(false);
    await page.screenshot({ path: shot("inbox-phone"), fullPage: true });
    await page.getByRole("link", { name: "All e-mails" }).click();
    await receipt.waitFor();
    await page.setViewportSize({ width: 1280, height: 900 });

    // Other statuses: none of this merchant's e-mails failed.
    await page.getByLabel("Status").selectOption("failed");
    await page.getByText("No e-mails match this filter").waitFor();
    await page.getByLabel("Status").selectOption("");
    await receipt.waitFor();

    // The Inbox comes and goes with test mode, and takes no row of its own in the nav at 1280 px.
    const testRows = await navRows(page);
    await page.getByRole("group", { name: "Mode" }).getByRole("button", { name: "Live" }).click();
    await page.locator("#mode-badge", { hasText: "LIVE" }).waitFor();
    await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
    expect(await nav(page).getByRole("link", { name: "Inbox" }).count()).toBe(0);
    expect(await navRows(page)).toBe(testRows);
    await page.context().close();
  });

  it("a payment's page lists its e-mails, says why one was skipped, and an owner sends the receipt again", async () => {
    const page = await signedIn(owner, `/transactions/${reference}`);
    await page.getByRole("heading", { name: `Transaction ${reference}` }).waitFor();
    const rows = page.locator("#transaction-mails tr");
    await rows.first().waitFor();
    expect(await rows.count()).toBe(1);
    expect(await rows.first().getAttribute("data-status")).toBe("kept");
    expect(await rows.first().locator('[data-label="To"]').textContent()).toBe("payer@example.com");
    expect(await rows.first().locator('[data-label="Kind"] a').textContent()).toBe("Payment receipt");

    await page.getByRole("button", { name: "Resend receipt" }).click();
    await page.locator("#resend-receipt-status").getByText("Receipt queued for payer@example.com").waitFor();
    // The new one, newest first, is queued then kept by its job: the section looks again while one is queued.
    await expect.poll(() => rows.count()).toBe(2);
    await expect.poll(() => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-status")))).toEqual(["kept", "kept"]);
    await page.screenshot({ path: `${SHOTS}/transaction-mails.png`, fullPage: true });
    const messages = await mailOf(reference);
    expect(messages.total).toBe(2);
    expect(await rows.first().getAttribute("data-id")).toBe(String(messages.items[0]!.databaseId));
    // Each opens in the Inbox.
    await rows.first().locator('[data-label="Kind"] a').click();
    await page.waitForURL(`**/dashboard/inbox/${messages.items[0]!.databaseId}`);
    expect(await page.locator("#mail-frame").getAttribute("srcdoc")).toContain(reference);
    await page.context().close();

    // A payment whose e-mail is not an address (an older record): its receipt is skipped, with the reason, and not sent again.
    const init = await apiClient(gw.url, merchant.testKey).post("/api/transactions/initialize", { email: "payer@example.com", amount: 5_000 });
    expect(init.status, init.text).toBe(200);
    const odd = init.body.reference as string;
    await gw.gateway.db.prisma.transaction.update({ where: { reference: odd }, data: { email: "payer at example" } });
    const paid = await apiClient(gw.url).post(`/payment/checkout/${odd}/pay`, SANDBOX_CARD);
    expect(paid.status, paid.text).toBe(200);
    const oddPage = await signedIn(owner, `/transactions/${odd}`);
    const skipped = oddPage.locator('#transaction-mails tr[data-status="skipped"]');
    await skipped.waitFor();
    expect(await skipped.locator('[data-label="Status"]').textContent()).toBe(`Skippedthe payer's e-mail "payer at example" is not an e-mail address`);
    await oddPage.getByRole("button", { name: "Resend receipt" }).click();
    await oddPage.getByRole("alert").getByText("The payment has no e-mail address to send its receipt to").waitFor();
    await oddPage.screenshot({ path: `${SHOTS}/transaction-mails-skipped.png`, fullPage: true });
    expect(await oddPage.locator("#transaction-mails tr").count()).toBe(1);
    await oddPage.context().close();

    // Anyone else reads the e-mails but has no button to send them.
    const viewer = await gw.createUser(merchant.id, "viewer");
    const viewerPage = await signedIn(viewer, `/transactions/${reference}`);
    await viewerPage.locator("#transaction-mails tr").nth(1).waitFor();
    expect(await viewerPage.getByRole("button", { name: "Resend receipt" }).count()).toBe(0);
    await viewerPage.context().close();
  });

  it("a user unticks a notice on their profile, reached from their e-mail in the header", async () => {
    const page = await signedIn(owner);
    await page.locator("#user").getByRole("link", { name: owner.email }).click();
    await page.getByRole("heading", { name: "Your profile", level: 1 }).waitFor();
    expect(await page.title()).toMatch(/^Your profile · /);
    const form = page.getByRole("form", { name: "E-mail notices" });
    const wanted = form.getByRole("group", { name: "E-mail me when…" }).getByRole("checkbox");
    // The heading shows before the profile's query answers; the form follows it.
    await wanted.first().waitFor();
    expect(await wanted.count()).toBe(6);
    expect(await wanted.evaluateAll((boxes) => boxes.every((box) => (box as HTMLInputElement).checked))).toBe(true);
    await form.getByLabel("a payer's bank disputes a payment").uncheck();
    await form.getByRole("button", { name: "Save notices" }).click();
    await form.locator("#notices-saved").waitFor();
    await page.screenshot({ path: `${SHOTS}/profile-notices.png`, fullPage: true });

    const me = await bearerClient(gw.url, await accessToken(owner)).graphql(MyOptOuts);
    expect(me.body.data?.currentUser).toEqual({ email: owner.email, mailOptOuts: ["dispute_opened"] });

    await page.reload();
    await page.getByRole("heading", { name: "Your profile", level: 1 }).waitFor();
    await expect.poll(() => form.getByLabel("a payer's bank disputes a payment").isChecked()).toBe(false);
    expect(await form.getByLabel("a payout fails").isChecked()).toBe(true);
    await page.context().close();
  });

  // Last: payers get no receipt from here on.
  it("an owner sets the brand's receipts and e-mail options, and finds them after a reload", async () => {
    const page = await signedIn(owner, "/brand");
    await page.getByRole("heading", { name: "Brand", level: 1 }).waitFor();
    const form = page.getByRole("form", { name: "Brand settings" });
    const mail = form.getByRole("group", { name: "Receipts and e-mail" });
    await mail.waitFor();
    expect(await mail.getByLabel("E-mail payers a receipt").isChecked()).toBe(true);
    expect(await mail.getByLabel("Time zone").inputValue()).toBe("UTC");
    expect(await mail.getByLabel("Language").inputValue()).toBe("en");
    const zones = await page.locator("#brand-timezones option").evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).value));
    expect(zones).toEqual(expect.arrayContaining(["Africa/Nairobi", "UTC", "Africa/Lagos", "Africa/Johannesburg", "Europe/London"]));

    await mail.getByLabel("E-mail payers a receipt").uncheck();
    await mail.getByLabel("Reply-to address").fill("majibu@mamamboga.example");
    await mail.getByLabel("Website").fill("http://mamamboga.example");
    await mail.getByLabel("Time zone").fill("Africa/Nairobi");
    await mail.getByLabel("Language").selectOption({ label: "Kiswahili" });
    // The gateway's refusal is said in the form, naming the field; nothing is saved.
    await form.getByRole("button", { name: "Save brand" }).click();
    await form.getByRole("alert").getByText(/^website: must be an https:\/\/ address/).waitFor();
    expect((await gw.gateway.services.brand.mailIdentity(merchant.id))!.receiptsEnabled).toBe(true);

    await mail.getByLabel("Website").fill("https://mamamboga.example");
    await form.getByRole("button", { name: "Save brand" }).click();
    await form.locator("#brand-saved").waitFor();
    expect(await gw.gateway.services.brand.mailIdentity(merchant.id)).toMatchObject({
      receiptsEnabled: false,
      replyTo: "majibu@mamamboga.example",
      website: "https://mamamboga.example/",
      timezone: "Africa/Nairobi",
      language: "sw",
    });

    await page.reload();
    await page.getByRole("heading", { name: "Brand", level: 1 }).waitFor();
    await expect.poll(() => mail.getByLabel("Reply-to address").inputValue()).toBe("majibu@mamamboga.example");
    expect(await mail.getByLabel("E-mail payers a receipt").isChecked()).toBe(false);
    expect(await mail.getByLabel("Website").inputValue()).toBe("https://mamamboga.example/");
    expect(await mail.getByLabel("Time zone").inputValue()).toBe("Africa/Nairobi");
    expect(await mail.getByLabel("Language").inputValue()).toBe("sw");
    await page.screenshot({ path: `${SHOTS}/brand-receipts.png`, fullPage: true });
    await page.context().close();

    // Receipts off: a payment now writes none.
    const quiet = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 700 });
    expect((await mailOf(quiet)).items).toEqual([]);
  });
});
