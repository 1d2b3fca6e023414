import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { chooseMethod, fillCard, initialize, payerBrowser, payByCard, payByMpesa, recorded, type PayerBrowser } from "../support/checkout-page.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * One payment, two tabs, two methods (issue 25): whichever attempt is in flight first is the only one charged, and
 * the other tab tells the truth about it, then its outcome. The sandbox answers a push after 2.5 s and charges the
 * slow channel's card in 3 s, so the second tab acts while the first attempt is out.
 */
describe("hosted checkout page: a push and a card racing", () => {
  let gw: TestGateway;
  let browser: Browser;
  let payer: PayerBrowser;
  let key: string;

  beforeAll(async () => {
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3", SANDBOX_STK_DELAY_MS: "2500" } })]);
    key = (await createSandboxMerchant(gw, "Mama Mboga Ltd")).testKey;
    payer = await payerBrowser(browser, gw);
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  it("a push in flight and a card on another tab: the card is refused before charging, that tab follows the push, one payment completes", async () => {
    const { path, reference } = await initialize(gw, key);
    const [phoneTab, cardTab] = [await payer.open(path), await payer.open(path)];
    // The card typed in first, so it is sent well within the push's 2.5 s.
    await fillCard(cardTab, "4084 0840 8408 4081");
    await payByMpesa(phoneTab, "254708374149");
    await phoneTab.waitForSelector("#waiting:not([hidden])");
    await cardTab.click('#pay button[type="submit"]');
    // The card tab tells the truth: the push is out, on that phone.
    await cardTab.waitForSelector("#waiting:not([hidden])");
    expect(await cardTab.textContent("#result")).toContain("2547*****149");
    await Promise.all([phoneTab.waitForSelector("#result.completed"), cardTab.waitForSelector("#result.completed")]);
    const after = await recorded(gw, reference);
    expect(after).toMatchObject({ status: "completed", attempts: [{ method: "mpesa", status: "succeeded" }] });
    const { id } = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference }, select: { id: true } });
    expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: id, type: "transaction.completed" } })).toBe(1);
    await phoneTab.close();
    await cardTab.close();
  });

  it("a card being charged and M-Pesa on another tab: the push is refused, that tab says a payment is in progress and then shows it completed", async () => {
    const slow = await createSandboxMerchant(gw, "Slow Card Ltd");
    const channel = await apiClient(gw.url, slow.testKey).post("/api/payment-channels/create", { name: "Slow", provider: "sandbox", config: { charge_delay_ms: 3000 } });
    expect(channel.status, channel.text).toBe(201);
    const { path, reference } = await initialize(gw, slow.testKey, { payment_channel_id: channel.body.channel.id });
    const [cardTab, phoneTab] = [await payer.open(path), await payer.open(path)];
    await chooseMethod(phoneTab, "mpesa");
    await phoneTab.fill("#phone", "254708374149");
    await payByCard(cardTab, "4084 0840 8408 4081");
    await phoneTab.click('#mpesa button[type="submit"]');
    await phoneTab.waitForSelector("#result.pending");
    expect(await phoneTab.textContent("#result")).toBe("A payment for this transaction is in progress. This page will refresh shortly.");
    await Promise.all([phoneTab.waitForSelector("#result.completed"), cardTab.waitForSelector("#result.completed")]);
    expect(await recorded(gw, reference)).toMatchObject({ status: "completed", attempts: [{ method: "card", status: "succeeded" }] });
    await cardTab.close();
    await phoneTab.close();
    expect(payer.offHost).toEqual([]);
    expect(payer.errors).toEqual([]);
  });
});
