import { mkdirSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, signedInLive, openSection } from "../support/browser.ts";
import { apiClient } from "../support/gateway.ts";
import { withSandboxMerchants, type SandboxMerchants } from "../support/sandbox-merchants.ts";
import { until } from "../support/wait.ts";

/**
 * Recurring billing in the dashboard, in a real Chromium against the running gateway (sandbox): customers, saved cards,
 * plans and subscriptions are made through the API (a card is saved by paying once at the real checkout); the owner
 * finds the customer's card, subscription and paid invoice on the customer's page, cancels the subscription at period
 * end, detaches the card, makes a plan on the Plans page and cancels another subscription now from the Subscriptions
 * page; a viewer sees the same pages without a button. Screenshots go to /tmp/shots/billing-*.png (desktop and 360 px).
 */
const SHOTS = "/tmp/shots";
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
let seq = 0;

describe("dashboard billing", () => {
  const bench = withSandboxMerchants({ JOB_POLL_INTERVAL_MS: "100" });
  let { gw, api, merchantId } = {} as SandboxMerchants;
  let browser: Browser;
  let owner: { email: string; password: string };
  const offHost: string[] = [];
  const browserErrors: string[] = [];

  beforeAll(async () => {
    ({ gw, api, merchantId } = bench);
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    owner = await gw.createUser(merchantId, "owner");
  });

  // Runs before the gateway closes (after-hooks run last registered first).
  afterAll(async () => {
    await browser?.close();
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  const signedIn = (user: { email: string; password: string }, path: string) => signedInLive(browser, gw.url, user, path, { offHost, errors: browserErrors });

  /** A customer with a card saved by paying once with it at the checkout (ticking "Save this card"). */
  async function customerWithCard(names: { first_name: string; last_name: string }): Promise<{ customer: number; email: string; method: Record<string, any> }> {
    const email = `member${process.pid}-${++seq}@example.com`;
    const created = await api.post("/v1/customers", { email, ...names });
    expect(created.status, created.text).toBe(201);
    const customer = created.body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 100, currency: "KES", customer });
    const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, { card_number: "4242424242424242", expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123", save_payment_method: true });
    expect(paid.status, paid.text).toBe(200);
    const methods = await api.get(`/v1/customers/${customer}/payment-methods`);
    expect(methods.body.data).toHaveLength(1);
    return { customer, email, method: methods.body.data[0] };
  }

  async function plan(body: Record<string, unknown>): Promise<string> {
    const created = await api.post("/v1/plans", { currency: "KES", interval: "month", ...body });
    expect(created.status, created.text).toBe(201);
    return created.body.data.id as string;
  }

  /** A subscription, once its first invoice is paid (the first period bills when it starts). */
  async function paidSubscription(customer: number, planId: string, method: string): Promise<{ id: string; invoice: Record<string, any> }> {
    const created = await api.post("/v1/subscriptions", { customer, plan: planId, payment_method: method });
    expect(created.status, created.text).toBe(201);
    const invoices = await until(() => api.get(`/v1/invoices?subscription=${created.body.data.id}`), (r) => r.body?.data?.[0]?.status === "paid");
    return { id: created.body.data.id, invoice: invoices.body.data[0] };
  }

  const cellText = (page: Page, row: string, label: string) => page.locator(`${row} [data-label="${label}"]`).first().textContent();

  /** At 360 px the page fits its width (tables scroll inside their own box), shot for a look. */
  async function phoneShot(page: Page, name: string) {
    await page.setViewportSize({ width: 360, height: 780 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
    await page.screenshot({ path: `${SHOTS}/billing-phone-${name}.png`, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
  }

  it("an owner sees a customer's card, subscription and paid invoice, cancels it at period end and detaches the card", async () => {
    const { customer, email, method } = await customerWithCard({ first_name: "Wanjiru", last_name: "Kamau" });
    const planId = await plan({ name: "Gold membership", amount: 4_900 });
    const sub = await paidSubscription(customer, planId, method.id);

    const page = await signedIn(owner, "/overview");
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Customers" }).click();
    await page.getByRole("link", { name: email }).click();
    await page.getByRole("heading", { name: "Wanjiru Kamau" }).waitFor();
    expect(await page.textContent("#customer-fields")).toContain(`E-mail${email}`);

    // The card as the payer knows it; its provider token is nowhere in the page.
    const methodRow = `#customer-methods tr[data-id="${method.id}"]`;
    await page.locator(methodRow).waitFor();
    expect(method.card).toMatchObject({ last4: "4242", exp_month: 12, exp_year: NEXT_YEAR });
    expect(await cellText(page, methodRow, "Method")).toBe(`${method.card.brand.charAt(0).toUpperCase()}${method.card.brand.slice(1)} •••• 4242${method.id}`);
    expect(await cellText(page, methodRow, "Expires")).toBe(`12/${NEXT_YEAR}`);

    // The subscription, active, with its price and next invoice.
    const subRow = `#subscriptions-rows tr[data-id="${sub.id}"]`;
    expect(await page.locator(subRow).getAttribute("data-status")).toBe("active");
    expect(await cellText(page, subRow, "Plan")).toBe(`Gold membership${sub.id}`);
    expect(await cellText(page, subRow, "Price")).toBe("KES 49.00 every month");
    expect(await cellText(page, subRow, "Status")).toBe("Active");
    expect(await cellText(page, subRow, "Next invoice")).not.toBe("—");

    // Its first invoice, paid at the first attempt by an ordinary transaction, linked.
    const invoiceRow = `#customer-invoices tr[data-id="${sub.invoice.id}"]`;
    expect(await page.locator(invoiceRow).getAttribute("data-status")).toBe("paid");
    expect(await cellText(page, invoiceRow, "Amount")).toBe("KES 49.00Gold membership");
    expect(await cellText(page, invoiceRow, "Status")).toMatch(/^PaidPaid \d/);
    expect(await cellText(page, invoiceRow, "Attempts")).toBe("1");
    expect(await cellText(page, invoiceRow, "Next attempt")).toBe("—");
    expect(await cellText(page, invoiceRow, "Transaction")).toBe(sub.invoice.transaction_reference);
    await page.screenshot({ path: `${SHOTS}/billing-customer.png`, fullPage: true });
    await phoneShot(page, "customer");

    await page.locator(invoiceRow).getByRole("link", { name: sub.invoice.transaction_reference }).click();
    await page.getByRole("heading", { name: `Transaction ${sub.invoice.transaction_reference}` }).waitFor();
    expect(await page.textContent("#transaction-fields")).toContain("KES 49.00");
    await page.goBack();
    await page.getByRole("heading", { name: "Wanjiru Kamau" }).waitFor();

    // Cancel, at period end: it stays active, marked as ending with its period.
    await page.locator(subRow).getByRole("button", { name: "Cancel" }).click();
    await page.locator(subRow).getByRole("group").waitFor();
    await page.screenshot({ path: `${SHOTS}/billing-cancel-question.png`, fullPage: true });
    await page.locator(subRow).getByRole("button", { name: "At period end" }).click();
    await page.locator(`${subRow}[data-cancel-at-period-end="true"]`).waitFor();
    expect(await cellText(page, subRow, "Status")).toMatch(/^ActiveCancels \d/);
    const canceled = (await api.get(`/v1/subscriptions/${sub.id}`)).body.data;
    expect(canceled).toMatchObject({ status: "active", cancel_at_period_end: true });
    expect(await cellText(page, subRow, "Status")).toContain(new Date(canceled.current_period_end).getUTCFullYear().toString());
    expect(await cellText(page, subRow, "Next invoice")).toBe("—");
    await page.screenshot({ path: `${SHOTS}/billing-canceling.png`, fullPage: true });
    // Ending with its period already, it can still be ended now, but not "at period end" again.
    await page.locator(subRow).getByRole("button", { name: "Cancel" }).click();
    expect(await page.locator(subRow).getByRole("button", { name: "At period end" }).count()).toBe(0);
    await page.locator(subRow).getByRole("button", { name: "Keep it" }).click();
    await page.locator(subRow).getByRole("button", { name: "Cancel" }).waitFor();

    // Detach the card: asked once more, then gone from the page and uncharged for good.
    await page.locator(methodRow).getByRole("button", { name: "Detach" }).click();
    await page.screenshot({ path: `${SHOTS}/billing-detach-question.png`, fullPage: true });
    await page.locator(methodRow).getByRole("button", { name: "Yes, detach" }).click();
    await page.getByText("No saved payment methods.").waitFor();
    expect((await api.get(`/v1/customers/${customer}/payment-methods`)).body.data).toEqual([]);
    expect((await gw.gateway.db.prisma.paymentMethod.findFirstOrThrow({ where: { reference: method.id } })).detachedAt).not.toBeNull();
    await page.screenshot({ path: `${SHOTS}/billing-customer-after.png`, fullPage: true });
    await page.context().close();
  });

  it("an owner makes a plan on the Plans page, and filters and cancels subscriptions on the Subscriptions page", async () => {
    const page = await signedIn(owner, "/plans");
    await page.getByRole("heading", { name: "Plans" }).waitFor();
    await page.getByRole("button", { name: "New plan" }).click();
    await page.getByLabel("Name").fill("Yoga every two weeks");
    // A refused amount is said in the form, before anything is sent.
    await page.getByLabel("Amount each period").fill("12.345");
    await page.getByRole("button", { name: "Create plan" }).click();
    await expect.poll(() => page.locator("#plan-form [role=alert]").textContent()).toBe("Amount: enter it in KES, e.g. 2500.00");
    await page.getByLabel("Amount each period").fill("1,250.50");
    await page.getByLabel("Billed every").selectOption("week");
    await page.getByLabel("Intervals per period").fill("2");
    await page.getByLabel("Trial days").fill("7");
    await page.screenshot({ path: `${SHOTS}/billing-plan-form.png`, fullPage: true });
    await page.getByRole("button", { name: "Create plan" }).click();
    await page.locator("#plans-rows tr", { hasText: "Yoga every two weeks" }).waitFor();
    expect(await page.locator("#plan-form").count()).toBe(0);
    const made = ((await api.get("/v1/plans")).body.data as Record<string, any>[]).find((p) => p.name === "Yoga every two weeks");
    expect(made).toMatchObject({ amount: 125_050, currency: "KES", interval: "week", interval_count: 2, trial_days: 7 });
    const planRow = `#plans-rows tr[data-id="${made!.id}"]`;
    expect(await cellText(page, planRow, "Price")).toBe("KES 1,250.50");
    expect(await cellText(page, planRow, "Billed")).toBe("Every 2 weeks");
    expect(await cellText(page, planRow, "Trial")).toBe("7 days");
    await page.screenshot({ path: `${SHOTS}/billing-plans.png`, fullPage: true });
    await phoneShot(page, "plans");

    // Two subscriptions: one trialing on the new plan, one active; filtered by status, then the active one canceled now.
    const { customer, email, method } = await customerWithCard({ first_name: "Otieno", last_name: "Odhiambo" });
    const trialing = (await api.post("/v1/subscriptions", { customer, plan: made!.id, payment_method: method.id })).body.data;
    expect(trialing.status).toBe("trialing");
    const active = await paidSubscription(customer, await plan({ name: "Silver", amount: 1_500 }), method.id);

    await openSection(page, "Subscriptions");
    await page.getByRole("heading", { name: "Subscriptions" }).waitFor();
    const activeRow = `#subscriptions-rows tr[data-id="${active.id}"]`;
    const trialingRow = `#subscriptions-rows tr[data-id="${trialing.id}"]`;
    await page.locator(activeRow).waitFor();
    expect(await cellText(page, trialingRow, "Status")).toMatch(/^TrialingTrial ends \d/);
    expect(await cellText(page, activeRow, "Customer")).toBe(email);
    await page.getByLabel("Status").selectOption("trialing");
    await page.locator(activeRow).waitFor({ state: "detached" });
    expect(await page.locator(trialingRow).count()).toBe(1);
    await page.getByLabel("Status").selectOption("active");
    await page.locator(activeRow).waitFor();
    expect(await page.locator(trialingRow).count()).toBe(0);
    await page.screenshot({ path: `${SHOTS}/billing-subscriptions.png`, fullPage: true });
    await phoneShot(page, "subscriptions");

    await page.locator(activeRow).getByRole("button", { name: "Cancel" }).click();
    await page.locator(activeRow).getByRole("button", { name: "Now" }).click();
    await page.locator(activeRow).waitFor({ state: "detached" }); // no longer active: out of the filtered list
    expect((await api.get(`/v1/subscriptions/${active.id}`)).body.data).toMatchObject({ status: "canceled", next_invoice_at: null });
    await page.getByLabel("Status").selectOption("canceled");
    await page.locator(`${activeRow}[data-status="canceled"]`).waitFor();
    expect(await cellText(page, activeRow, "Status")).toMatch(/^CanceledCanceled \d/);
    expect(await page.locator(activeRow).getByRole("button").count()).toBe(0);

    // The customer link opens the customer's page.
    await page.locator(activeRow).getByRole("link", { name: email }).click();
    await page.getByRole("heading", { name: "Otieno Odhiambo" }).waitFor();
    await page.context().close();
  });

  it("a viewer reads the customer's page, the plans and the subscriptions without a button", async () => {
    const { customer, method } = await customerWithCard({ first_name: "Akinyi", last_name: "Njeri" });
    const sub = await paidSubscription(customer, await plan({ name: "Bronze", amount: 900 }), method.id);
    const viewer = await signedIn(await gw.createUser(merchantId, "viewer"), `/customers/${customer}`);
    await viewer.getByRole("heading", { name: "Akinyi Njeri" }).waitFor();
    await viewer.locator(`#customer-methods tr[data-id="${method.id}"]`).waitFor();
    await viewer.locator(`#subscriptions-rows tr[data-id="${sub.id}"]`).waitFor();
    await viewer.locator(`#customer-invoices tr[data-id="${sub.invoice.id}"]`).waitFor();
    expect(await viewer.locator("main button").count()).toBe(0);

    await openSection(viewer, "Plans");
    await viewer.locator("#plans-rows tr", { hasText: "Bronze" }).waitFor();
    expect(await viewer.locator("main button").count()).toBe(0);

    await openSection(viewer, "Subscriptions");
    await viewer.locator(`#subscriptions-rows tr[data-id="${sub.id}"]`).waitFor();
    expect(await viewer.locator("main button").count()).toBe(0);
    await viewer.context().close();
  });
});
