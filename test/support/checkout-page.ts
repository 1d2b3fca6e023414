import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { expect } from "vitest";
import { confineToGateway, recordPageErrors } from "./browser.ts";
import { apiClient, type TestGateway } from "./gateway.ts";
import { BROWSER_MS } from "./timing.ts";

/** The payer's side of issue 25's checkout in Chromium: opening a checkout, paying by card or M-Pesa, axe. */

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface PayerBrowser {
  context: BrowserContext;
  /** Requests to any host but the gateway (refused). */
  offHost: string[];
  /** What the pages threw or logged as errors. */
  errors: string[];
  open(path: string): Promise<Page>;
  close(): Promise<void>;
}

/** A fresh context (its own viewport and language) confined to the gateway, recording page errors. */
export async function payerBrowser(browser: Browser, gw: TestGateway, options: { width?: number; locale?: string } = {}): Promise<PayerBrowser> {
  const context = await browser.newContext({
    viewport: { width: options.width ?? 800, height: 640 },
    ...(options.locale ? { locale: options.locale, extraHTTPHeaders: { "accept-language": options.locale } } : {}),
  });
  context.setDefaultTimeout(BROWSER_MS);
  const offHost: string[] = [];
  const errors: string[] = [];
  return {
    context,
    offHost,
    errors,
    async open(path) {
      const page = await context.newPage();
      await confineToGateway(page, gw.url, offHost);
      recordPageErrors(page, errors);
      await page.goto(`${gw.url}${path}`);
      return page;
    },
    close: () => context.close(),
  };
}

/** A transaction made by initialize (the merchant's key); answers its checkout path and reference. */
export async function initialize(gw: TestGateway, key: string, body: Record<string, unknown> = {}) {
  const init = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 150000, email: "payer@example.com", description: "Order 42", ...body });
  expect(init.status, init.text).toBe(200);
  return { path: new URL(init.body.authorization_url as string).pathname, reference: init.body.reference as string };
}

export async function chooseMethod(page: Page, method: "card" | "mpesa") {
  if (await page.locator("#methods").isVisible()) await page.check(`#methods input[value="${method}"]`);
}

/** The card form filled in (any future expiry, any CVC: the sandbox's rules), not sent. */
export async function fillCard(page: Page, number: string) {
  await chooseMethod(page, "card");
  await page.fill('input[name="card_number"]', number);
  await page.fill('input[name="expiry_month"]', "12");
  await page.fill('input[name="expiry_year"]', String(new Date().getUTCFullYear() + 1));
  await page.fill('input[name="cvc"]', "408");
}

export async function payByCard(page: Page, number: string) {
  await fillCard(page, number);
  await page.click('#pay button[type="submit"]');
}

export async function payByMpesa(page: Page, phone: string) {
  await chooseMethod(page, "mpesa");
  await page.fill('input[name="phone"]', phone);
  await page.click('#mpesa button[type="submit"]');
}

/** The page's "check your phone" state as first drawn: its title, message and the message's role, and what had focus. */
export interface WaitingState {
  title: string;
  result: string;
  role: string | null;
  focused: string | undefined;
}

/**
 * Records, in the page itself, the first moment its "check your phone" state shows (drawn by the server, or by the
 * script after a push). The state lasts until the page's next look at the payment (2 s), which a test's round trips
 * to Chromium can outlast on a busy machine. Call before the page loads; read with `firstWaiting`.
 */
export async function recordFirstWaiting(page: Page): Promise<void> {
  await page.addInitScript(() => {
    const snapshot = (): boolean => {
      const waiting = document.getElementById("waiting");
      if (!waiting || waiting.hidden) return false;
      const result = document.getElementById("result");
      const state = {
        title: document.getElementById("waiting-title")?.textContent ?? "",
        result: result?.textContent ?? "",
        role: result?.getAttribute("role") ?? null,
        focused: document.activeElement?.id,
      };
      Reflect.set(window, "__firstWaiting", state);
      return true;
    };
    document.addEventListener("DOMContentLoaded", () => {
      if (snapshot()) return;
      // Mutation callbacks run after the script's task: its text and focus changes are all in.
      const observer = new MutationObserver(() => snapshot() && observer.disconnect());
      observer.observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    });
  });
}

/** The state `recordFirstWaiting` saw, once the page has shown it. */
export async function firstWaiting(page: Page): Promise<WaitingState> {
  const seen = await page.waitForFunction(() => Reflect.get(window, "__firstWaiting") as object | undefined);
  return (await seen.jsonValue()) as WaitingState;
}

/** The transaction as the gateway recorded it, with its attempts oldest first. */
export async function recorded(gw: TestGateway, reference: string) {
  const prisma = gw.gateway.db.prisma;
  const t = await prisma.transaction.findUniqueOrThrow({ where: { reference }, select: { id: true, status: true, failureCode: true, failureReason: true } });
  const attempts = await prisma.transactionAttempt.findMany({ where: { transactionId: t.id }, orderBy: { id: "asc" }, select: { method: true, status: true, code: true } });
  return { ...t, attempts };
}

/**
 * axe-core in the page, with the page's own CSP left on: the source is evaluated over the DevTools protocol
 * (page.evaluate), which the policy does not govern, rather than as an inline script it would (rightly) refuse.
 * Fails on any serious or critical violation, naming the rule and the elements.
 */
export async function expectNoSeriousAxeViolations(page: Page, state: string) {
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(context: Document): Promise<{ violations: { id: string; impact: string | null; nodes: { target: string[] }[] }[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(" ")) }));
  });
  const serious = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious, `axe on the ${state} state`).toEqual([]);
}

/** Nothing wider than the screen: no horizontal scrolling. */
export async function expectNoHorizontalScroll(page: Page, width: number) {
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
}

/** The docs' pictures (docs/card-payments.md): rewritten only when asked (UPDATE_SCREENSHOTS=1), so a test run leaves the tree clean. */
export async function screenshot(page: Page, name: string) {
  const path = process.env.UPDATE_SCREENSHOTS === "1" ? `src/checkout/screenshot-${name}.png` : `/tmp/checkout-screenshot-${name}.png`;
  await page.screenshot({ path, fullPage: true });
}
