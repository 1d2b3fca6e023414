import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withProviderCallScope, currentProviderCallScope, type ProviderCallRecord, type ProviderCallScope } from "../../src/providers/call-record.ts";
import { confineToGateway, launchChromium, recordPageErrors } from "../support/browser.ts";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { BROWSER_MS } from "../support/timing.ts";

/**
 * Provider calls in the dashboard, in a real Chromium: an owner sees them on the transaction's page, and opens a
 * refund's and a payout's from their rows; a viewer sees none of it (the API would refuse it anyway). The calls are
 * handed to the sink as the connectors' HTTP helper does (the sandbox makes no HTTP calls).
 */
describe("dashboard provider calls", () => {
  let gw: TestGateway;
  let browser: Browser;
  let merchant: TestMerchant;
  let reference: string;
  let refundReference: string;
  let payoutReference: string;
  const offHost: string[] = [];
  const browserErrors: string[] = [];

  const call = (operation: string): ProviderCallRecord => ({
    connector: "mpesa",
    operation,
    method: "POST",
    path: `/mpesa/${operation}`,
    statusCode: 200,
    durationMs: 12,
    requestBody: '{"Password":"[redacted]","Amount":50}',
    responseBody: '{"ResponseCode":"0"}',
    error: null,
  });
  const record = (scope: ProviderCallScope, operation: string) =>
    withProviderCallScope(scope, async () => gw.gateway.services.providerCalls.record(call(operation), currentProviderCallScope()));

  beforeAll(async () => {
    browser = await launchChromium();
    gw = await startTestGateway({ env: { RATE_LIMIT_PER_MINUTE: "2000" } });
    merchant = await createSandboxMerchant(gw, "Calls Ltd");
    const api = apiClient(gw.url, merchant.testKey);
    reference = await paidTransaction(gw.url, merchant.testKey, { email: "payer@example.com", amount: 5000 });
    const refund = await api.post("/v1/refunds", { transaction: reference, amount: 100 });
    expect(refund.status, refund.text).toBe(201);
    refundReference = refund.body.data.reference;
    const payout = await api.post("/v1/payouts", { amount: 150000, phone_number: "254708374149" });
    expect(payout.status, payout.text).toBe(201);
    payoutReference = payout.body.data.reference;
    const transactionId = (await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } })).id;
    await record({ merchantId: merchant.id, transactionId }, "stk_push");
    await record({ merchantId: merchant.id, refundId: refund.body.data.id }, "reversal");
    await record({ merchantId: merchant.id, payoutId: payout.body.data.id }, "b2c");
    await gw.gateway.services.providerCalls.flush();
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    expect(offHost).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  async function signedIn(role: "owner" | "viewer", path: string): Promise<Page> {
    const user = await gw.createUser(merchant.id, role);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(BROWSER_MS);
    const page = await context.newPage();
    await confineToGateway(page, gw.url, offHost);
    recordPageErrors(page, browserErrors);
    await page.goto(`${gw.url}/dashboard${path}`);
    await page.getByLabel("E-mail").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    return page;
  }

  it("an owner sees the transaction's calls, and opens its refund's and a payout's", async () => {
    const page = await signedIn("owner", `/transactions/${reference}`);
    await page.getByRole("heading", { name: `Transaction ${reference}` }).waitFor();
    await page.getByRole("heading", { name: "Provider calls" }).waitFor();
    const stk = page.locator('#transaction-provider-calls tr[data-operation="stk_push"]');
    await stk.waitFor();
    expect(await stk.textContent()).toContain("POST /mpesa/stk_push");
    await stk.getByText("Show").click();
    expect(await stk.locator("pre").first().textContent()).toContain('"Password": "[redacted]"');

    const refundRow = page.locator(`#transaction-refunds tr[data-reference="${refundReference}"]`);
    await refundRow.getByText("Show").click();
    await refundRow.locator('#refund-provider-calls tr[data-operation="reversal"]').waitFor();

    await page.goto(`${gw.url}/dashboard/payouts`);
    const payoutCell = page.locator("tr", { hasText: payoutReference });
    await payoutCell.getByText("Show").click();
    await payoutCell.locator('#payout-provider-calls tr[data-operation="b2c"]').waitFor();
  });

  it("a viewer sees no provider calls", async () => {
    const page = await signedIn("viewer", `/transactions/${reference}`);
    await page.getByRole("heading", { name: `Transaction ${reference}` }).waitFor();
    await page.getByRole("heading", { name: "Events" }).waitFor();
    expect(await page.getByRole("heading", { name: "Provider calls" }).count()).toBe(0);
    expect(await page.getByRole("columnheader", { name: "Provider calls" }).count()).toBe(0);
  });
});
