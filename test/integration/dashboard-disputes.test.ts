import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, signedInLive } from "../support/browser.ts";
import { apiClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { solidPng } from "../support/png.ts";
import { BROWSER_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * Disputes in the dashboard, in a real Chromium against the running gateway (sandbox): a payment with the disputing
 * test card is disputed; the owner finds it under Disputes with the time left in words, answers it from its page with
 * evidence and a real PNG (uploaded multipart to /v1/disputes/:id/files), sees it under review and then won; a second
 * is accepted from its page and lost; the API's refusals show in the page; a viewer gets no form or buttons; the
 * transaction carries a "Disputed" badge and links its disputes. Screenshots go to /tmp/shots/disputes-*.png.
 */
const SHOTS = "/tmp/shots";
const DISPUTE_CARD = "4000000000000259";

describe("dashboard disputes", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let api: ReturnType<typeof apiClient>;
  let owner: { email: string; password: string };
  const offHost: string[] = [];
  const browserErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    // Disputes open (and submitted evidence is decided) 300 ms later; the default 48-hour deadline.
    gw = await startTestGateway({ env: { SANDBOX_DISPUTE_DELAY_MS: "300", JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_PER_MINUTE: "2000" } });
    merchant = await createSandboxMerchant(gw, "Duka la Mama");
    api = apiClient(gw.url, merchant.testKey);
    owner = await gw.createUser(merchant.id, "owner");
  });

  afterAll(async () => {
    await browser?.close();
    await expectCleanLedger(gw);
    await gw?.close();
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  const signedIn = (user: { email: string; password: string }, path: string) => signedInLive(browser, gw.url, user, path, { offHost, errors: browserErrors });

  /** A payment of the disputing card, and its dispute once the sandbox opened it (as /v1/disputes shows it). */
  async function disputed(amount: number): Promise<{ reference: string; dispute: { id: string; due_by: string } }> {
    const reference = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount, description: "Kikapu" }, { ...SANDBOX_CARD, card_number: DISPUTE_CARD });
    const listed = await until(() => api.get(`/v1/disputes?transaction=${reference}`), (r) => r.body?.data?.length === 1);
    return { reference, dispute: listed.body.data[0] };
  }

  const fieldsText = (page: Page) => page.locator("#dispute-fields").textContent();

  it("an owner finds a dispute with its time left, answers it with evidence and a PNG, and sees it under review, then won", async () => {
    const { reference, dispute } = await disputed(5_000);
    const page = await signedIn(owner, "/overview");
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Disputes" }).click();
    await page.getByRole("heading", { name: "Disputes" }).waitFor();

    // Listed with the time left in words: a 48-hour deadline opened moments ago has 47 whole hours left.
    const row = page.locator(`#disputes-rows tr[data-reference="${dispute.id}"]`);
    await row.waitFor();
    expect(await row.locator('[data-label="Transaction"]').textContent()).toBe(reference);
    expect(await row.locator('[data-label="Amount"]').textContent()).toBe("KES 50.00");
    expect(await row.locator('[data-label="Reason"]').textContent()).toBe("Fraudulent");
    expect(await row.locator('[data-label="Status"]').textContent()).toBe("Needs response");
    expect(await row.locator('[data-label="Deadline"] .deadline').textContent()).toBe("Due in 47 hours");
    expect(await page.textContent("#disputes-count")).toBe("1 dispute");
    await page.screenshot({ path: `${SHOTS}/disputes-list.png`, fullPage: true });

    await row.getByRole("link", { name: dispute.id }).click();
    await page.getByRole("heading", { name: `Dispute ${dispute.id}` }).waitFor();
    expect(await fieldsText(page)).toContain("StatusNeeds response");
    expect(await fieldsText(page)).toContain("Time leftDue in 47 hours");
    expect(await fieldsText(page)).toContain(`Transaction${reference}KES 50.00 from payer@example.com`);
    expect(await page.textContent("#dispute-messages")).toContain("The cardholder does not recognise this payment.");
    // The payer's e-mail is offered from the payment.
    expect(await page.getByLabel("Customer e-mail").inputValue()).toBe("payer@example.com");

    // A file the API refuses (not a PDF, PNG or JPEG by its content): its message, in the form.
    const form = page.locator("#evidence-form");
    await page.setInputFiles("#evidence-file", { name: "notes.png", mimeType: "image/png", buffer: Buffer.from("not a picture at all") });
    await expect.poll(() => form.locator("[role=alert]").textContent()).toBe("file: must be a PDF, PNG or JPEG file (told by its content, not its name)");
    // A real PNG: uploaded at once, listed, and named with the evidence.
    await page.setInputFiles("#evidence-file", { name: "delivery-note.png", mimeType: "image/png", buffer: solidPng(64, 48, [36, 84, 214]) });
    await page.locator("#evidence-files li", { hasText: "delivery-note.png" }).waitFor();
    expect(await form.locator("[role=alert]").count()).toBe(0);

    // Submitting needs the phone (said before anything is sent); a draft does not need it.
    await page.getByLabel("Customer name").fill("Jane Payer");
    await page.getByLabel("Service details").fill("Two kikapu baskets, delivered to the door and signed for; winning_evidence");
    await page.getByLabel("Delivery address (optional)").fill("Moi Avenue 12, Nairobi");
    await page.getByLabel("Delivery date (optional)").fill("2025-03-14");
    await page.getByRole("button", { name: "Submit evidence" }).click();
    await expect.poll(() => form.locator("[role=alert]").textContent()).toBe("To submit, fill in the customer phone (or save a draft for now).");
    await page.getByRole("button", { name: "Save draft" }).click();
    await form.locator("[role=status]", { hasText: "Draft saved" }).waitFor();
    const draft = await api.get(`/v1/disputes/${dispute.id}`);
    expect(draft.body.data).toMatchObject({ status: "needs_response", evidence: { customer_name: "Jane Payer", customer_phone: null, delivery_date: "2025-03-14" } });
    expect(draft.body.data.files).toEqual([{ id: expect.stringMatching(/^df_/), name: "delivery-note.png", size: expect.any(Number), content_type: "image/png" }]);
    expect(draft.body.data.evidence.uploaded_files).toEqual([draft.body.data.files[0].id]);
    await page.getByLabel("Customer phone").fill("254712345678");
    await page.screenshot({ path: `${SHOTS}/disputes-form.png`, fullPage: true });

    await page.getByRole("button", { name: "Submit evidence" }).click();
    await page.locator("#dispute-fields .badge", { hasText: "Under review" }).waitFor();
    expect(await page.locator("#evidence-form").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Accept dispute" }).count()).toBe(0);
    expect(await page.textContent("#dispute-evidence")).toContain("winning_evidence");
    expect(await page.textContent("#dispute-evidence")).toContain("delivery-note.png");

    // The sandbox decides 300 ms later: won, on this page without a reload (dispute.closed), and after one.
    await page.locator("#dispute-fields .badge", { hasText: "Won" }).waitFor({ timeout: BROWSER_MS });
    const won = await api.get(`/v1/disputes/${dispute.id}`);
    expect(won.body.data).toMatchObject({ status: "won", evidence: { customer_phone: "254712345678", uploaded_files: [draft.body.data.files[0].id] } });
    await page.reload();
    await page.locator("#dispute-fields .badge", { hasText: "Won" }).waitFor();
    expect(await page.textContent("#dispute-messages")).toContain("The evidence shows the payment was authorised.");
    expect(await fieldsText(page)).toMatch(/Closed\d/);
    expect(await fieldsText(page)).not.toContain("Time left");
    await page.screenshot({ path: `${SHOTS}/disputes-closed.png`, fullPage: true });
    // On a phone the page fits its width (no sideways scrolling).
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
    await page.screenshot({ path: `${SHOTS}/disputes-phone-closed.png`, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    // Its transaction: the badge, and its disputes linked.
    await page.locator("#dispute-fields").getByRole("link", { name: reference }).click();
    await page.getByRole("heading", { name: `Transaction ${reference}` }).waitFor();
    expect(await page.textContent("#transaction-fields")).toContain("StatusCompleted Disputed: won");
    const disputeRow = page.locator(`#transaction-disputes tr[data-reference="${dispute.id}"]`);
    expect(await disputeRow.locator('[data-label="Status"]').textContent()).toBe("Won");
    // Its events include the dispute's, each with the webhook body its endpoints are sent.
    const events = page.locator("#transaction-events li");
    expect((await events.allInnerTexts()).join("\n")).toMatch(/transaction\.completed[\s\S]*dispute\.created[\s\S]*dispute\.closed/);
    const closed = events.filter({ hasText: "dispute.closed" });
    expect(await closed.textContent()).toContain(dispute.id);
    await closed.locator("summary").click();
    expect(JSON.parse((await closed.locator("pre").textContent())!)).toMatchObject({ type: "dispute.closed", data: { id: dispute.id, status: "won", transaction_reference: reference } });
    await page.screenshot({ path: `${SHOTS}/disputes-transaction.png`, fullPage: true });
    await disputeRow.getByRole("link", { name: dispute.id }).click();
    await page.getByRole("heading", { name: `Dispute ${dispute.id}` }).waitFor();
    await page.getByRole("link", { name: "← All disputes" }).click();
    await page.locator(`#disputes-rows tr[data-reference="${dispute.id}"] .deadline`, { hasText: /^Won / }).waitFor();
    // And in the transaction list.
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Transactions" }).click();
    const listRow = page.locator(`#transactions-rows tr[data-reference="${reference}"]`);
    expect(await listRow.locator('[data-label="Status"]').textContent()).toBe("Completed Disputed: won");
    await page.context().close();
  });

  it("a dispute accepted from its page is lost; while it is open its transaction offers no refund", async () => {
    const { reference, dispute } = await disputed(3_000);
    const page = await signedIn(owner, `/transactions/${reference}`);
    await page.getByRole("heading", { name: `Transaction ${reference}` }).waitFor();
    await page.locator("#transaction-fields .badge", { hasText: "Disputed: needs response" }).waitFor();
    expect(await page.getByRole("button", { name: "Refund", exact: true }).count()).toBe(0);

    await page.locator(`#transaction-disputes tr[data-reference="${dispute.id}"]`).getByRole("link", { name: dispute.id }).click();
    await page.getByRole("heading", { name: `Dispute ${dispute.id}` }).waitFor();
    await page.getByRole("button", { name: "Accept dispute" }).click();
    // Asked once more, inline; Cancel leaves it open.
    expect(await page.getByRole("group", { name: /^Accept it\? The payer keeps KES 30.00/ }).count()).toBe(1);
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("button", { name: "Accept dispute" }).click();
    await page.getByRole("button", { name: "Yes, accept" }).click();
    await page.locator("#dispute-fields .badge", { hasText: "Lost" }).waitFor();
    expect(await page.locator("#evidence-form").count()).toBe(0);
    expect(await page.locator("main button").count()).toBe(0);
    expect((await api.get(`/v1/disputes/${dispute.id}`)).body.data.status).toBe("lost");
    await page.screenshot({ path: `${SHOTS}/disputes-lost.png`, fullPage: true });

    // The list filtered by status: among the lost, not among those needing a response.
    await page.getByRole("link", { name: "← All disputes" }).click();
    await page.getByLabel("Status").selectOption("lost");
    await expect.poll(() => page.locator('#disputes-rows tr:not([data-status="lost"])').count()).toBe(0);
    await page.locator(`#disputes-rows tr[data-reference="${dispute.id}"][data-status="lost"]`).waitFor();
    await page.getByLabel("Status").selectOption("needs_response");
    await expect.poll(() => page.locator('#disputes-rows tr:not([data-status="needs_response"])').count()).toBe(0);
    expect(await page.locator(`#disputes-rows tr[data-reference="${dispute.id}"]`).count()).toBe(0);
    await page.context().close();
  });

  it("a viewer reads a dispute but gets no form or buttons", async () => {
    const { dispute } = await disputed(2_000);
    const viewer = await signedIn(await gw.createUser(merchant.id, "viewer"), `/disputes/${dispute.id}`);
    await viewer.getByRole("heading", { name: `Dispute ${dispute.id}` }).waitFor();
    await viewer.locator("#dispute-messages li").first().waitFor();
    expect(await viewer.locator("#dispute-fields .badge").first().textContent()).toBe("Needs response");
    expect(await viewer.locator("#evidence-form").count()).toBe(0);
    expect(await viewer.locator("main button").count()).toBe(0);
    expect(await viewer.locator("main input, main textarea").count()).toBe(0);
    await viewer.context().close();
  });

  it("Balances shows what open disputes hold and what lost ones took back (the columns appear once a dispute has held money)", async () => {
    // After the tests above: one dispute won (released), one lost (KES 30.00 taken back), one open (KES 20.00 held).
    const [balance] = (await api.get("/v1/balance")).body.data;
    expect(balance).toMatchObject({ disputed: 2_000, charged_back: 3_000 });
    const kes = (minor: number) => `KES ${(minor / 100).toLocaleString("en", { minimumFractionDigits: 2 })}`;
    const page = await signedIn(owner, "/balances");
    await page.getByRole("heading", { name: "Balances", level: 1 }).waitFor();
    const row = page.locator(`#balance-rows tr[data-channel="${balance.payment_channel_id}"]`);
    await row.waitFor();
    expect(await row.locator('[data-label="Disputed"]').textContent()).toBe("KES 20.00");
    expect(await row.locator('[data-label="Charged back"]').textContent()).toBe("KES 30.00");
    expect(await row.locator('[data-label="Available"]').textContent()).toBe(kes(balance.available));
    expect(await row.locator('[data-label="Fees"]').textContent()).toBe(kes(balance.fees));
    // The balance transactions filter by a dispute's entries too: a hold for each of the three disputes.
    await page.getByLabel("Type").selectOption("dispute_hold");
    await expect.poll(() => page.locator("#balance-transaction-rows tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-type")))).toEqual(["dispute_hold", "dispute_hold", "dispute_hold"]);
    expect(await page.locator("#balance-transactions-export").getAttribute("href")).toBe("/v1/reports/balance-transactions.csv?type=dispute_hold");
    await page.screenshot({ path: `${SHOTS}/disputes-balances.png`, fullPage: true });
    await page.context().close();
  });
});
