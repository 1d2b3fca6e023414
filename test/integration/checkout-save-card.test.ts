import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { chooseMethod, expectNoHorizontalScroll, expectNoSeriousAxeViolations, fillCard, initialize, payerBrowser, screenshot, type PayerBrowser } from "../support/checkout-page.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";

/**
 * The hosted checkout's "Save this card" box in Chromium on the sandbox (issue 40): offered only when the payment has
 * a customer; unticked unless the merchant asked (then the page says so and it starts ticked); what the payer leaves
 * in it is sent with the card and decides whether the card is saved for the customer.
 */
const MERCHANT = "Mama Mboga Ltd";
/** Never answered by the sandbox: the push's payment stays pending, so its page keeps its card form. */
const NO_ANSWER_PHONE = "254700001019";

describe("hosted checkout: the Save this card box", () => {
  let [gw, browser, payer, key, channelId] = [] as unknown as [TestGateway, Browser, PayerBrowser, string, number];

  beforeAll(async () => {
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } })]);
    ({ testKey: key, channelId } = await createSandboxMerchant(gw, MERCHANT));
    payer = await payerBrowser(browser, gw, { width: 360 });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });
  afterAll(() => expectCleanLedger(gw));

  /** A new customer's payment (initialize with `customer`, the merchant's save request or not): its customer and checkout path. */
  async function customerPayment(email: string, merchantAsks: boolean): Promise<{ customer: number; path: string }> {
    const created = await apiClient(gw.url, key).post("/v1/customers", { email, first_name: "Wanjiru", last_name: "Kamau" });
    expect(created.status, created.text).toBe(201);
    const customer = created.body.data.id as number;
    const { path } = await initialize(gw, key, { email: undefined, customer, ...(merchantAsks ? { save_payment_method: true } : {}) });
    return { customer, path };
  }

  async function savedMethods(customer: number) {
    const listed = await apiClient(gw.url, key).get(`/v1/customers/${customer}/payment-methods`);
    expect(listed.status, listed.text).toBe(200);
    return listed.body.data as { type: string; card: { brand: string; last4: string } | null }[];
  }

  /** Pays the filled-in card and answers the JSON the page sent to /pay; resolves once the page shows the payment completed. */
  async function payAndReadRequest(page: Page, card: string): Promise<Record<string, unknown>> {
    await fillCard(page, card);
    const [request] = await Promise.all([page.waitForRequest((r) => r.method() === "POST" && r.url().endsWith("/pay")), page.click('#pay button[type="submit"]')]);
    await page.waitForSelector("#result.completed");
    return request.postDataJSON() as Record<string, unknown>;
  }

  it("no box when the payment has no customer (an API STK push's payment, whose page still has the card form)", async () => {
    const push = await apiClient(gw.url, key).post("/api/momo/stk-push", { amount: 1_000, phone_number: NO_ANSWER_PHONE, payment_channel_id: channelId });
    expect(push.status, push.text).toBe(200);
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: push.body.transaction.reference } });
    expect(row.customerId).toBeNull();
    const page = await payer.open(`/payment/checkout/${push.body.transaction.reference}`);
    await page.locator("#pay").waitFor({ state: "attached" });
    expect(await page.locator("#save-card").count()).toBe(0);
    expect(await page.locator("#save-card-requested").count()).toBe(0);
    expect(await page.content()).not.toContain("Save this card");
    await page.close();
  });

  it("unticked by default; ticked by the payer, the card is saved for the customer (brand, last4)", async () => {
    const { customer, path } = await customerPayment("ticks@example.com", false);
    const page = await payer.open(path);
    await chooseMethod(page, "card");
    const box = page.getByLabel(`Save this card for future payments to ${MERCHANT}`);
    expect(await box.isChecked()).toBe(false);
    expect(await page.locator("#save-card-requested").count()).toBe(0);
    await box.check();
    expect(await payAndReadRequest(page, "4242 4242 4242 4242")).toMatchObject({ save_payment_method: true });
    expect(await savedMethods(customer)).toMatchObject([{ type: "card", card: { brand: "visa", last4: "4242" } }]);
    await page.close();
  });

  it.each([
    { merchantAsks: false, saved: [] },
    { merchantAsks: true, saved: [{ type: "card", card: { brand: "mastercard", last4: "4444" } }] },
  ])("the payer leaves the box as it is (merchant asked: $merchantAsks): sent as such, saved only when it was ticked", async ({ merchantAsks, saved }) => {
    const { customer, path } = await customerPayment(`leaves-${merchantAsks}@example.com`, merchantAsks);
    const page = await payer.open(path);
    expect(await payAndReadRequest(page, "5555 5555 5555 4444")).toMatchObject({ save_payment_method: merchantAsks });
    expect(await savedMethods(customer)).toMatchObject(saved);
    expect(await savedMethods(customer)).toHaveLength(saved.length);
    await page.close();
  });

  it("the merchant asked: the page says so and the box is ticked; the payer unticks it and nothing is saved", async () => {
    const { customer, path } = await customerPayment("unticks@example.com", true);
    const page = await payer.open(path);
    expect(await page.textContent("#save-card-requested")).toBe(`${MERCHANT} asks to keep this card for future payments. Untick the box if you do not want that.`);
    const box = page.getByLabel(`Save this card for future payments to ${MERCHANT}`);
    expect(await box.isChecked()).toBe(true);
    await fillCard(page, "5555 5555 5555 4444");
    await expectNoSeriousAxeViolations(page, "save card");
    await expectNoHorizontalScroll(page, 360);
    await screenshot(page, "save-card");
    await box.uncheck();
    expect(await payAndReadRequest(page, "5555 5555 5555 4444")).toMatchObject({ save_payment_method: false });
    expect(await savedMethods(customer)).toEqual([]);
    await page.close();
  });

  it("in Swahili: the box's label and the merchant's request in the payer's language", async () => {
    const { path } = await customerPayment("kiswahili@example.com", true);
    const swahili = await payerBrowser(browser, gw, { width: 360, locale: "sw-KE" });
    try {
      const page = await swahili.open(path);
      expect(await page.getByLabel(`Hifadhi kadi hii kwa malipo yajayo kwa ${MERCHANT}`).isChecked()).toBe(true);
      expect(await page.textContent("#save-card-requested")).toBe(`${MERCHANT} anaomba kuhifadhi kadi hii kwa malipo yajayo. Ondoa alama kwenye kisanduku kama hutaki.`);
      await fillCard(page, "4242 4242 4242 4242");
      await screenshot(page, "save-card-swahili");
      expect(swahili.errors).toEqual([]);
    } finally {
      await swahili.close();
    }
  });

  afterAll(() => {
    expect(payer.errors).toEqual([]);
    expect(payer.offHost).toEqual([]);
  });
});
