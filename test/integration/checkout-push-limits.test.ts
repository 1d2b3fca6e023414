import { randomInt } from "node:crypto";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { launchChromium } from "../support/browser.ts";
import { payerBrowser, payByMpesa } from "../support/checkout-page.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type HttpResult, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * Issue 35 item 6: M-Pesa prompts sent from the payer pages (the hosted checkout, and so every payment link) are
 * limited per phone number, per payment link and per merchant, and one prompt per phone per merchant waits at a
 * time; over the real routes the page uses, against a loopback Daraja. On with RATE_LIMIT_ENABLED=false.
 * Shared by two instances through Redis: test/postgres/push-limits-shared.test.ts.
 */
let fake: FakeDaraja;
let gw: TestGateway;
let browser: Browser;

const PER_LINK = 2;
const PER_MERCHANT = 4;

beforeAll(async () => {
  fake = await startFakeDaraja();
  [browser, gw] = await Promise.all([
    launchChromium(),
    startTestGateway({
      env: {
        ...darajaGatewayEnv(fake),
        // The request budgets are off: the push limits stay on (they protect payers, not the gateway).
        RATE_LIMIT_ENABLED: "false",
        JOBS_ENABLED: "false",
        CHECKOUT_MAX_ATTEMPTS: "3",
        PUSH_LIMIT_PER_LINK: String(PER_LINK),
        PUSH_LIMIT_PER_MERCHANT: String(PER_MERCHANT),
      },
    }),
  ]);
  fake.switches.callbackOrigin = gw.url;
});
afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await fake?.close();
});

const prisma = () => gw.gateway.db.prisma;
const payer = () => apiClient(gw.url);

/** A Kenyan mobile number no other test uses (the per-phone budget is across merchants): 2547XXXXXXXX. */
const newPhone = () => `2547${String(randomInt(10_000_000, 100_000_000))}`;

/** A merchant whose test mode collects through an M-Pesa channel on the fake Daraja. */
async function mpesaMerchant() {
  const merchant = await gw.createMerchant();
  const api = apiClient(gw.url, merchant.testKey);
  const channel = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: fake.channelConfig() });
  expect(channel.status, channel.text).toBe(201);
  const channelId = channel.body.channel.id as number;
  return {
    api,
    channelId,
    async checkout(): Promise<string> {
      const init = await api.post("/api/transactions/initialize", { amount: 15000, email: "payer@example.com", payment_channel_id: channelId });
      expect(init.status, init.text).toBe(200);
      return init.body.reference as string;
    },
  };
}

const push = (reference: string, phone: string) => payer().post(`/payment/checkout/${reference}/mpesa`, { phone });

/** The payer answers the checkout's latest prompt (1032: cancelled) through Daraja's callback; waits until recorded. */
async function answer(reference: string, resultCode = 1032) {
  const attempt = await prisma().transactionAttempt.findFirstOrThrow({ where: { transaction: { reference } }, orderBy: { id: "desc" } });
  await fake.sendStkCallback(attempt.checkoutRequestId!, { resultCode });
  await until(() => prisma().transactionAttempt.findUniqueOrThrow({ where: { id: attempt.id } }), (a) => a.status !== "pending");
}

const promptsTo = (phone: string) => [...fake.pushes.values()].filter((p) => String(p.body.PhoneNumber) === phone).length;

function expectRefusal(res: HttpResult, status: number, code: string, message: RegExp) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toEqual({ status: "error", code, message: expect.stringMatching(message) });
}

const PHONE_LIMIT = /^Too many M-Pesa prompts were sent to this phone number; try again in \d+ (minutes|seconds)$/;
const PAGE_LIMIT = /^Too many M-Pesa payments were started here; try again in \d+ (minutes|seconds)$/;
const WAITING = /^An M-Pesa prompt sent to this phone number is still waiting for an answer/;

describe("M-Pesa prompts from the payer pages", () => {
  it("per phone: 3 in the window however the number is written, across checkouts and merchants; the 4th is a 429 with Retry-After", async () => {
    const [a, b] = [await mpesaMerchant(), await mpesaMerchant()];
    const phone = newPhone();
    const local = `0${phone.slice(3)}`;
    const spaced = `+254 ${phone.slice(3, 6)} ${phone.slice(6, 9)} ${phone.slice(9)}`;
    for (const [merchant, written] of [[a, local], [a, phone], [b, spaced]] as const) {
      const reference = await merchant.checkout();
      const sent = await push(reference, written);
      expect(sent.status, sent.text).toBe(202);
      await answer(reference);
    }
    const reference = await b.checkout();
    const refused = await push(reference, `+${phone}`);
    expectRefusal(refused, 429, "mpesa_prompt_limit", PHONE_LIMIT);
    const wait = Number(refused.headers.get("retry-after"));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(600);
    expect(promptsTo(phone)).toBe(3);
    // Another number on the same checkout is not held back by this one's budget.
    expect((await push(reference, newPhone())).status).toBe(202);
  });

  it("one waiting prompt per phone per merchant: a second checkout's is refused until the first is answered, without spending the budget", async () => {
    const [a, b] = [await mpesaMerchant(), await mpesaMerchant()];
    const phone = newPhone();
    const first = await a.checkout();
    expect((await push(first, phone)).status).toBe(202);
    const second = await a.checkout();
    expectRefusal(await push(second, `0${phone.slice(3)}`), 409, "mpesa_prompt_pending", WAITING);
    // Another merchant's checkout is another business: its prompt may go out.
    expect((await push(await b.checkout(), phone)).status).toBe(202);
    await answer(first);
    // Answered (cancelled): the second checkout may prompt now; the refusal above gave its push back, so this is the third.
    expect((await push(second, phone)).status).toBe(202);
    expect(promptsTo(phone)).toBe(3);
    expectRefusal(await push(await b.checkout(), phone), 429, "mpesa_prompt_limit", PHONE_LIMIT);
  });

  it("the same checkout prompts again after its prompt failed or expired; while it waits, its second push is the usual conflict", async () => {
    const merchant = await mpesaMerchant();
    const phone = newPhone();
    const reference = await merchant.checkout();
    expect((await push(reference, phone)).status).toBe(202);
    expectRefusal(await push(reference, phone), 409, "conflict", /^A payment for this transaction is in progress$/);
    await answer(reference);
    expect((await push(reference, phone)).status).toBe(202);
    // A prompt past its lifetime (STK_LIFETIME_MS) no longer holds the number, even before the query job fails it.
    const attempt = await prisma().transactionAttempt.findFirstOrThrow({ where: { transaction: { reference } }, orderBy: { id: "desc" } });
    const lapsed = new Date(Date.now() - 10 * 60_000);
    await prisma().$transaction([
      prisma().transactionAttempt.update({ where: { id: attempt.id }, data: { createdAt: lapsed } }),
      prisma().transaction.update({ where: { reference }, data: { chargeStartedAt: lapsed } }),
    ]);
    expect((await push(await merchant.checkout(), phone)).status).toBe(202);
    expect(promptsTo(phone)).toBe(3);
  });

  it(`per payment link (${PER_LINK}) and per merchant and mode (${PER_MERCHANT}), whoever the phones`, async () => {
    const merchant = await mpesaMerchant();
    const link = await merchant.api.post("/v1/payment-links", { amount: 15000, description: "Harambee", reusable: true, payment_channel_id: merchant.channelId });
    expect(link.status, link.text).toBe(201);
    const throughLink = async () => {
      const made = await fetch(`${gw.url}/pay/${link.body.data.slug}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "email=giver%40example.com", redirect: "manual" });
      expect(made.status).toBe(303);
      return made.headers.get("location")!.split("/").pop()!;
    };
    for (let i = 0; i < PER_LINK; i++) expect((await push(await throughLink(), newPhone())).status).toBe(202);
    const refusedPhone = newPhone();
    expectRefusal(await push(await throughLink(), refusedPhone), 429, "rate_limited", PAGE_LIMIT);
    // The merchant's other checkouts are not the link's: up to the merchant's budget.
    for (let i = PER_LINK; i < PER_MERCHANT; i++) expect((await push(await merchant.checkout(), newPhone())).status).toBe(202);
    expectRefusal(await push(await merchant.checkout(), newPhone()), 429, "rate_limited", PAGE_LIMIT);
    // The refused number spent nothing of its own budget: another merchant may still prompt it.
    expect(promptsTo(refusedPhone)).toBe(0);
    const other = await mpesaMerchant();
    expect((await push(await other.checkout(), refusedPhone)).status).toBe(202);
  });

  it("the built-in sandbox, which prompts no phone, is not limited", async () => {
    const merchant = await createSandboxMerchant(gw);
    const api = apiClient(gw.url, merchant.testKey);
    for (let i = 0; i < 5; i++) {
      const init = await api.post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com" });
      // 254700001019 never answers: each of the five stays waiting on the same number.
      expect((await push(init.body.reference, "254700001019")).status).toBe(202);
    }
  });

  it("the page says why, in its language, and keeps the number form: the phone's limit, then a prompt still waiting", async () => {
    // The number's budget is spent at another merchant (it is the phone's, across merchants).
    const [elsewhere, merchant] = [await mpesaMerchant(), await mpesaMerchant()];
    const limited = newPhone();
    for (let i = 0; i < 3; i++) {
      const reference = await elsewhere.checkout();
      expect((await push(reference, limited)).status).toBe(202);
      await answer(reference);
    }
    const waiting = newPhone();
    expect((await push(await merchant.checkout(), waiting)).status).toBe(202);

    for (const [locale, limitText, waitingText] of [
      ["en", /^Too many payment prompts were sent to this number\. Try again in \d+ minute\(s\), or use another number\.$/, /^A payment prompt sent to this number is still waiting\./],
      ["sw", /^Maombi mengi mno ya malipo yametumwa kwa namba hii\. Jaribu tena baada ya dakika \d+, au tumia namba nyingine\.$/, /^Ombi la malipo lililotumwa kwa namba hii bado linasubiri\./],
    ] as const) {
      const payerPage = await payerBrowser(browser, gw, { locale });
      const reference = await merchant.checkout();
      const page = await payerPage.open(`/payment/checkout/${reference}`);
      await payByMpesa(page, `0${limited.slice(3)}`);
      await page.waitForSelector("#result.failed");
      expect(await page.textContent("#result")).toMatch(limitText);
      expect(await page.isVisible("#phone")).toBe(true);
      expect(await page.isEnabled('#mpesa button[type="submit"]')).toBe(true);
      await page.fill("#phone", waiting);
      await page.click('#mpesa button[type="submit"]');
      await page.waitForFunction((text) => new RegExp(text).test(document.getElementById("result")!.textContent ?? ""), waitingText.source);
      expect(await page.isVisible("#phone")).toBe(true);
      expect(await prisma().transactionAttempt.count({ where: { transaction: { reference } } })).toBe(0);
      expect(payerPage.offHost).toEqual([]);
      expect(payerPage.errors).toEqual([]);
      await payerPage.close();
    }
  });
});
