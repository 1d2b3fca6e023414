import { describe, expect, it } from "vitest";
import type { InvoiceFacts, MailBrand, MailLanguage, Notice, PaymentFacts, RenderedMail } from "../../src/modules/mail/content.ts";
import { renderReceiptPage } from "../../src/modules/mail/receipt-page.ts";
import { formatDateTime, mailCatalogues, maskPhone, renderNotice, renderPayerMail } from "../../src/modules/mail/templates.ts";

/** The e-mails and the receipt page, from their facts: what they say in both languages, and what a value cannot do to them. */

const brand: MailBrand = { name: "Acme Shop", accentColor: "#1a56db", supportEmail: "help@acme.example", website: "https://acme.example", logoSrc: "cid:logo@acme" };

// 22:30 UTC on the 28th is 01:30 on the 29th in Nairobi (UTC+3).
const mpesaPayment: PaymentFacts = {
  mode: "live",
  amount: 150000n,
  currency: "KES",
  paidAt: new Date("2026-11-28T22:30:00Z"),
  timezone: "Africa/Nairobi",
  reference: "T_9f8e7d6c5b4a",
  clientReference: "ORDER-1042",
  method: { kind: "mpesa", receiptCode: "QKT7ABC123", phone: "254712345149" },
  description: "Two bags of maize flour",
  amountRefunded: 0n,
  receiptUrl: "https://pay.example/receipts/tok123",
};
const cardPayment: PaymentFacts = { ...mpesaPayment, method: { kind: "card", brand: "visa", last4: "4242" }, clientReference: null, mode: "test" };

const invoice: InvoiceFacts = {
  mode: "live",
  reference: "INV-2026-0042",
  planName: "Gold plan",
  amount: 99900n,
  currency: "KES",
  periodStart: new Date("2026-11-01T00:00:00Z"),
  periodEnd: new Date("2026-12-01T00:00:00Z"),
  dueAt: new Date("2026-11-02T22:00:00Z"),
  timezone: "Africa/Nairobi",
  failureReason: "Insufficient funds",
  nextAttemptAt: new Date("2026-11-05T21:15:00Z"),
  payUrl: "https://pay.example/payment/checkout/INV42",
};

const DATE = { en: "29 November 2026 at 01:30 (Africa/Nairobi)", sw: "29 Novemba 2026 saa 01:30 (Africa/Nairobi)" } as const;
const LANGS: MailLanguage[] = ["en", "sw"];

/** Every part of a mail contains `fact` (the HTML as escaped text). */
function expectEverywhere(mail: RenderedMail, ...facts: string[]) {
  for (const fact of facts) {
    expect(mail.text, fact).toContain(fact);
    expect(mail.html, fact).toContain(fact.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/'/g, "&#39;"));
  }
}

/** What every rendered mail must be: a one-line subject, a whole HTML document without remote resources. */
function expectWellFormed(mail: RenderedMail) {
  expect(mail.subject).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
  expect(mail.subject).toBe(mail.subject.trim());
  expect(mail.html).toMatch(/^<!doctype html>\n<html lang="(en|sw)">/);
  expect(mail.html).toContain('<meta charset="utf-8">');
  expect(mail.html).toContain('<meta name="viewport"');
  expect(mail.html).toContain("max-width:560px");
  expect(mail.html).not.toMatch(/\bsrc\s*=\s*["']?\s*(https?:|\/\/|data:)/i);
  expect(mail.html).not.toMatch(/url\(|<link\b|@import/i);
  for (const [, href] of mail.html.matchAll(/href="([^"]*)"/g)) expect(href).toMatch(/^(https:\/\/pay\.example\/|mailto:)/);
  // The text part: short lines, but for a URL, which is never broken.
  for (const line of mail.text.split("\n")) if (!/^https?:\/\//.test(line)) expect(line.length, line).toBeLessThanOrEqual(78);
}

describe("payer mails", () => {
  it("payment receipt (M-Pesa): subject, amount, date in the merchant's zone, both references, receipt code and masked phone", () => {
    for (const lang of LANGS) {
      const mail = renderPayerMail({ kind: "payment_receipt", payment: mpesaPayment }, brand, lang);
      expectWellFormed(mail);
      expect(mail.subject).toBe(lang === "en" ? "Receipt from Acme Shop: KES 1,500.00" : "Risiti kutoka Acme Shop: KES 1,500.00");
      expectEverywhere(mail, "KES 1,500.00", DATE[lang], "T_9f8e7d6c5b4a", "ORDER-1042", "M-Pesa · QKT7ABC123 · 2547•••••149", "Two bags of maize flour");
      expect(mail.text).not.toContain("254712345149");
      expect(mail.html).not.toContain("254712345149");
      expect(mail.text).toContain(lang === "en" ? "View or print your receipt:\nhttps://pay.example/receipts/tok123" : "Angalia au chapisha risiti yako:\nhttps://pay.example/receipts/tok123");
      expect(mail.html).toMatch(/<a href="https:\/\/pay\.example\/receipts\/tok123"[^>]*>(View or print your receipt|Angalia au chapisha risiti yako)<\/a>/);
      expect(mail.html).toContain('<a href="mailto:help@acme.example"');
      expect(mail.html).toContain('<img src="cid:logo@acme"');
      expect(mail.html).toContain("#1a56db");
      // Live: no test banner.
      expect(mail.text).not.toContain(mailCatalogues[lang].testBanner);
      expect(mail.html).not.toContain(mailCatalogues[lang].testBanner);
    }
    expect(renderPayerMail({ kind: "payment_receipt", payment: mpesaPayment }, brand, "en").text).toContain("Order reference: ORDER-1042");
    expect(renderPayerMail({ kind: "payment_receipt", payment: mpesaPayment }, brand, "sw").text).toContain("Namba ya kumbukumbu: T_9f8e7d6c5b4a");
  });

  it("payment receipt (card, test mode): card brand and last 4, the test banner, no client reference row, the default accent", () => {
    for (const lang of LANGS) {
      const mail = renderPayerMail({ kind: "payment_receipt", payment: cardPayment }, { ...brand, accentColor: "#ffff00", logoSrc: null, supportEmail: null }, lang);
      expectWellFormed(mail);
      expectEverywhere(mail, "Visa •••• 4242", mailCatalogues[lang].testBanner);
      expect(mail.text).not.toContain(mailCatalogues[lang].clientReference);
      expect(mail.html).not.toContain("<img");
      expect(mail.html).not.toContain("mailto:");
      expect(mail.html).not.toContain("#ffff00"); // unreadable under white text: the default instead
      expect(mail.html).toContain("#047857");
      // A payer's subject is not prefixed in test mode (only notices are).
      expect(mail.subject).toBe(lang === "en" ? "Receipt from Acme Shop: KES 1,500.00" : "Risiti kutoka Acme Shop: KES 1,500.00");
    }
  });

  it("escapes the description, the brand name and every other value in the HTML", () => {
    const hostile: MailBrand = { ...brand, name: `Tom & Jerry's <b>Shop</b>`, supportEmail: `a"b@x.example` };
    const payment: PaymentFacts = { ...mpesaPayment, description: "<script>alert(1)</script>", clientReference: `"><img src=x onerror=alert(2)>` };
    for (const lang of LANGS) {
      const { html, text, subject } = renderPayerMail({ kind: "payment_receipt", payment }, hostile, lang);
      expect(html).not.toContain("<script");
      expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
      expect(html).not.toContain("<b>Shop");
      expect(html).toContain("Tom &amp; Jerry&#39;s &lt;b&gt;Shop&lt;/b&gt;");
      expect(html).not.toContain("<img src=x");
      expect(html).toContain("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;");
      expect(html).not.toContain("mailto:"); // not a plain address: not linked
      // The text part and the subject are plain text: as written.
      expect(text).toContain("<script>alert(1)</script>");
      expect(subject).toContain(`Tom & Jerry's <b>Shop</b>`);
    }
  });

  it("CR, LF, tabs and other control characters never reach the subject nor start a line in the text part", () => {
    const hostile: MailBrand = { ...brand, name: "Acme\r\nBcc: victim@example.com\u2028Shop" };
    const payment: PaymentFacts = {
      ...mpesaPayment,
      description: "Maize\r\nSubject: you won\n\nX-Header: 1\u0085Y\tZ",
      clientReference: "ORD\r\nReply-To: evil@example.com",
    };
    for (const lang of LANGS) {
      for (const mail of [
        renderPayerMail({ kind: "payment_receipt", payment }, hostile, lang),
        renderPayerMail({ kind: "refund_receipt", payment: { ...payment, amountRefunded: 1000n }, refund: { reference: "R\nX-Evil: 1", amount: 1000n, refundedAt: new Date() } }, hostile, lang),
        renderNotice({ kind: "webhook_disabled", mode: "test", url: "https://hooks.example/x\r\nBcc: a@b", reason: "HTTP 500\r\nfor a day", dashboardUrl: "https://pay.example/d" }, hostile, lang),
      ]) {
        expect(mail.subject).not.toMatch(/[\r\n\t\u0085\u2028]/);
        expect(mail.subject).toContain("Acme Bcc: victim@example.com Shop");
        for (const line of mail.text.split("\n")) expect(line, line).not.toMatch(/^\s*(Bcc:|Subject:|X-Header:|X-Evil:|Reply-To:|Y Z|for a day)/);
        expect(mail.text).not.toMatch(/[\r\t\u0085\u2028]/);
      }
      const receipt = renderPayerMail({ kind: "payment_receipt", payment }, hostile, lang);
      expect(receipt.subject).toBe(`${lang === "en" ? "Receipt from" : "Risiti kutoka"} Acme Bcc: victim@example.com Shop: KES 1,500.00`);
      expect(receipt.text).toContain("Maize Subject: you won X-Header: 1 Y Z");
      expect(receipt.text).toContain("ORD Reply-To: evil@example.com");
    }
  });

  it("shows only an inline (cid:) or same-origin logo, never a remote one", () => {
    for (const logoSrc of ["https://evil.example/logo.png", "//evil.example/logo.png", "http://x/y.png", "data:image/png;base64,AAAA", "javascript:alert(1)"]) {
      const { html } = renderPayerMail({ kind: "payment_receipt", payment: mpesaPayment }, { ...brand, logoSrc }, "en");
      expect(html, logoSrc).not.toContain("<img");
    }
    expect(renderPayerMail({ kind: "payment_receipt", payment: mpesaPayment }, { ...brand, logoSrc: "/brand/1/logo.png" }, "en").html).toContain('<img src="/brand/1/logo.png"');
  });

  it("refund receipt: the refund, the original payment, what was refunded so far and what remains, after a partial and a full refund", () => {
    const refund = { reference: "R_5a6b", amount: 50000n, refundedAt: new Date("2026-11-30T21:05:00Z") };
    for (const lang of LANGS) {
      const t = mailCatalogues[lang];
      const partial = renderPayerMail({ kind: "refund_receipt", payment: { ...mpesaPayment, amountRefunded: 50000n }, refund }, brand, lang);
      expectWellFormed(partial);
      expect(partial.subject).toBe(lang === "en" ? "Refund from Acme Shop: KES 500.00" : "Marejesho ya pesa kutoka Acme Shop: KES 500.00");
      expectEverywhere(partial, "R_5a6b", lang === "en" ? "1 December 2026 at 00:05 (Africa/Nairobi)" : "1 Desemba 2026 saa 00:05 (Africa/Nairobi)", DATE[lang], "T_9f8e7d6c5b4a", "QKT7ABC123");
      expect(partial.text).toContain(`${t.amountPaid}: KES 1,500.00`);
      expect(partial.text).toContain(`${t.refundedSoFar}: KES 500.00`);
      expect(partial.text).toContain(`${t.remaining}: KES 1,000.00`);

      // A second refund of the rest: fully refunded.
      const full = renderPayerMail({ kind: "refund_receipt", payment: { ...mpesaPayment, amountRefunded: 150000n }, refund: { ...refund, amount: 100000n } }, brand, lang);
      expect(full.subject).toContain("KES 1,000.00");
      expect(full.text).toContain(`${t.refundedSoFar}: KES 1,500.00`);
      expect(full.text).toContain(`${t.remaining}: KES 0.00 (${lang === "en" ? "fully refunded" : "imerejeshwa yote"})`);
      expect(full.html).toContain(`KES 0.00 (${lang === "en" ? "fully refunded" : "imerejeshwa yote"})`);
    }
  });

  it("invoice: plan, period and due date in the zone, amount, Pay now", () => {
    for (const lang of LANGS) {
      const mail = renderPayerMail({ kind: "invoice", invoice }, brand, lang);
      expectWellFormed(mail);
      expect(mail.subject).toBe(lang === "en" ? "Invoice from Acme Shop: KES 999.00" : "Ankara kutoka Acme Shop: KES 999.00");
      expectEverywhere(
        mail,
        "Gold plan",
        "INV-2026-0042",
        "KES 999.00",
        lang === "en" ? "1 November 2026 to 1 December 2026" : "1 Novemba 2026 hadi 1 Desemba 2026",
        lang === "en" ? "3 November 2026 at 01:00 (Africa/Nairobi)" : "3 Novemba 2026 saa 01:00 (Africa/Nairobi)",
      );
      expect(mail.html).toContain(`<a href="https://pay.example/payment/checkout/INV42"`);
      expect(mail.text).toContain(`${lang === "en" ? "Pay now" : "Lipa sasa"}:\nhttps://pay.example/payment/checkout/INV42`);
      // The reason and the next try belong to the failed charge only.
      expect(mail.text).not.toContain("Insufficient funds");
    }
    const noLink = renderPayerMail({ kind: "invoice", invoice: { ...invoice, payUrl: null, planName: null } }, brand, "en");
    expect(noLink.html).not.toContain("Pay now");
    expect(noLink.text).not.toContain("Plan:");
  });

  it("invoice payment failed: the reason, the next automatic try (or none), Pay here", () => {
    for (const lang of LANGS) {
      const mail = renderPayerMail({ kind: "invoice_payment_failed", invoice }, brand, lang);
      expectWellFormed(mail);
      expect(mail.subject).toBe(lang === "en" ? "Payment failed: invoice from Acme Shop, KES 999.00" : "Malipo hayakufanikiwa: ankara kutoka Acme Shop, KES 999.00");
      expectEverywhere(
        mail,
        "Insufficient funds",
        lang === "en" ? "We will try again on 6 November 2026 at 00:15 (Africa/Nairobi)." : "Tutajaribu tena tarehe 6 Novemba 2026 saa 00:15 (Africa/Nairobi).",
      );
      expect(mail.html).toMatch(/<a href="https:\/\/pay\.example\/payment\/checkout\/INV42"[^>]*>(Pay here|Lipa hapa)<\/a>/);
      const last = renderPayerMail({ kind: "invoice_payment_failed", invoice: { ...invoice, nextAttemptAt: null, payUrl: null } }, brand, lang);
      expectEverywhere(last, mailCatalogues[lang].noNextAttempt);
      expect(last.html).not.toContain(mailCatalogues[lang].payHere);
    }
  });
});

describe("notices to the merchant's team", () => {
  const dashboardUrl = "https://pay.example/dashboard/x";
  const dispute = {
    mode: "live" as const, reference: "DSP_77", transactionReference: "T_9f8e7d6c5b4a", amount: 150000n, currency: "KES", reason: "Goods not received",
    dueBy: new Date("2026-12-02T20:59:00Z"), timezone: "Africa/Nairobi", dashboardUrl,
  };
  const notices: Notice[] = [
    { kind: "payout_failed", mode: "live", reference: "PO_1", amount: 2500000n, currency: "KES", recipient: "Equity Bank ••••6789", reason: "Account closed", dashboardUrl },
    { kind: "refund_failed", mode: "live", reference: "R_9", transactionReference: "T_9f8e7d6c5b4a", amount: 50000n, currency: "KES", reason: "Provider refused", dashboardUrl },
    { kind: "dispute_opened", ...dispute },
    { kind: "dispute_reminder", ...dispute },
    { kind: "webhook_disabled", mode: "live", url: "https://shop.example/hooks?a=1&b=2", reason: "HTTP 500 for 3 days", dashboardUrl },
    { kind: "daily_summary", mode: "live", day: "2026-11-28", timezone: "Africa/Nairobi", totals: [], dashboardUrl },
  ];
  const subjects: Record<MailLanguage, string[]> = {
    en: [
      "Payout failed (Acme Shop): KES 25,000.00",
      "Refund failed (Acme Shop): KES 500.00",
      "New dispute (Acme Shop): KES 1,500.00",
      "Reminder: dispute awaiting your answer (Acme Shop): KES 1,500.00",
      "Webhook endpoint disabled (Acme Shop)",
      "Daily summary (Acme Shop): 28 November 2026",
    ],
    sw: [
      "Utumaji wa pesa haukufanikiwa (Acme Shop): KES 25,000.00",
      "Marejesho ya pesa hayakufanikiwa (Acme Shop): KES 500.00",
      "Pingamizi jipya la malipo (Acme Shop): KES 1,500.00",
      "Kumbusho: pingamizi linasubiri jibu lako (Acme Shop): KES 1,500.00",
      "Kituo cha webhook kimezimwa (Acme Shop)",
      "Muhtasari wa siku (Acme Shop): 28 Novemba 2026",
    ],
  };

  it("each kind: its subject, prefixed [Test] in test mode only, its facts and a link to the dashboard", () => {
    for (const lang of LANGS) {
      notices.forEach((notice, i) => {
        const live = renderNotice(notice, brand, lang);
        expectWellFormed(live);
        expect(live.subject).toBe(subjects[lang][i]);
        expect(live.html).toContain(`<a href="${dashboardUrl}"`);
        expect(live.text).toContain(`\n${dashboardUrl}\n`);
        const test = renderNotice({ ...notice, mode: "test" }, brand, lang);
        expect(test.subject).toBe(`[Test] ${subjects[lang][i]}`);
        expectEverywhere(test, mailCatalogues[lang].testBanner);
      });
      const [payout, refund, opened, reminder, webhook] = notices.map((n) => renderNotice(n, brand, lang));
      expectEverywhere(payout!, "PO_1", "Equity Bank ••••6789", "Account closed", "KES 25,000.00");
      expectEverywhere(refund!, "R_9", "T_9f8e7d6c5b4a", "Provider refused");
      expectEverywhere(webhook!, "https://shop.example/hooks?a=1&b=2", "HTTP 500 for 3 days");
      // The merchant's endpoint is shown, not linked.
      expect(webhook!.html).not.toContain('href="https://shop.example');
      for (const mail of [opened!, reminder!]) {
        expectEverywhere(mail, "DSP_77", "T_9f8e7d6c5b4a", "Goods not received");
        // The deadline in the merchant's zone (23:59 on the 2nd, not 20:59), prominent: the first fact after the heading.
        const deadline = lang === "en" ? "Respond by 2 December 2026 at 23:59 (Africa/Nairobi)" : "Jibu kabla ya 2 Desemba 2026 saa 23:59 (Africa/Nairobi)";
        expectEverywhere(mail, deadline);
        expect(mail.text.indexOf(deadline)).toBeLessThan(mail.text.indexOf("DSP_77"));
        expect(mail.html).toMatch(new RegExp(`font-weight:700;">${deadline.replace(/[()]/g, "\\$&")}</p>`));
      }
      const noDeadline = renderNotice({ kind: "dispute_opened", ...dispute, dueBy: null }, brand, lang);
      expectEverywhere(noDeadline, lang === "en" ? "No deadline given" : "Hakuna tarehe ya mwisho iliyotolewa");
    }
  });

  it("daily summary: a table per currency, or No activity", () => {
    const totals = [
      { currency: "KES", payments: 12, volume: 1234500n, refunds: 1, refunded: 50000n, failures: 3 },
      { currency: "UGX", payments: 2, volume: 75000n, refunds: 0, refunded: 0n, failures: 0 },
    ];
    for (const lang of LANGS) {
      const t = mailCatalogues[lang];
      const mail = renderNotice({ kind: "daily_summary", mode: "live", day: "2026-11-28", timezone: "Africa/Nairobi", totals, dashboardUrl }, brand, lang);
      expectWellFormed(mail);
      expect(mail.text).toContain(
        `KES\n---\n${t.payments}: 12\n${t.volume}: KES 12,345.00\n${t.refunds}: 1\n${t.refunded}: KES 500.00\n${t.failures}: 3`,
      );
      expect(mail.text).toContain(`UGX\n---\n${t.payments}: 2\n${t.volume}: UGX 75,000\n${t.refunds}: 0\n${t.refunded}: UGX 0\n${t.failures}: 0`);
      expect(mail.html.match(/<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="border-collapse/g)).toHaveLength(2);
      expect(mail.html).toContain("KES 12,345.00");
      expect(mail.html).toContain("UGX 75,000");
      expect(mail.text).not.toContain(t.noActivity);
      expectEverywhere(mail, lang === "en" ? "Daily summary for 28 November 2026 (Africa/Nairobi)" : "Muhtasari wa siku ya 28 Novemba 2026 (Africa/Nairobi)");

      const quiet = renderNotice({ kind: "daily_summary", mode: "live", day: "2026-11-28", timezone: "Africa/Nairobi", totals: [], dashboardUrl }, brand, lang);
      expectEverywhere(quiet, lang === "en" ? "No activity" : "Hakuna shughuli");
      expect(quiet.text).not.toContain(`${t.payments}:`);
    }
  });
});

describe("dates, phones and the catalogue", () => {
  it("formats in the zone, naming it; an unknown zone falls back to UTC", () => {
    const at = new Date("2026-11-28T22:30:00Z");
    expect(formatDateTime(at, "Africa/Nairobi", "en")).toBe(DATE.en);
    expect(formatDateTime(at, "Africa/Nairobi", "sw")).toBe(DATE.sw);
    expect(formatDateTime(at, "Not/AZone", "en")).toBe("28 November 2026 at 22:30 (UTC)");
    expect(formatDateTime(at, "", "sw")).toBe("28 Novemba 2026 saa 22:30 (UTC)");
  });

  it("masks a phone number to its first 4 and last 3 digits", () => {
    expect(maskPhone("254712345149")).toBe("2547•••••149");
    expect(maskPhone("+254 712 345 149")).toBe("2547•••••149");
    expect(maskPhone("2547****149")).toBe("2547••••149");
  });

  it("Swahili has every English string, with the same placeholders, and translated", () => {
    const en = mailCatalogues.en as Record<string, string>;
    const sw = mailCatalogues.sw as Record<string, string>;
    expect(Object.keys(sw).sort()).toEqual(Object.keys(en).sort());
    const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
    for (const key of Object.keys(en)) {
      expect(placeholders(sw[key]!), key).toEqual(placeholders(en[key]!));
      if (key !== "url") expect(sw[key], key).not.toBe(en[key]);
    }
  });
});

describe("the public receipt page", () => {
  const refunds = [
    { reference: "R_1", amount: 20000n, refundedAt: new Date("2026-11-29T10:00:00Z") },
    { reference: "R_2", amount: 30000n, refundedAt: new Date("2026-11-30T21:30:00Z") },
  ];
  const page = (over: Partial<Parameters<typeof renderReceiptPage>[0]> = {}) =>
    renderReceiptPage({ brand: { ...brand, logoSrc: "/brand/1/logo.png" }, payment: mpesaPayment, refunds: [], lang: "en", nonce: "n0nce", switchHref: "/receipts/tok123?lang=sw", ...over });
  const text = (html: string, id: string) => new RegExp(`id="${id}"[^>]*>([^<]*)<`).exec(html)?.[1];

  it("shows the receipt's facts by id, in both languages", () => {
    for (const lang of LANGS) {
      const html = page({ lang });
      expect(html).toMatch(new RegExp(`^<!doctype html>\\n<html lang="${lang}">`));
      expect(text(html, "amount")).toBe("KES 1,500.00");
      expect(text(html, "reference")).toBe("T_9f8e7d6c5b4a");
      expect(text(html, "client-reference")).toBe("ORDER-1042");
      expect(text(html, "method")).toBe("M-Pesa · QKT7ABC123 · 2547•••••149");
      expect(text(html, "paid-at")).toBe(DATE[lang]);
      expect(text(html, "remaining")).toBe("KES 1,500.00");
      expect(html).not.toContain('id="refunds"');
      expect(html).toContain('<button type="button" id="print">');
      expect(html).toContain('href="/receipts/tok123?lang=sw"');
      expect(html).toContain('<img class="logo" src="/brand/1/logo.png"');
      expect(html).toContain('href="mailto:help@acme.example"');
      expect(html).toContain('<a class="back" id="website" href="https://acme.example">');
    }
    expect(page({ lang: "sw" })).toContain(">Risiti ya malipo<");
    expect(page({ lang: "sw" })).toContain(">Chapisha<");
  });

  it("lists the refunds and what remains, and says when it is fully refunded", () => {
    const partial = page({ payment: { ...mpesaPayment, amountRefunded: 50000n }, refunds });
    const list = /<ul class="refund-list" id="refunds">(.*?)<\/ul>/.exec(partial)?.[1] ?? "";
    expect(list.match(/<li>/g)).toHaveLength(2);
    expect(list).toContain("KES 200.00");
    expect(list).toContain('R_2</span><span class="refund-meta">1 December 2026 at 00:30 (Africa/Nairobi)</span>');
    expect(text(partial, "remaining")).toBe("KES 1,000.00");
    expect(partial).toContain("KES 500.00"); // refunded so far
    const full = page({ payment: { ...mpesaPayment, amountRefunded: 150000n }, refunds: [{ ...refunds[0]!, amount: 150000n }], lang: "sw" });
    expect(text(full, "remaining")).toBe("KES 0.00 (imerejeshwa yote)");
  });

  it("runs only nonce'd style and script, escapes every value, and has a test ribbon and a print stylesheet", () => {
    const html = page({
      brand: { ...brand, name: "<img src=x onerror=alert(1)>", accentColor: "red; } body { display:none", logoSrc: "https://evil.example/l.png", website: "javascript:alert(1)" },
      payment: { ...cardPayment, description: "</style><script>alert(2)</script>", clientReference: `"><b>` },
      nonce: `"x`,
    });
    expect(html.match(/<script\b/g)).toHaveLength(1);
    expect(html.match(/<style\b/g)).toHaveLength(1);
    expect(html).toContain('<style nonce="&quot;x">');
    expect(html).toContain('<script nonce="&quot;x">');
    expect(html).toContain("&lt;/style&gt;&lt;script&gt;alert(2)&lt;/script&gt;");
    expect(html).not.toContain("<img");
    expect(html).not.toContain("display:none");
    expect(html).not.toContain("javascript:");
    expect(text(html, "client-reference")).toBe("&quot;&gt;&lt;b&gt;");
    expect(text(html, "method")).toBe("Visa •••• 4242");
    expect(html).toContain('<p class="test-ribbon" role="note">Test mode: no real money moved</p>');
    expect(html).toContain("@page { size: A4; margin: 15mm; }");
    expect(html).toMatch(/@media print \{[^]*#print, \.lang/);
    expect(page()).not.toContain("test-ribbon\"");
  });
});
