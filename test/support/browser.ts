import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { BROWSER_MS } from "./timing.ts";

/** Debian's Chromium, headless, with the flags that keep it off the (closed) network. */
export async function launchChromium(): Promise<Browser> {
  const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  if (!existsSync(executablePath)) {
    throw new Error(`Chromium not found at ${executablePath}: install it with "apt-get install -y chromium" or set CHROMIUM_PATH`);
  }
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

/** Keeps a page on the gateway: a request to any other host is aborted, and its URL pushed to `offHost`. */
export async function confineToGateway(page: Page, gatewayUrl: string, offHost: string[]): Promise<void> {
  const gatewayHost = new URL(gatewayUrl).host;
  await page.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.host === gatewayHost) return route.continue();
    offHost.push(url.href);
    return route.abort();
  });
}

/**
 * Pushes to `errors` what the page throws and logs as a console error, but for the "Failed to load resource" line
 * Chromium itself logs for a refused request (e.g. a wrong password's 401), which is expected.
 */
export function recordPageErrors(page: Page, errors: string[]): void {
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) errors.push(message.text());
  });
}

/**
 * A new page signed in to the dashboard through its own form, as a person does; the page's errors go to `errors`.
 * Resolves once the merchant's name is shown (the session is adopted).
 */
export async function signedInDashboard(browser: Browser, gatewayUrl: string, user: { email: string; password: string }, errors: string[]): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(20_000);
  const page = await context.newPage();
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`${gatewayUrl}/dashboard`);
  await page.getByLabel("E-mail").fill(user.email);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#merchant-name").filter({ hasNotText: "…" }).waitFor();
  return page;
}

/**
 * A new page (1280x900) signed in to the dashboard through its form at `path` (the app stays there), kept on the
 * gateway (other hosts pushed to `offHost`) and its errors pushed to `errors`. Resolves once every live subscription
 * listens, so no event can be missed from then on.
 */
export async function signedInLive(
  browser: Browser,
  gatewayUrl: string,
  user: { email: string; password: string },
  path: string,
  record: { offHost: string[]; errors: string[] },
): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(BROWSER_MS);
  const page = await context.newPage();
  await confineToGateway(page, gatewayUrl, record.offHost);
  recordPageErrors(page, record.errors);
  await page.goto(`${gatewayUrl}/dashboard${path}`);
  await page.getByLabel("E-mail").fill(user.email);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator('#live-status[data-status="live"]').waitFor();
  return page;
}

/**
 * Opens a dashboard section from the nav by its label: the daily ones are on the bar, the others behind "More"
 * (opened first when the link is hidden there).
 */
export async function openSection(page: Page, label: string): Promise<void> {
  const link = page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: label, exact: true });
  // On a phone every section is behind Menu; on a wide screen the less used ones are behind More.
  for (const toggle of ["#menu-toggle", "#more-toggle"]) {
    if (!(await link.isVisible()) && (await page.locator(toggle).isVisible())) await page.locator(toggle).click();
  }
  await link.click();
}
