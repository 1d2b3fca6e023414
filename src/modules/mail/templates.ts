import { format } from "../../checkout/i18n.ts";
import { escapeHtml, readableAccent } from "../../checkout/layout.ts";
import { formatAmount } from "../../checkout/page.ts";
import type { DailyTotals, InvoiceFacts, MailBrand, MailLanguage, Notice, PayerMail, PaymentFacts, PaymentMethodFacts, RefundFacts, RenderedMail } from "./content.ts";

/**
 * The e-mails, as pure functions of their facts (content.ts): a one-line subject, a plain text part and an HTML part
 * in the reader's language. The HTML is what mail clients can show: a table layout with inline styles, no remote
 * resources (the logo is an inline attachment, `cid:`), readable on a 360 px phone.
 */

const en = {
  testBanner: "Test mode: no real money moved",
  logoAlt: "{name} logo",
  // Payment receipt
  receiptSubject: "Receipt from {merchant}: {amount}",
  receiptHeading: "Payment receipt",
  receiptIntro: "Thank you for your payment to {merchant}.",
  amountPaid: "Amount paid",
  paidAt: "Date",
  reference: "Reference",
  clientReference: "Order reference",
  method: "Paid with",
  methodCard: "Card",
  methodOther: "Other",
  description: "Description",
  viewReceipt: "View or print your receipt",
  support: "Questions? Write to {merchant}:",
  payerFooter: "You received this e-mail because you made a payment to {merchant}.",
  customerFooter: "You received this e-mail because you subscribe to {merchant}.",
  // Refund receipt
  refundSubject: "Refund from {merchant}: {amount}",
  refundHeading: "Refund receipt",
  refundIntro: "{merchant} has refunded {amount} to you.",
  amountRefunded: "Amount refunded",
  refundReference: "Refund reference",
  refundedAt: "Refunded on",
  originalPayment: "Original payment",
  refundedSoFar: "Refunded so far",
  remaining: "Amount after refunds",
  fullyRefunded: "{amount} (fully refunded)",
  // Invoices
  invoiceSubject: "Invoice from {merchant}: {amount}",
  invoiceHeading: "Invoice",
  invoiceIntro: "Here is your invoice from {merchant}.",
  plan: "Plan",
  period: "Period",
  periodRange: "{start} to {end}",
  amountDue: "Amount due",
  dueAt: "Due",
  payNow: "Pay now",
  failedSubject: "Payment failed: invoice from {merchant}, {amount}",
  failedHeading: "Your payment did not go through",
  failedIntro: "We could not charge {amount} for your invoice from {merchant}.",
  reason: "Reason",
  nextAttempt: "We will try again on {date}.",
  noNextAttempt: "We will not try again automatically.",
  payHere: "Pay here",
  // Notices to the merchant's team
  amount: "Amount",
  payment: "Payment",
  recipient: "Recipient",
  payoutFailedSubject: "Payout failed ({merchant}): {amount}",
  payoutFailedHeading: "A payout failed",
  refundFailedSubject: "Refund failed ({merchant}): {amount}",
  refundFailedHeading: "A refund failed",
  disputeOpenedSubject: "New dispute ({merchant}): {amount}",
  disputeOpenedHeading: "A payer has disputed a payment",
  disputeReminderSubject: "Reminder: dispute awaiting your answer ({merchant}): {amount}",
  disputeReminderHeading: "A dispute is waiting for your answer",
  respondBy: "Respond by {date}",
  noDeadline: "No deadline given",
  disputeText: "Send your answer and evidence from the dashboard before the deadline.",
  webhookSubject: "Webhook endpoint disabled ({merchant})",
  webhookHeading: "A webhook endpoint was disabled",
  webhookText: "We stopped sending events to this endpoint. Fix it, then turn it back on in the dashboard.",
  url: "URL",
  summarySubject: "Daily summary ({merchant}): {day}",
  summaryHeading: "Daily summary for {day} ({zone})",
  payments: "Payments",
  volume: "Volume",
  refunds: "Refunds",
  refunded: "Refunded",
  failures: "Failed payments",
  noActivity: "No activity",
  openDashboard: "Open in the dashboard",
  noticeFooter: "You receive this notice as a member of the {merchant} team. You can turn it off in the dashboard's settings.",
  // The receipt page
  pageTitle: "Receipt from {merchant}",
  print: "Print",
  refundsHeading: "Refunds",
  backTo: "Back to {merchant}",
};

export type MailMessages = typeof en;

const sw: MailMessages = {
  testBanner: "Hali ya majaribio: hakuna pesa halisi iliyotumwa",
  logoAlt: "Nembo ya {name}",
  receiptSubject: "Risiti kutoka {merchant}: {amount}",
  receiptHeading: "Risiti ya malipo",
  receiptIntro: "Asante kwa malipo yako kwa {merchant}.",
  amountPaid: "Kiasi kilicholipwa",
  paidAt: "Tarehe",
  reference: "Namba ya kumbukumbu",
  clientReference: "Kumbukumbu ya oda",
  method: "Imelipwa kwa",
  methodCard: "Kadi",
  methodOther: "Njia nyingine",
  description: "Maelezo",
  viewReceipt: "Angalia au chapisha risiti yako",
  support: "Una maswali? Mwandikie {merchant}:",
  payerFooter: "Umepokea barua pepe hii kwa sababu ulifanya malipo kwa {merchant}.",
  customerFooter: "Umepokea barua pepe hii kwa sababu umejisajili kwa huduma ya {merchant}.",
  refundSubject: "Marejesho ya pesa kutoka {merchant}: {amount}",
  refundHeading: "Risiti ya marejesho ya pesa",
  refundIntro: "{merchant} amekurejeshea {amount}.",
  amountRefunded: "Kiasi kilichorejeshwa",
  refundReference: "Kumbukumbu ya marejesho",
  refundedAt: "Tarehe ya marejesho",
  originalPayment: "Malipo ya awali",
  refundedSoFar: "Kilichorejeshwa hadi sasa",
  remaining: "Kiasi kilichobaki baada ya marejesho",
  fullyRefunded: "{amount} (imerejeshwa yote)",
  invoiceSubject: "Ankara kutoka {merchant}: {amount}",
  invoiceHeading: "Ankara",
  invoiceIntro: "Hii ni ankara yako kutoka {merchant}.",
  plan: "Mpango",
  period: "Kipindi",
  periodRange: "{start} hadi {end}",
  amountDue: "Kiasi kinachodaiwa",
  dueAt: "Mwisho wa kulipa",
  payNow: "Lipa sasa",
  failedSubject: "Malipo hayakufanikiwa: ankara kutoka {merchant}, {amount}",
  failedHeading: "Malipo yako hayakufanikiwa",
  failedIntro: "Hatukuweza kukutoza {amount} kwa ankara yako kutoka {merchant}.",
  reason: "Sababu",
  nextAttempt: "Tutajaribu tena tarehe {date}.",
  noNextAttempt: "Hatutajaribu tena kiotomatiki.",
  payHere: "Lipa hapa",
  amount: "Kiasi",
  payment: "Malipo",
  recipient: "Mpokeaji",
  payoutFailedSubject: "Utumaji wa pesa haukufanikiwa ({merchant}): {amount}",
  payoutFailedHeading: "Utumaji wa pesa haukufanikiwa",
  refundFailedSubject: "Marejesho ya pesa hayakufanikiwa ({merchant}): {amount}",
  refundFailedHeading: "Marejesho ya pesa hayakufanikiwa",
  disputeOpenedSubject: "Pingamizi jipya la malipo ({merchant}): {amount}",
  disputeOpenedHeading: "Mlipaji amepinga malipo",
  disputeReminderSubject: "Kumbusho: pingamizi linasubiri jibu lako ({merchant}): {amount}",
  disputeReminderHeading: "Pingamizi la malipo linasubiri jibu lako",
  respondBy: "Jibu kabla ya {date}",
  noDeadline: "Hakuna tarehe ya mwisho iliyotolewa",
  disputeText: "Tuma jibu lako na ushahidi kupitia dashibodi kabla ya tarehe ya mwisho.",
  webhookSubject: "Kituo cha webhook kimezimwa ({merchant})",
  webhookHeading: "Kituo cha webhook kimezimwa",
  webhookText: "Tumeacha kutuma matukio kwa kituo hiki. Kirekebishe, kisha ukiwashe tena kwenye dashibodi.",
  url: "Anwani (URL)",
  summarySubject: "Muhtasari wa siku ({merchant}): {day}",
  summaryHeading: "Muhtasari wa siku ya {day} ({zone})",
  payments: "Malipo",
  volume: "Thamani ya malipo",
  refunds: "Marejesho",
  refunded: "Kiasi kilichorejeshwa",
  failures: "Malipo yaliyoshindwa",
  noActivity: "Hakuna shughuli",
  openDashboard: "Fungua kwenye dashibodi",
  noticeFooter: "Unapokea taarifa hii kama mwanachama wa timu ya {merchant}. Unaweza kuizima kwenye mipangilio ya dashibodi.",
  pageTitle: "Risiti kutoka {merchant}",
  print: "Chapisha",
  refundsHeading: "Marejesho ya pesa",
  backTo: "Rudi kwa {merchant}",
};

export const mailCatalogues: Record<MailLanguage, MailMessages> = { en, sw };

/** Prefix of a notice's subject in test mode, the same in both languages so that mail filters can rely on it. */
const TEST_PREFIX = "[Test] ";
const DEFAULT_ACCENT = "#047857";

/**
 * Text with every control character (C0, DEL, C1, and the Unicode line/paragraph separators) as one space: a value
 * cannot break a subject into a second header line, or start a line of its own in the text part.
 */
export const oneLine = (text: string) => text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ");

const locale = (lang: MailLanguage) => (lang === "sw" ? "sw-KE" : "en-KE");

/**
 * Formatters by locale, zone and style, made once: an Intl.DateTimeFormat costs tens of microseconds to build, and a
 * morning's renewals render a receipt and an invoice each. A zone Intl does not know is kept as UTC (a bad zone in a
 * merchant's settings must not stop a receipt).
 */
const formatters = new Map<string, { zone: string; format: Intl.DateTimeFormat }>();
const DATE_TIME: Intl.DateTimeFormatOptions = { day: "numeric", month: "long", year: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
const DATE: Intl.DateTimeFormatOptions = { day: "numeric", month: "long", year: "numeric" };

function formatterFor(lang: MailLanguage, timezone: string, style: "date" | "dateTime"): { zone: string; format: Intl.DateTimeFormat } {
  const key = `${lang}|${timezone}|${style}`;
  let found = formatters.get(key);
  if (!found) {
    const options = style === "date" ? DATE : DATE_TIME;
    let zone = timezone;
    let format: Intl.DateTimeFormat;
    try {
      format = new Intl.DateTimeFormat(locale(lang), { ...options, timeZone: zone });
    } catch {
      zone = "UTC";
      format = new Intl.DateTimeFormat(locale(lang), { ...options, timeZone: zone });
    }
    // Bounded: zones are a few hundred names, and anything else (a bad setting) is not worth remembering.
    if (formatters.size < 2_000) formatters.set(key, (found = { zone, format }));
    else found = { zone, format };
  }
  return found;
}

/** "29 November 2026 at 01:30 (Africa/Nairobi)": the date and time in the merchant's zone, which is named. */
export function formatDateTime(date: Date, timezone: string, lang: MailLanguage): string {
  const { zone, format } = formatterFor(lang, timezone, "dateTime");
  return `${format.format(date)} (${zone})`;
}

/** "29 November 2026": a day in the merchant's zone (an invoice's period). */
export function formatDate(date: Date, timezone: string, lang: MailLanguage): string {
  return formatterFor(lang, timezone, "date").format.format(date);
}

/** A calendar day given as YYYY-MM-DD (already the merchant's), in words; anything else as it is. */
function formatDay(day: string, lang: MailLanguage): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!match) return day;
  const date = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
  return Number.isNaN(date.getTime()) ? day : formatDate(date, "UTC", lang);
}

/** 254712345149 as 2547•••••149: enough for the payer to know the phone, not enough to reuse the number. */
export function maskPhone(phone: string): string {
  const digits = phone.replace(/\D/g, "");
  if (/[*•x]/i.test(phone) || digits.length < 7) return phone.replace(/\*/g, "•"); // already masked (or too short to mask)
  return `${digits.slice(0, 4)}${"•".repeat(digits.length - 7)}${digits.slice(-3)}`;
}

/** "Visa •••• 4242", "M-Pesa · QK81XYZ · 2547•••••149". */
export function methodText(method: PaymentMethodFacts, t: MailMessages): string {
  if (method.kind === "card") {
    const brand = method.brand?.trim();
    const name = brand ? (brand === brand.toLowerCase() ? brand[0]!.toUpperCase() + brand.slice(1) : brand) : t.methodCard;
    return method.last4 ? `${name} •••• ${method.last4}` : name;
  }
  if (method.kind === "mpesa") return ["M-Pesa", method.receiptCode, method.phone ? maskPhone(method.phone) : null].filter(Boolean).join(" · ");
  return t.methodOther;
}

/** Only links that are plainly web addresses become links (never `javascript:` and the like). */
const webUrl = (url: string | null | undefined): url is string => !!url && /^https?:\/\/[^\s"'<>\\]+$/i.test(url);
export const validEmail = (email: string | null | undefined): email is string => !!email && /^[^\s@<>"'\\]+@[^\s@<>"'\\]+$/.test(email);
/** An inline attachment (`cid:`) or the gateway's own path: never a remote image, nor a protocol-relative `//host`. */
const inlineLogo = (src: string | null): src is string => !!src && (/^cid:[^\s"'<>\\]+$/i.test(src) || /^\/(?!\/)[^\s"'<>\\]*$/.test(src));

/** What the payer has still paid once refunds are out, saying so when nothing is left. */
export function remainingText(payment: PaymentFacts, t: MailMessages): string {
  const left = payment.amount - payment.amountRefunded;
  return left > 0n ? formatAmount(left, payment.currency) : format(t.fullyRefunded, { amount: formatAmount(0n, payment.currency) });
}

/** The payment's rows on a receipt (e-mail and page), each with the id the receipt page gives it. */
export function paymentRows(payment: PaymentFacts, t: MailMessages, lang: MailLanguage): Row[] {
  const rows: Row[] = [
    { id: "paid-at", label: t.paidAt, value: formatDateTime(payment.paidAt, payment.timezone, lang) },
    { id: "reference", label: t.reference, value: payment.reference },
  ];
  if (payment.clientReference) rows.push({ id: "client-reference", label: t.clientReference, value: payment.clientReference });
  rows.push({ id: "method", label: t.method, value: methodText(payment.method, t) });
  if (payment.description) rows.push({ id: "description", label: t.description, value: payment.description });
  return rows;
}

// ---- The message, as blocks both parts render ----

export interface Row {
  label: string;
  value: string;
  id?: string;
  href?: string;
}

type Block =
  | { kind: "rows"; title?: string; rows: Row[] }
  | { kind: "text"; text: string; highlight?: boolean }
  | { kind: "action"; label: string; url: string };

interface Message {
  lang: MailLanguage;
  brand: MailBrand;
  test: boolean;
  heading: string;
  /** The big figure under the heading. */
  amount?: string;
  intro?: string;
  blocks: Block[];
  /** The support line (payer mails): the merchant's e-mail. */
  support?: { lead: string; email: string };
  footer: string;
}

/** A link the reader follows, when its URL is a web address; otherwise nothing (the facts are still all there). */
const action = (label: string, url: string | null): Block[] => (webUrl(url) ? [{ kind: "action", label, url }] : []);

function render(subject: string, message: Message): RenderedMail {
  // One line, however the merchant's name or a reference was written.
  const line = oneLine(subject).replace(/ {2,}/g, " ").trim();
  return { subject: line, text: renderText(message), html: renderHtml(line, message) };
}

// ---- Payer mails ----

export function renderPayerMail(mail: PayerMail, brand: MailBrand, lang: MailLanguage): RenderedMail {
  const t = mailCatalogues[lang];
  const merchant = brand.name;
  const support = validEmail(brand.supportEmail) ? { lead: format(t.support, { merchant }), email: brand.supportEmail } : undefined;
  const footer = format(mail.kind === "invoice" || mail.kind === "invoice_payment_failed" ? t.customerFooter : t.payerFooter, { merchant });

  switch (mail.kind) {
    case "payment_receipt": {
      const { payment } = mail;
      const amount = formatAmount(payment.amount, payment.currency);
      return render(format(t.receiptSubject, { merchant, amount }), {
        lang, brand, test: payment.mode === "test", heading: t.receiptHeading, amount, intro: format(t.receiptIntro, { merchant }),
        blocks: [{ kind: "rows", rows: paymentRows(payment, t, lang) }, ...action(t.viewReceipt, payment.receiptUrl)],
        support, footer,
      });
    }
    case "refund_receipt": {
      const { payment, refund } = mail;
      const amount = formatAmount(refund.amount, payment.currency);
      return render(format(t.refundSubject, { merchant, amount }), {
        lang, brand, test: payment.mode === "test", heading: t.refundHeading, amount, intro: format(t.refundIntro, { merchant, amount }),
        blocks: [
          { kind: "rows", rows: refundRows(refund, payment, t, lang) },
          {
            kind: "rows",
            title: t.originalPayment,
            rows: [{ label: t.amountPaid, value: formatAmount(payment.amount, payment.currency) }, ...paymentRows(payment, t, lang)],
          },
          {
            kind: "rows",
            rows: [
              { label: t.refundedSoFar, value: formatAmount(payment.amountRefunded, payment.currency) },
              { id: "remaining", label: t.remaining, value: remainingText(payment, t) },
            ],
          },
          ...action(t.viewReceipt, payment.receiptUrl),
        ],
        support, footer,
      });
    }
    case "invoice":
    case "invoice_payment_failed": {
      const { invoice } = mail;
      const amount = formatAmount(invoice.amount, invoice.currency);
      const failed = mail.kind === "invoice_payment_failed";
      const blocks: Block[] = [];
      if (failed) {
        if (invoice.failureReason) blocks.push({ kind: "rows", rows: [{ label: t.reason, value: invoice.failureReason }] });
        blocks.push({
          kind: "text",
          text: invoice.nextAttemptAt ? format(t.nextAttempt, { date: formatDateTime(invoice.nextAttemptAt, invoice.timezone, lang) }) : t.noNextAttempt,
        });
      }
      blocks.push({ kind: "rows", rows: invoiceRows(invoice, t, lang) }, ...action(failed ? t.payHere : t.payNow, invoice.payUrl));
      return render(format(failed ? t.failedSubject : t.invoiceSubject, { merchant, amount }), {
        lang, brand, test: invoice.mode === "test", heading: failed ? t.failedHeading : t.invoiceHeading, amount,
        intro: format(failed ? t.failedIntro : t.invoiceIntro, { merchant, amount }), blocks, support, footer,
      });
    }
  }
}

export function refundRows(refund: RefundFacts, payment: PaymentFacts, t: MailMessages, lang: MailLanguage): Row[] {
  return [
    { label: t.amountRefunded, value: formatAmount(refund.amount, payment.currency) },
    { label: t.refundReference, value: refund.reference },
    { label: t.refundedAt, value: formatDateTime(refund.refundedAt, payment.timezone, lang) },
  ];
}

function invoiceRows(invoice: InvoiceFacts, t: MailMessages, lang: MailLanguage): Row[] {
  const rows: Row[] = [];
  if (invoice.planName) rows.push({ label: t.plan, value: invoice.planName });
  rows.push(
    { label: t.period, value: format(t.periodRange, { start: formatDate(invoice.periodStart, invoice.timezone, lang), end: formatDate(invoice.periodEnd, invoice.timezone, lang) }) },
    { label: t.amountDue, value: formatAmount(invoice.amount, invoice.currency) },
    { label: t.dueAt, value: formatDateTime(invoice.dueAt, invoice.timezone, lang) },
    { label: t.reference, value: invoice.reference },
  );
  return rows;
}

// ---- Notices to the merchant's team ----

export function renderNotice(notice: Notice, brand: MailBrand, lang: MailLanguage): RenderedMail {
  const t = mailCatalogues[lang];
  const merchant = brand.name;
  const prefix = notice.mode === "test" ? TEST_PREFIX : "";
  const base = { lang, brand, test: notice.mode === "test", footer: format(t.noticeFooter, { merchant }) };
  const reason = (text: string | null): Row[] => (text ? [{ label: t.reason, value: text }] : []);
  const dashboard = action(t.openDashboard, notice.dashboardUrl);

  switch (notice.kind) {
    case "payout_failed": {
      const amount = formatAmount(notice.amount, notice.currency);
      const rows: Row[] = [{ label: t.reference, value: notice.reference }];
      if (notice.recipient) rows.push({ label: t.recipient, value: notice.recipient });
      return render(prefix + format(t.payoutFailedSubject, { merchant, amount }), {
        ...base, heading: t.payoutFailedHeading, amount, blocks: [{ kind: "rows", rows: [...rows, ...reason(notice.reason)] }, ...dashboard],
      });
    }
    case "refund_failed": {
      const amount = formatAmount(notice.amount, notice.currency);
      return render(prefix + format(t.refundFailedSubject, { merchant, amount }), {
        ...base, heading: t.refundFailedHeading, amount,
        blocks: [
          { kind: "rows", rows: [{ label: t.refundReference, value: notice.reference }, { label: t.payment, value: notice.transactionReference }, ...reason(notice.reason)] },
          ...dashboard,
        ],
      });
    }
    case "dispute_opened":
    case "dispute_reminder": {
      const amount = formatAmount(notice.amount, notice.currency);
      const opened = notice.kind === "dispute_opened";
      const deadline = notice.dueBy ? format(t.respondBy, { date: formatDateTime(notice.dueBy, notice.timezone, lang) }) : t.noDeadline;
      return render(prefix + format(opened ? t.disputeOpenedSubject : t.disputeReminderSubject, { merchant, amount }), {
        ...base, heading: opened ? t.disputeOpenedHeading : t.disputeReminderHeading, amount,
        blocks: [
          { kind: "text", text: deadline, highlight: true },
          { kind: "rows", rows: [{ label: t.reference, value: notice.reference }, { label: t.payment, value: notice.transactionReference }, ...reason(notice.reason)] },
          { kind: "text", text: t.disputeText },
          ...dashboard,
        ],
      });
    }
    case "webhook_disabled":
      return render(prefix + format(t.webhookSubject, { merchant }), {
        ...base, heading: t.webhookHeading,
        blocks: [{ kind: "text", text: t.webhookText }, { kind: "rows", rows: [{ label: t.url, value: notice.url }, ...reason(notice.reason)] }, ...dashboard],
      });
    case "daily_summary": {
      const day = formatDay(notice.day, lang);
      const tables: Block[] = notice.totals.length
        ? notice.totals.map((totals) => ({ kind: "rows", title: totals.currency, rows: summaryRows(totals, t) }))
        : [{ kind: "text", text: t.noActivity }];
      return render(prefix + format(t.summarySubject, { merchant, day }), {
        ...base, heading: format(t.summaryHeading, { day, zone: formatterFor(lang, notice.timezone, "date").zone }), blocks: [...tables, ...dashboard],
      });
    }
  }
}

function summaryRows(totals: DailyTotals, t: MailMessages): Row[] {
  return [
    { label: t.payments, value: String(totals.payments) },
    { label: t.volume, value: formatAmount(totals.volume, totals.currency) },
    { label: t.refunds, value: String(totals.refunds) },
    { label: t.refunded, value: formatAmount(totals.refunded, totals.currency) },
    { label: t.failures, value: String(totals.failures) },
  ];
}

// ---- The text part ----

const WIDTH = 76;

/**
 * Word-wraps one line at WIDTH; continuation lines get `indent`. A word longer than the width (a URL) stays whole, and
 * so does a line that would start with a header-like `Name:` word: a value cannot be made to look like a header.
 */
function wrap(text: string, indent = ""): string {
  const lines: string[] = [];
  let current = "";
  for (const word of text.split(" ")) {
    if (current && current.length + 1 + word.length > WIDTH && !/^[!-9;-~]+:$/.test(word)) {
      lines.push(current);
      current = indent + word;
    } else current = current ? `${current} ${word}` : word;
  }
  lines.push(current);
  return lines.join("\n");
}

function renderText(m: Message): string {
  const t = mailCatalogues[m.lang];
  // Every value on its own line, never more: oneLine() first, then wrapping adds only our own line breaks.
  const clean = (text: string) => oneLine(text).replace(/ {2,}/g, " ").trim();
  const parts: string[] = [];
  if (m.test) parts.push(`*** ${t.testBanner} ***`);
  parts.push(wrap(clean(m.brand.name)));
  parts.push([m.heading, m.amount].filter(Boolean).map((s) => wrap(clean(s!))).join("\n"));
  if (m.intro) parts.push(wrap(clean(m.intro)));
  for (const block of m.blocks) {
    if (block.kind === "text") parts.push(wrap(clean(block.highlight ? `>> ${block.text}` : block.text)));
    else if (block.kind === "action") parts.push(`${clean(block.label)}:\n${clean(block.url)}`);
    else {
      const title = block.title ? `${clean(block.title)}\n${"-".repeat(Math.min(clean(block.title).length, WIDTH))}\n` : "";
      parts.push(title + block.rows.map((row) => wrap(`${clean(row.label)}: ${clean(row.value)}`, "    ")).join("\n"));
    }
  }
  if (m.support) parts.push(`${wrap(clean(m.support.lead))}\n${clean(m.support.email)}`);
  parts.push(`--\n${wrap(clean(m.footer))}`);
  return `${parts.join("\n\n")}\n`;
}

// ---- The HTML part ----

const FONT = "-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif";

function renderHtml(subject: string, m: Message): string {
  const t = mailCatalogues[m.lang];
  const accent = readableAccent(m.brand.accentColor) ?? DEFAULT_ACCENT;
  const e = escapeHtml;
  const cell = (content: string, padding = "16px 24px 0") => `<tr><td style="padding:${padding};font-family:${FONT};color:#1a1a1a;">${content}</td></tr>`;
  const rowsTable = (rows: Row[]) =>
    `<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="border-collapse:collapse;width:100%;">${rows
      .map(
        (row) =>
          `<tr><td style="padding:8px 12px 8px 0;border-bottom:1px solid #e5e7eb;color:#555555;font-size:14px;line-height:20px;vertical-align:top;width:40%;font-family:${FONT};">${e(row.label)}</td>` +
          `<td style="padding:8px 0;border-bottom:1px solid #e5e7eb;color:#1a1a1a;font-size:14px;line-height:20px;vertical-align:top;word-break:break-word;overflow-wrap:anywhere;font-family:${FONT};">${e(row.value)}</td></tr>`,
      )
      .join("")}</table>`;

  const body: string[] = [];
  if (m.test) {
    body.push(`<tr><td style="background:#c2410c;color:#ffffff;font-weight:600;text-align:center;padding:8px 16px;font-size:14px;font-family:${FONT};">${e(t.testBanner)}</td></tr>`);
  }
  const logo = inlineLogo(m.brand.logoSrc)
    ? `<img src="${e(m.brand.logoSrc)}" alt="${e(format(t.logoAlt, { name: m.brand.name }))}" height="48" style="display:block;height:48px;width:auto;max-width:160px;border:0;margin:0 0 8px;">`
    : "";
  body.push(cell(`${logo}<p style="margin:0;font-size:16px;font-weight:600;color:#444444;">${e(m.brand.name)}</p>`, "24px 24px 0"));
  body.push(
    cell(
      `<h1 style="margin:0;font-size:20px;line-height:28px;font-weight:600;">${e(m.heading)}</h1>` +
        (m.amount ? `<p style="margin:4px 0 0;font-size:30px;line-height:38px;font-weight:700;color:${accent};">${e(m.amount)}</p>` : "") +
        (m.intro ? `<p style="margin:8px 0 0;font-size:15px;line-height:22px;">${e(m.intro)}</p>` : ""),
      "12px 24px 0",
    ),
  );
  for (const block of m.blocks) {
    if (block.kind === "rows") {
      const title = block.title ? `<h2 style="margin:0 0 4px;font-size:16px;line-height:22px;font-weight:600;">${e(block.title)}</h2>` : "";
      body.push(cell(title + rowsTable(block.rows)));
    } else if (block.kind === "text") {
      body.push(
        cell(
          block.highlight
            ? `<p style="margin:0;padding:12px 14px;border-left:4px solid ${accent};background:#f3f4f6;font-size:17px;line-height:24px;font-weight:700;">${e(block.text)}</p>`
            : `<p style="margin:0;font-size:15px;line-height:22px;">${e(block.text)}</p>`,
        ),
      );
    } else {
      body.push(
        cell(
          `<a href="${e(block.url)}" style="display:inline-block;background:${accent};color:#ffffff;text-decoration:none;font-weight:600;font-size:16px;line-height:20px;padding:12px 20px;border-radius:4px;">${e(block.label)}</a>` +
            `<p style="margin:8px 0 0;font-size:12px;line-height:18px;color:#555555;word-break:break-all;">${e(block.url)}</p>`,
          "20px 24px 0",
        ),
      );
    }
  }
  if (m.support) {
    const email = e(m.support.email);
    body.push(cell(`<p style="margin:0;font-size:14px;line-height:20px;color:#444444;">${e(m.support.lead)} <a href="mailto:${email}" style="color:${accent};">${email}</a></p>`, "24px 24px 0"));
  }
  body.push(cell(`<p style="margin:0;padding-top:16px;border-top:1px solid #e5e7eb;font-size:12px;line-height:18px;color:#666666;">${e(m.footer)}</p>`, "24px 24px 24px"));

  return `<!doctype html>
<html lang="${m.lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<title>${e(subject)}</title>
</head>
<body style="margin:0;padding:0;background:#f4f4f5;-webkit-text-size-adjust:100%;">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="background:#f4f4f5;width:100%;">
<tr><td align="center" style="padding:16px 8px;">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="width:100%;max-width:560px;background:#ffffff;border-top:4px solid ${accent};border-radius:6px;">
${body.join("\n")}
</table>
</td></tr>
</table>
</body>
</html>
`;
}
