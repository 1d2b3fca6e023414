import { mkdirSync } from "node:fs";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { launchChromium } from "../support/browser.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { createResponseValidator } from "../support/openapi-validation.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * The OpenAPI document: linted by Redocly's linter (recommended rules), complete against the published
 * interface, served with an offline reference at /docs (rendered in Chromium with every other host blocked),
 * and proven by the whole integration suite (test/support/openapi-validation.ts checks every REST answer).
 */
const INTERFACE_ROUTES = [
  "POST /api/transactions/initialize",
  "GET /api/transactions/verify/{reference}",
  "GET /api/transactions/list",
  "POST /api/payment-channels/create",
  "GET /api/payment-channels/list",
  "POST /api/momo/stk-push",
  "GET /api/momo/stk-status/{reference}",
  "POST /api/momo/register-c2b-urls",
  "POST /api/momo/simulate-c2b",
  "POST /api/customers/create",
  "GET /api/customers/list",
  "POST /v1/auth/login",
  "POST /v1/auth/refresh",
  "POST /v1/collections/stk",
  "POST /v1/payouts",
  "GET /v1/payouts/{id}",
  "GET /v1/webhooks",
  "POST /v1/webhooks",
  "GET /v1/status",
];

describe("the OpenAPI document", () => {
  let gw: TestGateway;
  let text: string;
  let document: { openapi: string; paths: Record<string, Record<string, { security?: unknown[]; parameters?: { name?: string; $ref?: string }[] }>> };

  beforeAll(async () => {
    gw = await startTestGateway();
    const res = await fetch(`${gw.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    text = await res.text();
    document = JSON.parse(text);
  });
  afterAll(() => gw?.close());

  it("passes Redocly's linter with the recommended rules, without an API key", async () => {
    const config = await createConfig({ extends: ["recommended"] });
    const problems = await lintFromString({ source: text, absoluteRef: "openapi.json", config });
    const errors = problems.filter((p) => p.severity === "error");
    expect(errors.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(document.openapi).toBe("3.1.0");
  });

  it("lists all 11 /api and 8 /v1 routes of the interface, with their credentials and Idempotency-Key", () => {
    const listed = Object.entries(document.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    for (const route of INTERFACE_ROUTES) expect(listed).toContain(route);
    expect(INTERFACE_ROUTES.filter((r) => r.includes(" /api/"))).toHaveLength(11);
    expect(INTERFACE_ROUTES.filter((r) => r.includes(" /v1/"))).toHaveLength(8);
    expect(document.paths["/api/transactions/list"]!.get!.security).toEqual([{ ApiKey: [] }]);
    expect(document.paths["/v1/payouts"]!.post!.security).toEqual([{ ApiKey: [] }, { Bearer: [] }]);
    expect(document.paths["/v1/auth/login"]!.post!.security).toEqual([]);
    expect(document.paths["/v1/payouts"]!.post!.parameters).toContainEqual({ $ref: "#/components/parameters/IdempotencyKey" });
  });

  it("every REST answer of a test gateway is checked against it", async () => {
    const api = apiClient(gw.url, (await gw.createMerchant()).testKey);
    const before = gw.openApi.checked;
    await api.get("/v1/status");
    await api.get("/api/transactions/verify/txn_missing");
    await apiClient(gw.url).get("/v1/status");
    expect(gw.openApi.checked - before).toBe(3);
    expect(gw.openApi.violations).toEqual([]);
  });

  it("the check fails a body that contradicts the document, and a status it does not list", () => {
    const validator = createResponseValidator();
    const good = { status: "success", data: { merchant: { id: 1, name: "A", default_currency: "KES" }, mode: "test", api_version: "v1", server_time: new Date().toISOString() } };
    expect(validator.check("GET", "/v1/status", 200, JSON.stringify(good))).toBeNull();
    expect(validator.check("GET", "/v1/status", 200, JSON.stringify({ ...good, data: { ...good.data, mode: "staging" } }))).toMatch(/mode must be equal to one of the allowed values/);
    expect(validator.check("GET", "/api/transactions/list", 200, JSON.stringify({ status: "success", data: [{ id: "1" }] }))).toMatch(/must be integer|must have required property/);
    expect(validator.check("GET", "/v1/status", 401, JSON.stringify({ status: "error", message: "x", code: "not_a_code" }))).toMatch(/code must be equal to one of the allowed values/);
    expect(validator.check("POST", "/api/transactions/verify/:reference", 200, "{}")).toMatch(/not in the OpenAPI document/);
    expect(validator.check("GET", "/health", 200, "{}")).toBeUndefined();
  });
});

describe("/docs", () => {
  let gw: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    gw = await startTestGateway();
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("renders the reference in Chromium from the gateway alone (every other host blocked)", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const origin = new URL(gw.url).origin;
    const elsewhere: string[] = [];
    await page.route("**/*", (route) => {
      const url = route.request().url();
      return url.startsWith(origin) || url.startsWith("data:") || url.startsWith("blob:") ? route.continue() : route.abort();
    });
    const consoleErrors: string[] = [];
    page.on("pageerror", (error) => consoleErrors.push(error.message));
    page.on("console", (message) => message.type() === "error" && consoleErrors.push(message.text()));
    // Requests the page's CSP stops never reach page.route: watch every request too.
    page.on("request", (request) => {
      const url = request.url();
      if (!url.startsWith(origin) && !url.startsWith("data:") && !url.startsWith("blob:")) elsewhere.push(url);
    });
    const res = await page.goto(`${gw.url}/docs`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()["content-security-policy"]).toMatch(/default-src 'self'/);
    await page.getByRole("heading", { name: /Payment gateway REST API/ }).waitFor({ timeout: BROWSER_MS });
    await page.getByRole("heading", { name: "Start a card payment and get its hosted checkout URL" }).waitFor();
    await page.getByRole("heading", { name: "Pay out to a phone (M-Pesa B2C); never sent twice" }).waitFor();
    mkdirSync("/tmp/openapi-shots", { recursive: true });
    await page.screenshot({ path: "/tmp/openapi-shots/docs.png", fullPage: false });
    expect(elsewhere).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
