import { mkdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { confineToGateway, launchChromium, recordPageErrors, openSection } from "../support/browser.ts";
import { apiClient, bearerClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, SANDBOX_CHANNEL, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { csvRows } from "../support/csv.ts";
import { until } from "../support/wait.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The Overview page in a real Chromium against the running gateway: the landing page after sign-in, its today /
 * 7 / 30 days figures equal to what this test paid, failed and refunded (payments moved back in time by their
 * created_at, the day they count on), the daily volume chart's bars, live figures when a payment settles, a phone's
 * width; and the paymentStats query it reads, scoped to the merchant and mode and refusing a bad number of days.
 */
const SHOTS = "/tmp/dashboard-shots";
/** The docs' picture of the Overview (docs/dashboard.md): rewritten only when asked (UPDATE_SCREENSHOTS=1), so a test run leaves the tree clean. */
const README_SCREENSHOT = new URL("../../src/dashboard/screenshot-overview.png", import.meta.url).pathname;
const DECLINED = "4000000000000002";
const DAY_MS = 24 * 60 * 60 * 1000;
const FEE_BPS = 150;
const FEE_FIXED = 10;
/** The channel's fee on a payment, as the ledger takes it: round(amount * bps / 10000) + fixed, half away from zero. */
const feeOf = (amount: number) => Math.round((amount * FEE_BPS) / 10_000) + FEE_FIXED;

/** What this test made, and when it counts (days before today, UTC). */
interface Made {
  reference: string;
  amount: number;
  status: "completed" | "failed";
  createdAt: Date;
}
interface Refunded {
  amount: number;
  createdAt: Date;
}

const kes = (minor: number) => `KES ${(minor / 100).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
const utcDay = (date: Date) => date.toISOString().slice(0, 10);

describe("dashboard overview", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let channelId: number;
  let api: ReturnType<typeof apiClient>;
  let owner: { email: string; password: string };
  const made: Made[] = [];
  const refunded: Refunded[] = [];
  const offHost: string[] = [];
  const browserErrors: string[] = [];
  const prisma = () => gw.gateway.db.prisma;

  /** A card payment created `daysAgo` UTC days back (its created_at moved), completed or declined. */
  async function pay(amount: number, daysAgo: number, status: "completed" | "failed" = "completed"): Promise<Made> {
    let reference: string;
    if (status === "completed") {
      reference = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount });
    } else {
      const init = await api.post("/api/transactions/initialize", { email: "payer@example.com", amount });
      reference = init.body.reference as string;
      await apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, { ...SANDBOX_CARD, card_number: DECLINED });
    }
    const verified = await api.get(`/api/transactions/verify/${reference}`);
    expect(verified.body.transaction.status).toBe(status);
    const createdAt = new Date(Date.now() - daysAgo * DAY_MS);
    if (daysAgo > 0) await prisma().transaction.update({ where: { reference }, data: { createdAt } });
    const payment = { reference, amount, status, createdAt };
    made.push(payment);
    return payment;
  }

  async function refund(payment: Made, amount: number) {
    const created = await api.post("/v1/refunds", { transaction: payment.reference, amount });
    expect(created.status, created.text).toBe(201);
    await until(() => api.get(`/v1/refunds/${created.body.data.reference}`), (r) => r.body.data.status === "completed");
    refunded.push({ amount, createdAt: new Date(created.body.data.created_at) });
  }

  /** The figures this test expects for the last `days` UTC days, today included, from what it made. */
  function expected(days: number) {
    const since = Date.parse(`${utcDay(new Date())}T00:00:00Z`) - (days - 1) * DAY_MS;
    const inPeriod = made.filter((p) => p.createdAt.getTime() >= since);
    const completed = inPeriod.filter((p) => p.status === "completed");
    const failed = inPeriod.filter((p) => p.status === "failed");
    const refunds = refunded.filter((r) => r.createdAt.getTime() >= since);
    return {
      volume: completed.reduce((sum, p) => sum + p.amount, 0),
      count: completed.length,
      failed: failed.length,
      rate: completed.length / (completed.length + failed.length),
      refunds: refunds.reduce((sum, r) => sum + r.amount, 0),
      refundCount: refunds.length,
    };
  }

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    gw = await startTestGateway({ env: { SANDBOX_REFUND_DELAY_MS: "50", JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_PER_MINUTE: "2000" } });
    merchant = await gw.createMerchant("Duka la Overview");
    api = apiClient(gw.url, merchant.testKey);
    // A fee schedule, so the balance's fees and each balance transaction's net are not trivially the amount.
    const channel = await api.post("/api/payment-channels/create", { ...SANDBOX_CHANNEL, name: "Sandbox cards", fee_percent_bps: FEE_BPS, fee_fixed: FEE_FIXED });
    expect(channel.status, channel.text).toBe(201);
    channelId = channel.body.channel.id;
    owner = await gw.createUser(merchant.id, "owner");

    // Today: two paid (one partly refunded), one declined. Three and twelve days ago, and one long ago (outside).
    const [first] = [await pay(10_000, 0), await pay(2_550, 0), await pay(1_500, 0, "failed")];
    await refund(first!, 1_250);
    await pay(7_000, 3);
    await pay(900, 3, "failed");
    await pay(4_000, 12);
    await pay(99_900, 45);
    // Another merchant's payment today, and a live-mode figure would be another mode: neither is counted.
    const other = await createSandboxMerchant(gw, "Someone Else");
    await paidTransaction(gw.url, other.testKey, { email: "payer@example.com", amount: 55_500 });
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    // Nothing but the gateway is asked for anything (the chart is drawn by the app), and the CSP is never hit.
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  async function signedIn(viewport = { width: 1280, height: 900 }): Promise<Page> {
    const context = await browser.newContext({ viewport, acceptDownloads: true });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, gw.url, offHost);
    recordPageErrors(page, browserErrors);
    await page.goto(`${gw.url}/dashboard`);
    await page.getByLabel("E-mail").fill(owner.email);
    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('#live-status[data-status="live"]').waitFor();
    return page;
  }

  const card = (page: Page, days: number) => page.locator(`.stat-card[data-period="${days}"]`);

  async function expectFigures(page: Page, days: number) {
    const want = expected(days);
    const figures = card(page, days);
    const volume = figures.locator('.stat-volume .amount-line[data-currency="KES"]');
    await expect.poll(() => volume.getAttribute("data-amount"), { timeout: BROWSER_MS }).toBe(String(want.volume));
    expect(await figures.locator(".stat-volume .amount-line").count()).toBe(1);
    expect(await volume.textContent()).toBe(`${kes(want.volume)} ${want.count} payment${want.count === 1 ? "" : "s"}`);
    const rate = figures.locator(".stat-rate");
    expect(await rate.getAttribute("data-completed")).toBe(String(want.count));
    expect(await rate.getAttribute("data-failed")).toBe(String(want.failed));
    expect(await rate.locator("strong").textContent()).toBe(`${(want.rate * 100).toLocaleString("en-US", { maximumFractionDigits: 1 })}%`);
    const refunds = figures.locator(".stat-refunds");
    if (want.refundCount === 0) expect(await refunds.textContent()).toBe("None");
    else expect(await refunds.locator('.amount-line[data-currency="KES"]').textContent()).toBe(`${kes(want.refunds)} ${want.refundCount} refund${want.refundCount === 1 ? "" : "s"}`);
  }

  it("lands on the Overview after sign-in, with today's, 7 and 30 days' figures equal to what was paid, failed and refunded", async () => {
    const page = await signedIn();
    await page.getByRole("heading", { name: "Overview", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/dashboard/overview");
    const nav = page.getByRole("navigation", { name: "Sections" }).getByRole("link");
    expect(await nav.first().textContent()).toBe("Overview");
    expect(await nav.first().getAttribute("aria-current")).toBe("page");
    expect(await page.title()).toMatch(/^Overview · /);

    // Sanity of the fixture itself: the three periods differ, so a wrong window would show.
    expect(new Set([1, 7, 30].map((days) => expected(days).volume)).size).toBe(3);
    for (const days of [1, 7, 30]) await expectFigures(page, days);
    expect(await card(page, 1).locator("h2").textContent()).toContain("Today");
    expect(await card(page, 30).locator("h2").textContent()).toContain("Last 30 days");

    // The chart: one bar per UTC day for 30 days, today last, each as tall as its day's completed volume.
    const bars = page.locator("#volume-chart svg rect.bar");
    expect(await bars.count()).toBe(30);
    const dates = await bars.evaluateAll((rects) => rects.map((rect) => rect.getAttribute("data-date")));
    expect(dates[29]).toBe(utcDay(new Date()));
    expect(dates[0]).toBe(utcDay(new Date(Date.now() - 29 * DAY_MS)));
    const values = await bars.evaluateAll((rects) => rects.map((rect) => Number(rect.getAttribute("data-value"))));
    const perDay = new Map<string, number>();
    for (const p of made) if (p.status === "completed") perDay.set(utcDay(p.createdAt), (perDay.get(utcDay(p.createdAt)) ?? 0) + p.amount);
    expect(values).toEqual(dates.map((date) => perDay.get(date!) ?? 0));
    // Taller bars for bigger days, and none drawn for an empty one.
    const heights = await bars.evaluateAll((rects) => rects.map((rect) => Number(rect.getAttribute("height"))));
    expect(heights[29]).toBeGreaterThan(heights[26]!);
    expect(heights[26]).toBeGreaterThan(heights[17]!);
    expect(heights[28]).toBe(0);
    expect(await page.locator("#volume-chart svg").getAttribute("aria-label")).toContain(`${kes(expected(30).volume)} in all`);
    await page.screenshot({ path: `${SHOTS}/40-overview.png`, fullPage: true });

    // A payment that settles while the page is open: today's figures follow without a reload.
    await pay(3_300, 0);
    await expectFigures(page, 1);
    await expectFigures(page, 30);
    await expect.poll(() => bars.last().getAttribute("data-value"), { timeout: BROWSER_MS }).toBe(String(perDay.get(utcDay(new Date()))! + 3_300));
    await page.context().close();
  });

  it("shows each channel's balance (Balances, linked from the Overview) and its balance transactions, and exports them as CSV with the page's filters", async () => {
    const completed = made.filter((p) => p.status === "completed");
    const collected = completed.reduce((sum, p) => sum + p.amount, 0);
    const fees = completed.reduce((sum, p) => sum + feeOf(p.amount), 0);
    const refundedTotal = refunded.reduce((sum, r) => sum + r.amount, 0);
    const available = collected - fees - refundedTotal;

    const page = await signedIn();
    // The Overview keeps what is available per channel; the whole balance is on the Balances page.
    await page.locator(`#balance-summary-rows tr[data-channel="${channelId}"]`).waitFor();
    await page.locator("#balances-link").click();
    await page.getByRole("heading", { name: "Balances", level: 1 }).waitFor();
    const row = page.locator(`#balance-rows tr[data-channel="${channelId}"][data-currency="KES"]`);
    await row.waitFor();
    expect(await page.locator("#balance-rows tr").count()).toBe(1);
    const cell = (label: string) => row.locator(`[data-label="${label}"]`);
    expect(await cell("Channel").textContent()).toBe("Sandbox cardsSandbox · KES");
    expect(await cell("Collected").textContent()).toBe(kes(collected));
    expect(await cell("Fees").textContent()).toBe(kes(fees));
    expect(await cell("Refunded").textContent()).toBe(kes(refundedTotal));
    expect(await cell("Paid out").textContent()).toBe(kes(0));
    expect(await cell("Pending out").textContent()).toBe(kes(0));
    expect(await cell("Available").textContent()).toBe(kes(available));

    // One balance transaction per completed payment and per completed refund (a declined payment moves nothing).
    const entries = completed.length + refunded.length;
    await expect.poll(() => page.textContent("#balance-transactions-count"), { timeout: BROWSER_MS }).toBe(`${entries} balance transactions`);
    const refundRow = page.locator('#balance-transaction-rows tr[data-type="refund"]');
    expect(await refundRow.locator('[data-label="Amount"]').textContent()).toBe(kes(-refunded[0]!.amount));
    const updating = process.env.UPDATE_SCREENSHOTS && process.env.TEST_BACKEND === "pglite";
    await page.screenshot({ path: updating ? README_SCREENSHOT : `${SHOTS}/41-overview-balances.png`, fullPage: true });

    // Export CSV: the button downloads every matching balance transaction with the signed-in session.
    const link = page.locator("#balance-transactions-export");
    expect(await link.getAttribute("href")).toBe("/v1/reports/balance-transactions.csv");
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    expect(download.suggestedFilename()).toMatch(/^balance-transactions.*\.csv$/);
    const records = csvRows(await readFile((await download.path())!, "utf8"));
    const [header, ...rows] = records;
    const column = (name: string) => header!.indexOf(name);
    expect(rows).toHaveLength(entries);
    const sum = (name: string) => rows.reduce((total, r) => total + Number(r[column(name)]), 0);
    expect(sum("net")).toBe(available);
    expect(sum("fee")).toBe(fees);
    expect(new Set(rows.map((r) => r[column("source_reference")]))).toEqual(new Set([...completed.map((p) => p.reference), ...rows.filter((r) => r[column("type")] === "refund").map((r) => r[column("source_reference")])]));

    // Filtered to refunds: the link carries the filter, and the same URL with the user's session answers that one row.
    await page.getByLabel("Type").selectOption("refund");
    await expect.poll(() => page.locator("#balance-transaction-rows tr").count(), { timeout: BROWSER_MS }).toBe(1);
    const filtered = (await link.getAttribute("href"))!;
    expect(filtered).toBe("/v1/reports/balance-transactions.csv?type=refund");
    const login = await apiClient(gw.url).post("/v1/auth/login", { email: owner.email, password: owner.password });
    const asUser = await bearerClient(gw.url, login.body.access_token ?? login.body.data?.access_token).get(filtered);
    expect(asUser.status, asUser.text).toBe(200);
    expect(asUser.headers.get("content-type")).toMatch(/^text\/csv/);
    const refundRecords = csvRows(asUser.text).slice(1);
    expect(refundRecords.map((r) => [r[column("type")], Number(r[column("amount")])])).toEqual([["refund", -refunded[0]!.amount]]);
    await page.context().close();
  });

  it("exports the transactions in the page's filters as CSV, with the signed-in session", async () => {
    const page = await signedIn();
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Transactions" }).click();
    await page.locator("#transactions-rows tr").first().waitFor();
    const link = page.locator("#transactions-export");
    expect(await link.getAttribute("href")).toBe("/v1/reports/transactions.csv");
    await page.getByLabel("Status").selectOption("completed");
    await expect.poll(() => link.getAttribute("href"), { timeout: BROWSER_MS }).toBe("/v1/reports/transactions.csv?status=completed");

    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    expect(download.suggestedFilename()).toBe("transactions-test-completed.csv");
    const [header, ...rows] = csvRows(await readFile((await download.path())!, "utf8"));
    const column = (name: string) => header!.indexOf(name);
    expect(header!.slice(0, 6)).toEqual(["id", "reference", "status", "amount", "amount_refunded", "currency"]);
    // Every completed payment of this merchant, newest (by created_at) first, and nothing of the other merchant's.
    const completed = made.filter((p) => p.status === "completed").sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
    expect(rows.map((r) => r[column("reference")])).toEqual(completed.map((p) => p.reference));
    expect(rows.map((r) => Number(r[column("amount")]))).toEqual(completed.map((p) => p.amount));
    expect(rows.reduce((sum, r) => sum + Number(r[column("amount_refunded")]), 0)).toBe(refunded.reduce((sum, r) => sum + r.amount, 0));
    await page.context().close();

    // The same report over the API: a formula a payer could type is neutralised, a bad filter is the 400 envelope.
    const formula = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 100, description: '=HYPERLINK("http://evil.test","x")' });
    const searched = await api.get(`/v1/reports/transactions.csv?search=${formula}`);
    expect(searched.status).toBe(200);
    const [, only] = csvRows(searched.text);
    expect(only![column("description")]).toBe(`'=HYPERLINK("http://evil.test","x")`);
    expect(only![column("status")]).toBe("completed");
    made.push({ reference: formula, amount: 100, status: "completed", createdAt: new Date() });
    const refused = await api.get("/v1/reports/transactions.csv?date_from=2024-02-30");
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ status: "error", code: "validation_failed" });
  });

  it("fits a 360-px phone: cards stack, the chart is drawn at the screen's width, nothing scrolls sideways", async () => {
    const page = await signedIn({ width: 360, height: 780 });
    await card(page, 30).locator(".stat-volume .amount-line").waitFor();
    await page.locator("#volume-chart svg rect.bar").first().waitFor({ state: "attached" });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
    const svgWidth = Number(await page.locator("#volume-chart svg").getAttribute("width"));
    expect(svgWidth).toBeLessThanOrEqual(360);
    expect(svgWidth).toBeGreaterThan(240);
    // One card per row.
    const boxes = await page.locator(".stat-card").evaluateAll((cards) => cards.map((c) => c.getBoundingClientRect().left));
    expect(new Set(boxes).size).toBe(1);
    await page.screenshot({ path: `${SHOTS}/44-phone-overview.png`, fullPage: true });
    await page.context().close();
  });

  it("paymentStats answers the merchant's own figures per day and period, and refuses a bad number of days", async () => {
    const query = `query($days: Int, $periods: [Int!]) { paymentStats(days: $days, periods: $periods) {
      __typename ... on ValidationError { field message }
      ... on PaymentStats { daily { date completedCount failedCount volume { currency amount count } refunds { currency amount count } }
        periods { days since completedCount failedCount successRate volume { currency amount count } refunds { currency amount count } } } } }`;
    const stats = await api.post("/graphql", { query, variables: { days: 7, periods: [1, 60] } });
    expect(stats.status).toBe(200);
    const answer = stats.body.data.paymentStats;
    expect(answer.daily).toHaveLength(7);
    expect(answer.daily[6].date).toBe(utcDay(new Date()));
    const sixty = expected(60);
    expect(answer.periods[1]).toMatchObject({
      days: 60,
      since: `${utcDay(new Date(Date.now() - 59 * DAY_MS))}T00:00:00.000Z`,
      completedCount: sixty.count,
      failedCount: sixty.failed,
      volume: [{ currency: "KES", amount: sixty.volume, count: sixty.count }],
      refunds: [{ currency: "KES", amount: sixty.refunds, count: sixty.refundCount }],
    });
    expect(answer.periods[1].successRate).toBeCloseTo(sixty.rate, 10);
    // Three days ago, on its own day: 7,000 paid, one failed.
    const threeDaysAgo = answer.daily.find((day: { date: string }) => day.date === utcDay(new Date(Date.now() - 3 * DAY_MS)));
    expect(threeDaysAgo).toMatchObject({ completedCount: 1, failedCount: 1, volume: [{ currency: "KES", amount: 7_000, count: 1 }], refunds: [] });

    // Live mode is another set of books: nothing there.
    const live = await apiClient(gw.url, merchant.liveKey).post("/graphql", { query, variables: { periods: [30] } });
    expect(live.body.data.paymentStats.periods[0]).toMatchObject({ completedCount: 0, failedCount: 0, successRate: null, volume: [], refunds: [] });

    for (const variables of [{ days: 0 }, { days: 367 }, { periods: [7, -1] }]) {
      const refused = await api.post("/graphql", { query, variables });
      expect(refused.body.data.paymentStats.__typename).toBe("ValidationError");
    }
  });

  it("shows the Overview's days and the transactions' times in the merchant's time zone (Africa/Nairobi)", async () => {
    const zone = "Africa/Nairobi";
    const inZone = (at: Date, options: Intl.DateTimeFormatOptions) => new Intl.DateTimeFormat("en-CA", { ...options, timeZone: zone }).format(at);
    const today = inZone(new Date(), { year: "numeric", month: "2-digit", day: "2-digit" });
    await prisma().merchant.update({ where: { id: merchant.id }, data: { timezone: zone } });
    try {
      const page = await signedIn();
      await expect.poll(() => page.locator("#overview-zone").textContent(), { timeout: BROWSER_MS }).toBe(zone);
      expect(await page.locator("#overview-as-of").textContent()).toContain("Days are Africa/Nairobi days");
      // Today is Nairobi's today, in the card and as the chart's last bar.
      const todayLabel = new Date(`${today}T00:00:00Z`).toLocaleDateString("en-GB", { day: "numeric", month: "short", timeZone: "UTC" });
      expect(await card(page, 1).locator("h2 .since").textContent()).toBe(todayLabel);
      expect(await page.locator("#volume-chart svg rect.bar").last().getAttribute("data-date")).toBe(today);
      await page.screenshot({ path: `${SHOTS}/45-overview-nairobi.png`, fullPage: true });

      // The transactions list: the newest payment's time is Nairobi's (the browser's own zone is not).
      await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Transactions" }).click();
      const first = page.locator("#transactions-rows tr").first();
      await first.waitFor();
      // The list's order: newest id first.
      const newest = await prisma().transaction.findFirstOrThrow({ where: { merchantId: merchant.id, mode: "test" }, orderBy: { id: "desc" } });
      const time = inZone(newest.createdAt, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
      expect(await first.locator('[data-label="Date"]').textContent()).toContain(time);
      await page.screenshot({ path: `${SHOTS}/46-transactions-nairobi.png`, fullPage: true });
      await page.context().close();
    } finally {
      await prisma().merchant.update({ where: { id: merchant.id }, data: { timezone: "UTC" } });
    }
  });

  // Last: it changes two payments behind the gateway's back, which the figures above would otherwise count.
  it("an owner runs a reconciliation of today's payments from the Reconciliation page and reads its differences", async () => {
    const today = utcDay(new Date());
    const changed = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 1_000 });
    const unknown = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 2_000 });
    // The sandbox approved 10.00 and the given receipt; here one now says 11.00 and the other a receipt it never gave.
    await prisma().transaction.update({ where: { reference: changed }, data: { amount: 1_100 } });
    await prisma().transaction.update({ where: { reference: unknown }, data: { providerReference: "sbx_never_given" } });

    const page = await signedIn();
    await openSection(page, "Reconciliation");
    await page.getByRole("heading", { name: "Reconciliation", level: 1 }).waitFor();
    await page.getByRole("heading", { name: "No reconciliation reports yet" }).waitFor();
    await page.getByRole("button", { name: "Run a reconciliation" }).click();
    await page.getByLabel("Channel").selectOption(String(channelId));
    await page.getByLabel("Day (UTC)").fill(today);
    await page.locator("#reconcile-form").getByRole("button", { name: "Run" }).click();
    await page.getByRole("heading", { name: `Reconciliation of ${today}` }).waitFor();
    const id = Number(new URL(page.url()).pathname.split("/").pop());

    // What the page lists is the report the gateway stored, with both differences in it.
    const query = `query($id: Int!) { reconciliation(id: $id) { ... on Reconciliation { status items { kind reference gatewayAmount providerAmount } } } }`;
    const stored = (await api.post("/graphql", { query, variables: { id } })).body.data.reconciliation;
    expect(stored.status).toBe("completed");
    const items = page.locator("#reconciliation-items tr");
    expect(await items.evaluateAll((rows) => rows.map((r) => [r.getAttribute("data-kind"), r.getAttribute("data-reference")]))).toEqual(
      stored.items.map((item: { kind: string; reference: string }) => [item.kind, item.reference]),
    );
    expect(await page.textContent("#reconciliation-differences")).toBe(String(stored.items.length));
    const amountRow = page.locator(`#reconciliation-items tr[data-kind="amount_mismatch"][data-reference="${changed}"]`);
    expect(await amountRow.locator('[data-label="Here"]').textContent()).toBe(`Completed${kes(1_100)}`);
    expect(await amountRow.locator('[data-label="At the provider"]').textContent()).toBe(`Completed${kes(1_000)}`);
    const missingRow = page.locator(`#reconciliation-items tr[data-kind="missing_there"][data-reference="${unknown}"]`);
    expect(await missingRow.locator('[data-label="Difference"]').textContent()).toBe("Missing at the provider");
    expect(await missingRow.locator('[data-label="At the provider"]').textContent()).toBe(`Not recorded—`);
    await page.screenshot({ path: `${SHOTS}/42-reconciliation-detail.png`, fullPage: true });
    // On a 360-px phone the differences stack as cards, with no sideways scrolling.
    await page.setViewportSize({ width: 360, height: 780 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth)).toBe(true);
    await page.screenshot({ path: `${SHOTS}/45-phone-reconciliation-detail.png`, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    // The list has the report, with its count of differences.
    await page.getByRole("link", { name: "← All reports" }).click();
    const listed = page.locator(`#reconciliation-rows tr[data-id="${id}"]`);
    await listed.waitFor();
    expect(await listed.locator('[data-label="Result"]').textContent()).toBe("Differences");
    expect(await listed.locator('[data-label="Differences"]').textContent()).toBe(String(stored.items.length));
    await page.screenshot({ path: `${SHOTS}/43-reconciliations.png`, fullPage: true });
    await page.context().close();
  });
});
