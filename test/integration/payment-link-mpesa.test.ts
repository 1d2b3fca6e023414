import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.ts";
import { expectNoHorizontalScroll, expectNoSeriousAxeViolations, firstWaiting, payerBrowser, recordFirstWaiting, type PayerBrowser } from "../support/checkout-page.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * A payment link paid by M-Pesa from its first page (issue 41): the method, the phone and an optional e-mail on one
 * form, whose submission sends the prompt, so the payer's next page is "check your phone". With a card the e-mail
 * stays required. Sandbox channel: its STK push completes by itself after SANDBOX_STK_DELAY_MS.
 */
describe("payment link paid by M-Pesa without an e-mail", () => {
  let gw: TestGateway;
  let browser: Browser;
  let api: ReturnType<typeof apiClient>;
  let testKey: string;
  const payers: PayerBrowser[] = [];

  beforeAll(async () => {
    [browser, gw] = await Promise.all([launchChromium(), startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "1500" } })]);
    const merchant = await createSandboxMerchant(gw, "Duka la Mama");
    testKey = merchant.testKey;
    api = apiClient(gw.url, testKey);
  });
  afterAll(async () => {
    for (const payer of payers) expect(payer.offHost).toEqual([]), expect(payer.errors).toEqual([]);
    await browser?.close();
    await gw?.close();
  });

  const createLink = async (body: Record<string, unknown>) => {
    const res = await api.post("/v1/payment-links", body);
    expect(res.status, res.text).toBe(201);
    return res.body.data as { id: number; slug: string };
  };
  const paymentsOf = async (id: number) => (await api.get(`/v1/payment-links/${id}`)).body.data.payments_count as number;
  const postForm = (slug: string, body: string) =>
    fetch(`${gw.url}/pay/${slug}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body, redirect: "manual" });

  async function openLink(slug: string, width: number): Promise<Page> {
    const payer = await payerBrowser(browser, gw, { width });
    payers.push(payer);
    return payer.open(`/pay/${slug}`);
  }

  it("offers M-Pesa first; the phone and an optional e-mail on the first page; axe clean at 1280 and 390 px", async () => {
    const link = await createLink({ amount: 150000, description: "School fees, term 2", reusable: true });
    for (const width of [1280, 390]) {
      const page = await openLink(link.slug, width);
      expect(await page.isChecked("#method-mpesa")).toBe(true);
      expect(await page.isVisible("#phone")).toBe(true);
      // What is seen and what is read out: the other method's words are hidden (CSS alone, the page has no script).
      expect(await page.innerText("#email-hint")).toBe("Optional with M-Pesa: give it to get your receipt by e-mail.");
      expect(await page.getAttribute("#email", "required")).toBeNull();
      expect(await page.getByRole("button", { name: "Pay KES 1,500.00 with M-Pesa", exact: true }).count()).toBe(1);
      await expectNoSeriousAxeViolations(page, `link page, M-Pesa, ${width} px`);
      await expectNoHorizontalScroll(page, width);
      await page.screenshot({ path: `/tmp/link-mpesa-${width}.png`, fullPage: true });
      // Card: the phone goes, the e-mail is needed, the button continues to the card form.
      await page.check("#method-card");
      expect(await page.isVisible("#phone")).toBe(false);
      expect(await page.innerText("#email-hint")).toBe("Needed to pay by card. Your receipt is sent here.");
      expect(await page.getByRole("button", { name: "Continue to payment", exact: true }).count()).toBe(1);
      expect(await page.getByRole("textbox", { name: "Your e-mail", description: "Needed to pay by card. Your receipt is sent here." }).count()).toBe(1);
      await expectNoSeriousAxeViolations(page, `link page, card, ${width} px`);
      await page.screenshot({ path: `/tmp/link-card-${width}.png`, fullPage: true });
      await page.close();
    }
  });

  it("a single-use link paid by M-Pesa with no e-mail: the first page sends the prompt, the payment completes, the link records it", async () => {
    const link = await createLink({ amount: 2500, description: "Invoice 501" });
    const page = await openLink(link.slug, 390);
    await recordFirstWaiting(page);
    await page.fill("#phone", "0708 374 149");
    await Promise.all([page.waitForURL(/\/payment\/checkout\//), page.click('button[type="submit"]')]);
    // The checkout opens on its "check your phone": no second form.
    const reference = new URL(page.url()).pathname.split("/").pop()!;
    const waiting = await firstWaiting(page);
    expect(waiting.title).toBe("Check your phone");
    expect(waiting.result).toContain("2547*****149");
    await page.screenshot({ path: "/tmp/link-mpesa-waiting-390.png", fullPage: true });
    await page.locator("#result.completed").waitFor();
    // The settled page as the payer finds it again (the live page may itself reload to show the receipt).
    await page.reload();
    await page.locator("#result.completed").waitFor();
    await page.screenshot({ path: "/tmp/link-mpesa-completed-390.png", fullPage: true });
    await expectNoSeriousAxeViolations(page, "checkout after a link's M-Pesa payment");

    const prisma = gw.gateway.db.prisma;
    const row = await prisma.transaction.findUniqueOrThrow({ where: { reference } });
    expect(row).toMatchObject({ status: "completed", paymentMethod: "momo_stk", email: null, customerId: null, phoneNumber: "+254708374149", amount: 2500n });
    expect(await paymentsOf(link.id)).toBe(1);
    expect((await fetch(`${gw.url}/pay/${link.slug}`)).status).toBe(410);

    // Everything that shows a payment's e-mail shows none: REST, GraphQL, the CSV, the webhook snapshot; no e-mailed receipt.
    const verify = await api.get(`/api/transactions/verify/${reference}`);
    expect(verify.status, verify.text).toBe(200);
    expect(verify.body.transaction).toMatchObject({ reference, status: "completed", payment_method: "momo_stk" });
    for (const path of ["/api/transactions/list?limit=100"]) {
      const list = await api.get(path);
      expect(list.status, list.text).toBe(200);
      const item = list.body.data.find((t: { reference: string }) => t.reference === reference);
      expect(item, path).toMatchObject({ status: "completed" });
      // The published item has no e-mail field; where one is added it is null, never "".
      if ("email" in item) expect(item.email, path).toBeNull();
      if ("customer" in item) expect(item.customer, path).toBeNull();
    }
    const gql = await api.post("/graphql", { query: `query($r: String!) { transaction(reference: $r) { ... on Transaction { status email customer { id } metadata } } }`, variables: { r: reference } });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data.transaction).toEqual({ status: "completed", email: null, customer: null, metadata: { payment_link: link.slug } });
    const csv = await fetch(`${gw.url}/v1/reports/transactions.csv`, { headers: { "x-api-key": testKey } });
    expect(csv.status).toBe(200);
    const lines = (await csv.text()).split(/\r?\n/);
    const header = lines[0]!.split(",");
    const line = lines.find((l) => l.includes(reference))!.split(",");
    expect(line[header.indexOf("email")]).toBe("");
    const completed = await prisma.event.findFirstOrThrow({ where: { transactionId: row.id, type: "transaction.completed" } });
    expect((completed.payload as { transaction: { email: unknown } }).transaction.email).toBeNull();
    expect(await prisma.mailMessage.count({ where: { transactionId: row.id, kind: "payment_receipt" } })).toBe(0);
  });

  it("with M-Pesa an e-mail given is kept (and its customer made); a bad phone or a cents amount is refused on the first page, making nothing", async () => {
    const link = await createLink({ min_amount: 100, description: "Harambee", reusable: true });
    const bad = await postForm(link.slug, "method=mpesa&amount=150&phone=12345");
    expect(bad.status).toBe(400);
    const html = await bad.text();
    expect(html).toContain(`<p id="error" class="failed" role="alert">Enter a valid M-Pesa phone number, for example 0712 345 678.</p>`);
    expect(html).toMatch(/id="phone"[^>]*aria-invalid="true" aria-describedby="error phone-hint"[^>]*value="12345"/);
    const cents = await postForm(link.slug, "method=mpesa&amount=150.50&phone=0708374149");
    expect(cents.status).toBe(400);
    expect(await cents.text()).toContain("Amount: M-Pesa takes whole amounts only (no cents). Round it, or pay by card.");
    const badEmail = await postForm(link.slug, "method=mpesa&amount=150&phone=0708374149&email=not-an-email");
    expect(badEmail.status).toBe(400);
    expect(await badEmail.text()).toContain("Enter a valid e-mail address.");
    expect(await paymentsOf(link.id)).toBe(0);

    const made = await postForm(link.slug, "method=mpesa&amount=150&phone=0708374149&email=Mama%40Example.com");
    expect(made.status).toBe(303);
    const reference = made.headers.get("location")!.split("/").pop()!;
    const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference }, include: { customer: true, attempts: true } });
    expect(row.email).toBe("mama@example.com");
    expect(row.customer?.email).toBe("mama@example.com");
    expect(row.attempts.map((a) => a.method)).toEqual(["mpesa"]);
  });

  it("a card payer must give an e-mail: the form says so clearly and makes nothing", async () => {
    const link = await createLink({ amount: 1000, description: "Card only please", reusable: true });
    const page = await openLink(link.slug, 1280);
    await page.check("#method-card");
    await Promise.all([page.waitForLoadState("load"), page.click('button[type="submit"]')]);
    expect(await page.textContent("#error")).toBe("Enter your e-mail: it is needed to pay by card (or choose M-Pesa).");
    expect(await page.isChecked("#method-card")).toBe(true);
    expect(await page.getAttribute("#email", "aria-invalid")).toBe("true");
    await expectNoSeriousAxeViolations(page, "link page, card without e-mail");
    await page.screenshot({ path: "/tmp/link-card-no-email-1280.png", fullPage: true });
    expect(await paymentsOf(link.id)).toBe(0);
    // The same over plain HTTP; /api's initialize keeps requiring the e-mail as published.
    expect((await postForm(link.slug, "method=card&email=")).status).toBe(400);
    expect((await api.post("/api/transactions/initialize", { amount: 1000 })).status).toBe(400);
    await page.fill("#email", "card@example.com");
    await Promise.all([page.waitForURL(/\/payment\/checkout\//), page.click('button[type="submit"]')]);
    expect(await page.isVisible("#card-number")).toBe(true);
    expect(await paymentsOf(link.id)).toBe(1);
  });

  it("in Swahili, the M-Pesa page speaks Swahili", async () => {
    const link = await createLink({ amount: 5000, description: "Sadaka", reusable: true });
    const res = await fetch(`${gw.url}/pay/${link.slug}?lang=sw`);
    const html = await res.text();
    expect(html).toContain("Lipa KES 50.00 kwa M-Pesa");
    expect(html).toContain("Si lazima kwa M-Pesa");
  });
});
