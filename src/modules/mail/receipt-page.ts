import { catalogues, format } from "../../checkout/i18n.ts";
import { baseCss, brandHeader, escapeHtml, readableAccent, supportFooter, type PageBrand } from "../../checkout/layout.ts";
import { formatAmount } from "../../checkout/page.ts";
import type { MailBrand, MailLanguage, PaymentFacts, RefundFacts } from "./content.ts";
import { formatDateTime, mailCatalogues, paymentRows, remainingText, type Row } from "./templates.ts";

/**
 * The public receipt page (/receipts/<token>): what the payment receipt e-mail says, plus the refunds so far, on a
 * page the payer can keep and print. Served under a CSP that runs only nonce'd style and script, and images from
 * the gateway itself (the logo's `/brand/...` path).
 */

const receiptCss = `
  .kind { margin: 1rem 0 0; font-size: 1.1rem; font-weight: 600; }
  .amount { font-size: 2rem; font-weight: 700; margin: .1rem 0 1rem; color: var(--accent); }
  .facts { margin: 0; }
  /* Label beside value where there is room; on a phone the value goes under its label (no narrow column). */
  .facts > div { display: flex; flex-wrap: wrap; gap: 0 1rem; padding: .5rem 0; border-bottom: 1px solid #e5e7eb; }
  .facts dt { flex: 0 0 9.5rem; color: #555; }
  .facts dd { flex: 1 1 12rem; margin: 0; min-width: 0; }
  .refund-list { list-style: none; padding: 0; margin: 0; }
  .refund-list li { padding: .5rem 0; border-bottom: 1px solid #e5e7eb; }
  .refund-amount { font-weight: 600; }
  .refund-meta { display: block; color: #555; font-size: .9rem; }
  #remaining { font-weight: 600; }
  .back { display: inline-block; margin-top: 1rem; }
  @media print {
    @page { size: A4; margin: 15mm; }
    body { max-width: none; padding: 0; color: #000; background: #fff; font-size: 11pt; }
    #print, .lang, .back { display: none !important; }
    a { color: #000; text-decoration: none; }
    .amount, .merchant, .facts dt, .refund-meta, .support { color: #000; }
    .test-ribbon { margin: 0 0 1rem; background: #fff; color: #000; border: 2px solid #000; }
    .facts > div, .refund-list li { break-inside: avoid; border-color: #999; }
  }`;

function factList(rows: Row[]): string {
  return `<dl class="facts">${rows
    .map((row) => `<div><dt>${escapeHtml(row.label)}</dt><dd${row.id ? ` id="${row.id}"` : ""}>${escapeHtml(row.value)}</dd></div>`)
    .join("")}</dl>`;
}

export function renderReceiptPage(view: {
  brand: MailBrand;
  payment: PaymentFacts;
  refunds: RefundFacts[];
  lang: MailLanguage;
  nonce: string;
  switchHref: string;
}): string {
  const { brand, payment, refunds, lang } = view;
  const t = mailCatalogues[lang];
  // The checkout's catalogue for what the shared header and footer say (logo's alt text, the language switch).
  const page = catalogues[lang].messages;
  const pageBrand: PageBrand = { displayName: brand.name, accentColor: brand.accentColor, logoUrl: brand.logoSrc, supportEmail: brand.supportEmail };
  const nonce = escapeHtml(view.nonce);
  const zone = payment.timezone;

  const refundList = refunds.length
    ? `<h2>${escapeHtml(t.refundsHeading)}</h2><ul class="refund-list" id="refunds">${refunds
        .map(
          (refund) =>
            `<li><span class="refund-amount">${escapeHtml(formatAmount(refund.amount, payment.currency))}</span>` +
            `<span class="refund-meta">${escapeHtml(refund.reference)}</span><span class="refund-meta">${escapeHtml(formatDateTime(refund.refundedAt, zone, lang))}</span></li>`,
        )
        .join("")}</ul>`
    : "";
  const totals: Row[] = [];
  if (payment.amountRefunded > 0n) totals.push({ label: t.refundedSoFar, value: formatAmount(payment.amountRefunded, payment.currency) });
  totals.push({ id: "remaining", label: t.remaining, value: remainingText(payment, t) });
  // The shop's own site, only as a plain https link.
  const back = brand.website && /^https:\/\/[^\s"'<>\\]+$/i.test(brand.website)
    ? `<a class="back" id="website" href="${escapeHtml(brand.website)}">${escapeHtml(format(t.backTo, { merchant: brand.name }))}</a>`
    : "";

  return `<!doctype html>
<html lang="${lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(format(t.pageTitle, { merchant: brand.name }))}</title>
<style nonce="${nonce}">${baseCss(readableAccent(brand.accentColor))}${receiptCss}</style>
</head>
<body>
${payment.mode === "test" ? `<p class="test-ribbon" role="note">${escapeHtml(t.testBanner)}</p>` : ""}
${brandHeader(pageBrand, page, lang, view.switchHref)}
<main>
<h1 class="kind">${escapeHtml(t.receiptHeading)}</h1>
<p class="amount" id="amount">${escapeHtml(formatAmount(payment.amount, payment.currency))}</p>
${factList(paymentRows(payment, t, lang))}
${refundList}
${factList(totals)}
<button type="button" id="print">${escapeHtml(t.print)}</button>
${back}
</main>
${supportFooter(pageBrand, page)}
<script nonce="${nonce}">document.getElementById("print").addEventListener("click", function () { window.print(); });</script>
</body>
</html>
`;
}
