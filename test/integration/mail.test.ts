import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { dkimVerify } from "mailauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { graphql } from "../gql/index.ts";
import { startSmtpFake, type SmtpFake } from "../fakes/smtp.ts";
import { apiClient, bearerClient, createSandboxMerchant, paidTransaction, SANDBOX_CARD, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectCleanLedger } from "../support/ledger-check.ts";
import { solidPng } from "../support/png.ts";
import { expectNothingMoreWithin, until, waitUntil } from "../support/wait.ts";

/**
 * E-mail (issue 38) against a real SMTP server on loopback (smtp-server), each message parsed as a mail client would
 * (mailparser): a payment completed once is one receipt, in the merchant's brand (logo inline) and the payer's
 * language; temporary refusals are retried, permanent ones recorded; STARTTLS is required unless the URL says
 * tls=off; DKIM signatures verify (mailauth); CR/LF in any field never makes a header; an address that is not one is
 * never written to; notices reach the team who want them.
 */

const UpdateBrand = graphql(`
  mutation MailBrandUpdate($input: UpdateBrandInput!) {
    updateBrand(input: $input) { __typename ... on Brand { receiptsEnabled replyTo website timezone language } ... on Error { code message } }
  }
`);
const OptOut = graphql(`
  mutation MailOptOut($optOuts: [String!]!) { updateNoticePreferences(optOuts: $optOuts) { __typename ... on MutationUpdateNoticePreferencesSuccess { data } ... on Error { code message } } }
`);

let smtp: SmtpFake;
let gw: TestGateway;
const dkimDir = mkdtempSync(path.join(tmpdir(), "dkim-"));
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
writeFileSync(path.join(dkimDir, "key.pem"), privateKey.export({ type: "pkcs8", format: "pem" }));
const dkimTxt = `v=DKIM1; k=rsa; p=${publicKey.export({ type: "spki", format: "der" }).toString("base64")}`;

const prisma = () => gw.gateway.db.prisma;
const mailsTo = (address: string) => smtp.received.filter((m) => m.envelope.to.includes(address));
async function messagesOf(reference: string) {
  const t = await prisma().transaction.findUniqueOrThrow({ where: { reference } });
  return prisma().mailMessage.findMany({ where: { transactionId: t.id }, orderBy: { id: "asc" } });
}

beforeAll(async () => {
  smtp = await startSmtpFake();
  gw = await startTestGateway({
    env: {
      SMTP_URL: smtp.url,
      MAIL_FROM: "Duka Receipts <receipts@duka.test>",
      MAIL_DKIM_DOMAIN: "duka.test",
      MAIL_DKIM_SELECTOR: "s1",
      MAIL_DKIM_PRIVATE_KEY_FILE: path.join(dkimDir, "key.pem"),
      MAIL_RETRY_SCHEDULE: "200ms,200ms,200ms",
      RATE_LIMIT_ENABLED: "false",
      SANDBOX_REFUND_DELAY_MS: "1",
      SANDBOX_DISPUTE_DELAY_MS: "200",
      PUBLIC_BASE_URL: "http://127.0.0.1:1",
    },
  });
});

afterAll(async () => {
  await expectCleanLedger(gw);
  await gw?.close();
  await smtp?.close();
});

describe("payment receipts", () => {
  it("a completed payment is one receipt: brand, logo inline, amount, references, card, DKIM-signed, and a receipt page", async () => {
    const merchant = await createSandboxMerchant(gw, "Mama Duka Ltd");
    const owner = bearerClient(gw.url, await gw.signIn(merchant.id, "owner"));
    const brand = await owner.graphql(UpdateBrand, { input: { displayName: "Mama Duka", supportEmail: "help@duka.test", replyTo: "replies@duka.test", website: "https://duka.test", timezone: "Africa/Nairobi" } });
    expect(brand.body.data?.updateBrand, brand.text).toMatchObject({ __typename: "Brand", timezone: "Africa/Nairobi", website: "https://duka.test/" });
    const logo = await apiClient(gw.url).raw("/v1/brand/logo", { method: "PUT", headers: { "content-type": "image/png", authorization: `Bearer ${await gw.signIn(merchant.id, "owner")}` }, body: new Uint8Array(solidPng(40, 20, [10, 80, 160])) });
    expect(logo.status, logo.text).toBe(200);

    const reference = await paidTransaction(gw.url, merchant.testKey, { amount: 150_050, email: "payer.one@example.com", description: "School fees, term 1", reference: "ORDER-1001" });
    const [mail] = await until(() => mailsTo("payer.one@example.com"), (m) => m.length >= 1);
    await expectNothingMoreWithin(1500, () => mailsTo("payer.one@example.com").length);
    expect(mailsTo("payer.one@example.com")).toHaveLength(1);
    const parsed = mail!.parsed;
    expect(parsed.from?.value[0]).toMatchObject({ address: "receipts@duka.test", name: "Duka Receipts" });
    expect(parsed.replyTo?.value[0]?.address).toBe("replies@duka.test");
    expect(parsed.subject).toContain("Mama Duka");
    expect(parsed.subject).toContain("KES 1,500.50");
    expect(parsed.text).toContain(reference);
    expect(parsed.text).toContain("ORDER-1001");
    expect(parsed.text).toContain("Visa •••• 4242");
    expect(parsed.text).toContain("School fees, term 1");
    expect(parsed.text).toContain("help@duka.test");
    // The logo travels inline; nothing in the HTML loads from elsewhere.
    // (mailparser, as a mail client, shows the cid: image as a data: URL once it has resolved it.)
    const html = String(parsed.html);
    const inline = parsed.attachments.find((a) => a.contentType === "image/png");
    expect(inline).toMatchObject({ contentDisposition: "inline", related: true });
    expect(html).toContain("data:image/png;base64,");
    expect(html).not.toMatch(/<img[^>]+src=["']https?:/i);
    expect(html).toContain("KES 1,500.50");

    // The receipt page the e-mail links to (the path of its public URL, on this gateway).
    const link = /\/receipts\/([A-Za-z0-9_-]{22})/.exec(parsed.text ?? "");
    expect(link, parsed.text).not.toBeNull();
    const page = await apiClient(gw.url).raw(`/receipts/${link![1]}`, {});
    expect(page.status).toBe(200);
    expect(page.text).toContain("KES 1,500.50");
    expect(page.text).toContain(reference);
    expect((await apiClient(gw.url).raw(`/receipts/${"A".repeat(22)}`, {})).status).toBe(404);
    expect((await apiClient(gw.url).raw("/receipts/%00", {})).status).toBeLessThan(500);

    // DKIM: verified as a receiver would, against the selector's public key.
    const verdict = await dkimVerify(mail!.raw, {
      resolver: async (name: string, type: string) => {
        if (type === "TXT" && name === "s1._domainkey.duka.test") return [[dkimTxt]];
        throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
      },
    });
    expect(verdict.results[0]?.status?.result, JSON.stringify(verdict.results[0]?.status)).toBe("pass");

    const [message] = await until(() => messagesOf(reference), (rows) => rows[0]?.status === "sent");
    expect(message).toMatchObject({ kind: "payment_receipt", status: "sent", toAddress: "payer.one@example.com", attempts: 1 });
  });

  it("receipts rendered in one batch each carry their own payment: amount, reference, card and receipt page", async () => {
    const merchant = await createSandboxMerchant(gw);
    const jobs = gw.gateway.services.jobs;
    // The runner stopped while the payments complete, their receipts are then claimed together: one batch of six.
    await jobs.stop();
    let references: string[];
    try {
      references = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => paidTransaction(gw.url, merchant.testKey, { amount: 10_000 + n, email: `batch.${n}@example.com` })));
      expect(await jobs.runDueJobs(["mail.send"])).toBeGreaterThanOrEqual(6);
    } finally {
      jobs.start();
    }
    for (const [i, reference] of references.entries()) {
      const n = i + 1;
      const [mail] = await until(() => mailsTo(`batch.${n}@example.com`), (m) => m.length >= 1);
      const text = mail!.parsed.text ?? "";
      expect(text).toContain(reference);
      expect(text).toContain(`KES 100.0${n}`);
      expect(text).toContain("Visa •••• 4242");
      const token = /\/receipts\/([A-Za-z0-9_-]{22})/.exec(text)?.[1];
      const page = await apiClient(gw.url).raw(`/receipts/${token}`, {});
      expect(page.status).toBe(200);
      expect(page.text).toContain(reference);
      expect(page.text).toContain(`KES 100.0${n}`);
    }
    expect(references.flatMap((_, i) => mailsTo(`batch.${i + 1}@example.com`))).toHaveLength(6);
  });

  it("the payer's language on the checkout page is the receipt's (Swahili), and a refund gets its own receipt saying what remains", async () => {
    const merchant = await createSandboxMerchant(gw);
    const init = await apiClient(gw.url, merchant.testKey).post("/api/transactions/initialize", { amount: 200_000, email: "mwalimu@example.com" });
    const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, { ...SANDBOX_CARD, lang: "sw" });
    expect(paid.status, paid.text).toBe(200);
    const [receipt] = await until(() => mailsTo("mwalimu@example.com"), (m) => m.length >= 1);
    expect(receipt!.parsed.subject).toMatch(/Risiti/);
    const refund = await apiClient(gw.url, merchant.testKey).post("/v1/refunds", { transaction: init.body.reference, amount: 50_000 });
    expect(refund.status, refund.text).toBe(201);
    const mails = await until(() => mailsTo("mwalimu@example.com"), (m) => m.length >= 2);
    const refundMail = mails[1]!.parsed;
    expect(refundMail.text).toContain("KES 500.00");
    expect(refundMail.text).toContain("KES 1,500.00");
    await expectNothingMoreWithin(1000, () => mailsTo("mwalimu@example.com").length);
    expect(mailsTo("mwalimu@example.com")).toHaveLength(2);
  });

  it("CR/LF in every field a payer or merchant can set never makes a header; the one recipient is the payer", async () => {
    const merchant = await createSandboxMerchant(gw);
    const owner = bearerClient(gw.url, await gw.signIn(merchant.id, "owner"));
    // The brand refuses line breaks outright (its name, support and reply-to addresses, website).
    for (const input of [{ displayName: "Duka\r\nBcc: evil@x.test" }, { supportEmail: "a@b.test\r\nBcc: evil@x.test" }, { replyTo: "a@b.test\nBcc: evil@x.test" }, { website: "https://x.test/\r\nBcc: evil@x.test" }]) {
      const res = await owner.graphql(UpdateBrand, { input });
      expect(res.body.data?.updateBrand, JSON.stringify(input)).toMatchObject({ code: "validation_failed" });
    }
    const injected = "Tea\r\nBcc: evil@x.test\r\nX-Injected: yes\r\n\r\n<b>body</b>";
    const reference = await paidTransaction(gw.url, merchant.testKey, {
      amount: 1000,
      email: "crlf@example.com",
      description: injected,
      reference: `ORD\r\nBcc: evil2@x.test`,
      first_name: "A\r\nBcc: evil3@x.test",
      metadata: { note: injected },
    });
    const [mail] = await until(() => mailsTo("crlf@example.com"), (m) => m.length >= 1);
    expect(mail!.envelope.to).toEqual(["crlf@example.com"]);
    expect(smtp.received.some((m) => m.envelope.to.some((to) => to.includes("evil")))).toBe(false);
    const headers = mail!.parsed.headerLines.map((h) => h.key);
    expect(headers).not.toContain("bcc");
    expect(headers).not.toContain("x-injected");
    expect(mail!.parsed.subject).not.toMatch(/[\r\n]/);
    expect(mail!.parsed.html).not.toContain("<b>body</b>");
    // Recorded as sent once the server's 250 is in (a moment after the server has the message).
    await until(() => messagesOf(reference), (rows) => rows[0]?.status === "sent");
  });

  it("an e-mail on record that is not an address is never written to: the message says why, on the payment", async () => {
    const merchant = await createSandboxMerchant(gw);
    // The API refuses such an address; a row from elsewhere (an import, an older version) may still hold one.
    const init = await apiClient(gw.url, merchant.testKey).post("/api/transactions/initialize", { amount: 1000, email: "legacy@example.com" });
    await prisma().$executeRawUnsafe(`UPDATE transactions SET email = 'not an address, really' WHERE reference = $1`, init.body.reference);
    expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, SANDBOX_CARD)).status).toBe(200);
    const [message] = await until(() => messagesOf(init.body.reference), (rows) => rows[0]?.status === "skipped");
    expect(message!.lastError).toContain("is not an e-mail address");
    expect(smtp.received.some((m) => m.envelope.to.some((to) => to.includes("not an address")))).toBe(false);
  });

  it("a temporary refusal (451) is retried and the receipt sent once; a permanent one (550) is recorded and never retried", async () => {
    const merchant = await createSandboxMerchant(gw);
    smtp.refuse = (to, n) => (to === "later@example.com" && n === 1 ? [451, "4.3.0 Try again later"] : to === "never@example.com" ? [550, "5.1.1 No such user"] : null);
    try {
      const later = await paidTransaction(gw.url, merchant.testKey, { amount: 1000, email: "later@example.com" });
      const never = await paidTransaction(gw.url, merchant.testKey, { amount: 1000, email: "never@example.com" });
      const [sent] = await until(() => messagesOf(later), (rows) => rows[0]?.status === "sent");
      expect(sent!.attempts).toBe(2);
      expect(mailsTo("later@example.com")).toHaveLength(1);
      const [failed] = await until(() => messagesOf(never), (rows) => rows[0]?.status === "failed");
      expect(failed!.lastError).toContain("550");
      await expectNothingMoreWithin(1000, () => smtp.tries.get("never@example.com"));
      expect(smtp.tries.get("never@example.com")).toBe(1);
    } finally {
      smtp.refuse = () => null;
    }
  });

  it("receipts off: payers get none; a resend is the owner's, and limited", async () => {
    const merchant = await createSandboxMerchant(gw);
    const owner = bearerClient(gw.url, await gw.signIn(merchant.id, "owner"));
    const reference = await paidTransaction(gw.url, merchant.testKey, { amount: 2500, email: "again@example.com" });
    await until(() => mailsTo("again@example.com"), (m) => m.length === 1);
    // A developer may not resend (owners only); the owner's key may.
    const developer = bearerClient(gw.url, await gw.signIn(merchant.id, "developer"));
    expect((await developer.post(`/v1/transactions/${reference}/receipt`, {})).status).toBe(403);
    for (let i = 0; i < 3; i++) {
      const res = await apiClient(gw.url, merchant.testKey).post(`/v1/transactions/${reference}/receipt`, {});
      expect(res.status, res.text).toBe(202);
      expect(res.body.data).toMatchObject({ kind: "payment_receipt" });
    }
    const limited = await apiClient(gw.url, merchant.testKey).post(`/v1/transactions/${reference}/receipt`, {});
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ status: "error", code: "rate_limited" });
    await until(() => mailsTo("again@example.com"), (m) => m.length === 4);
    expect((await apiClient(gw.url, merchant.testKey).post(`/v1/transactions/nope/receipt`, {})).status).toBe(404);

    expect((await owner.graphql(UpdateBrand, { input: { receiptsEnabled: false } })).body.data?.updateBrand).toMatchObject({ receiptsEnabled: false });
    const quiet = await paidTransaction(gw.url, merchant.testKey, { amount: 2500, email: "quiet@example.com" });
    await expectNothingMoreWithin(1000, () => mailsTo("quiet@example.com").length);
    expect(mailsTo("quiet@example.com")).toHaveLength(0);
    expect(await messagesOf(quiet)).toHaveLength(0);
  });
});

describe("notices to the merchant's team", () => {
  it("a failed refund reaches each owner, and developers in test mode, unless they opted out; never a viewer", async () => {
    const merchant = await createSandboxMerchant(gw);
    const owner = await gw.createUser(merchant.id, "owner");
    const optedOut = await gw.createUser(merchant.id, "owner");
    const developer = await gw.createUser(merchant.id, "developer");
    const viewer = await gw.createUser(merchant.id, "viewer");
    const login = async (u: { email: string; password: string }) => (await apiClient(gw.url).post("/v1/auth/login", u)).body.data.access_token as string;
    const set = await bearerClient(gw.url, await login(optedOut)).graphql(OptOut, { optOuts: ["refund_failed", "daily_summary"] });
    expect(set.body.data?.updateNoticePreferences, set.text).toMatchObject({ data: ["refund_failed", "daily_summary"] });
    const bad = await bearerClient(gw.url, await login(owner)).graphql(OptOut, { optOuts: ["everything"] });
    expect(bad.body.data?.updateNoticePreferences).toMatchObject({ code: "validation_failed" });

    const reference = await paidTransaction(gw.url, merchant.testKey, { amount: 5000, email: "refundee@example.com" }, { ...SANDBOX_CARD, card_number: "4000000000005126" });
    const refund = await apiClient(gw.url, merchant.testKey).post("/v1/refunds", { transaction: reference });
    expect(refund.status, refund.text).toBe(201);
    const [notice] = await until(() => mailsTo(owner.email), (m) => m.length >= 1);
    expect(notice!.parsed.subject).toMatch(/Refund failed/i);
    expect(notice!.parsed.text).toContain(refund.body.data.reference);
    await until(() => mailsTo(developer.email), (m) => m.length >= 1);
    await expectNothingMoreWithin(1000, () => mailsTo(optedOut.email).length + mailsTo(viewer.email).length);
    expect(mailsTo(optedOut.email)).toHaveLength(0);
    expect(mailsTo(viewer.email)).toHaveLength(0);
    expect(mailsTo(owner.email)).toHaveLength(1);
  });

  it("a dispute reaches the owners with its deadline", async () => {
    const merchant = await createSandboxMerchant(gw);
    const owner = await gw.createUser(merchant.id, "owner");
    const reference = await paidTransaction(gw.url, merchant.testKey, { amount: 7000, email: "disputer@example.com" }, { ...SANDBOX_CARD, card_number: "4000000000000259" });
    const [notice] = await until(() => mailsTo(owner.email), (m) => m.some((x) => /dispute/i.test(x.parsed.subject ?? "")));
    expect(notice!.parsed.text).toContain(reference);
    expect(notice!.parsed.text).toContain("KES 70.00");
    const dispute = await prisma().dispute.findFirstOrThrow({ where: { merchantId: merchant.id } });
    expect(dispute.dueBy).not.toBeNull();
    // The deadline, in the merchant's zone (UTC here), as the notice writes dates.
    expect(notice!.parsed.text).toContain(`${dispute.dueBy!.getUTCFullYear()}`);
    expect(notice!.parsed.text).toContain("(UTC)");
  });

  it("a subscription's invoice is e-mailed to its customer, beside its charge's receipt", async () => {
    const merchant = await createSandboxMerchant(gw);
    const api = apiClient(gw.url, merchant.testKey);
    const customer = (await api.post("/v1/customers", { email: "subscriber@example.com" })).body.data.id as number;
    const init = await api.post("/api/transactions/initialize", { amount: 100, currency: "KES", customer });
    expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, { ...SANDBOX_CARD, save_payment_method: true })).status).toBe(200);
    const method = (await api.get(`/v1/customers/${customer}/payment-methods`)).body.data[0].id as string;
    const plan = (await api.post("/v1/plans", { name: "Gold", amount: 2_500, currency: "KES", interval: "month" })).body.data.id as string;
    const sub = await api.post("/v1/subscriptions", { customer, plan, payment_method: method });
    expect(sub.status, sub.text).toBe(201);
    const mails = await until(() => mailsTo("subscriber@example.com"), (m) => m.length >= 3);
    const invoiceMail = mails.find((m) => /invoice/i.test(m.parsed.subject ?? ""));
    expect(invoiceMail, mails.map((m) => m.parsed.subject).join(" | ")).toBeDefined();
    expect(invoiceMail!.parsed.text).toContain("KES 25.00");
    // The first payment's receipt, the invoice, and the invoice charge's receipt: each once.
    await expectNothingMoreWithin(1000, () => mailsTo("subscriber@example.com").length);
    expect(mailsTo("subscriber@example.com").filter((m) => /invoice/i.test(m.parsed.subject ?? ""))).toHaveLength(1);

    // A card the bank stopped after it was saved: the invoice's charge fails, and the payer hears of it.
    const stopped = (await api.post("/v1/customers", { email: "stopped@example.com" })).body.data.id as number;
    const first = await api.post("/api/transactions/initialize", { amount: 100, currency: "KES", customer: stopped });
    expect((await apiClient(gw.url).post(`/payment/checkout/${first.body.reference}/pay`, { ...SANDBOX_CARD, card_number: "4000000000000341", save_payment_method: true })).status).toBe(200);
    const stoppedMethod = (await api.get(`/v1/customers/${stopped}/payment-methods`)).body.data[0].id as string;
    expect((await api.post("/v1/subscriptions", { customer: stopped, plan, payment_method: stoppedMethod })).status).toBe(201);
    const failedMails = await until(() => mailsTo("stopped@example.com"), (m) => m.some((x) => /fail/i.test(x.parsed.subject ?? "")));
    const failedMail = failedMails.find((m) => /fail/i.test(m.parsed.subject ?? ""))!;
    expect(failedMail.parsed.text).toContain("KES 25.00");
    expect(failedMail.parsed.text).toContain("declined");
    expect(failedMail.parsed.text).not.toContain("card_declined");
  });

  it("the daily summary comes once per day after 08:00 in the merchant's zone, with yesterday's figures by currency", async () => {
    const merchant = await createSandboxMerchant(gw);
    const owner = await gw.createUser(merchant.id, "owner");
    await prisma().merchant.update({ where: { id: merchant.id }, data: { timezone: "Africa/Nairobi" } });
    await paidTransaction(gw.url, merchant.testKey, { amount: 12_345, email: "day@example.com" });
    const t = await prisma().transaction.findFirstOrThrow({ where: { merchantId: merchant.id }, orderBy: { id: "desc" } });
    // Paid at 22:30 UTC on the 27th: the 28th in Nairobi (UTC+3), summed up on the 29th after 08:00 local.
    await prisma().$executeRawUnsafe(`UPDATE transactions SET completed_at = '2026-11-27T22:30:00Z', updated_at = '2026-11-27T22:30:00Z' WHERE id = $1`, t.id);
    const mail = gw.gateway.services.mail;
    expect(await mail.queueDailySummaries(new Date("2026-11-29T04:59:00Z"))).toBe(0); // 07:59 in Nairobi
    const queued = await mail.queueDailySummaries(new Date("2026-11-29T05:01:00Z"));
    expect(queued).toBe(1); // the merchant's one owner
    expect(await mail.queueDailySummaries(new Date("2026-11-29T09:00:00Z"))).toBe(0);
    const [summary] = await until(() => mailsTo(owner.email), (m) => m.length >= 1);
    expect(summary!.parsed.subject).toContain("28 November 2026");
    expect(summary!.parsed.text).toContain("KES 123.45");
    // The 27th in Nairobi had nothing: no summary for it.
    expect(await mail.queueDailySummaries(new Date("2026-11-28T06:00:00Z"))).toBe(0);
  });
});

describe("the transport's rules", () => {
  it("STARTTLS is required unless the URL says tls=off: a server without it gets nothing, and the message waits", async () => {
    const plain = await startSmtpFake();
    const strict = await startTestGateway({ env: { SMTP_URL: plain.url.replace("?tls=off", ""), MAIL_RETRY_SCHEDULE: "1h", RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await createSandboxMerchant(strict);
      const reference = await paidTransaction(strict.url, merchant.testKey, { amount: 1000, email: "tls@example.com" });
      const t = await strict.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
      const message = await until(() => strict.gateway.db.prisma.mailMessage.findFirst({ where: { transactionId: t.id } }), (m) => (m?.attempts ?? 0) >= 1);
      expect(message!.status, message!.lastError ?? "").toBe("queued");
      expect(message!.lastError).toMatch(/STARTTLS/i);
      expect(plain.received).toHaveLength(0);
    } finally {
      await strict.close();
      await plain.close();
    }
  });

  it("logs in with the URL's user and password, which no log line, error or record ever shows", async () => {
    const password = "s3cret-Pa55-word";
    const guarded = await startSmtpFake({ auth: { user: "mailer", pass: password } });
    const logLines: string[] = [];
    const logger = createLogger("trace", { write: (line) => void logLines.push(line) });
    const wrong = await startTestGateway({ logger, env: { SMTP_URL: guarded.url.replace(password, "wrong-" + password), MAIL_RETRY_SCHEDULE: "1h", RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await createSandboxMerchant(wrong);
      const reference = await paidTransaction(wrong.url, merchant.testKey, { amount: 1000, email: "auth@example.com" });
      const t = await wrong.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
      const refused = await until(() => wrong.gateway.db.prisma.mailMessage.findFirst({ where: { transactionId: t.id } }), (m) => (m?.attempts ?? 0) >= 1);
      // A refused login is the operator's to fix: the message waits for it (temporary), and says why.
      expect(refused).toMatchObject({ status: "queued" });
      expect(refused!.lastError).toMatch(/535|auth|login/i);
      expect(JSON.stringify(refused, (_k, v) => (typeof v === "bigint" ? v.toString() : v))).not.toContain(password);
    } finally {
      await wrong.close();
    }
    const right = await startTestGateway({ logger, env: { SMTP_URL: guarded.url, RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await createSandboxMerchant(right);
      await paidTransaction(right.url, merchant.testKey, { amount: 1000, email: "auth-ok@example.com" });
      await until(() => guarded.received.filter((m) => m.envelope.to.includes("auth-ok@example.com")).length, (n) => n === 1);
    } finally {
      await right.close();
      await guarded.close();
    }
    expect(logLines.length).toBeGreaterThan(5);
    expect(logLines.join("\n")).not.toContain(password);
  });

  it("without SMTP, test-mode messages are kept for the test inbox, rendered", async () => {
    const inbox = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await createSandboxMerchant(inbox);
      const reference = await paidTransaction(inbox.url, merchant.testKey, { amount: 4200, email: "inbox@example.com" });
      const t = await inbox.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });
      const kept = await until(() => inbox.gateway.db.prisma.mailMessage.findFirst({ where: { transactionId: t.id } }), (m) => m?.status === "kept");
      expect(kept!.subject).toContain("KES 42.00");
      expect(kept!.htmlBody).toContain(reference);
      expect(kept!.toAddress).toBe("inbox@example.com");
    } finally {
      await inbox.close();
    }
  });
});
