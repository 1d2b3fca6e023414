import { currencies, formatMoney, isKnownCurrency } from "../money.ts";
import { catalogues, format, reasonText, type Language, type Messages } from "./i18n.ts";
import { baseCss, brandHeader, escapeHtml, readableAccent, supportFooter, type PageBrand } from "./layout.ts";
import type { CheckoutAttemptView, CheckoutPageData } from "./browser/page-data.ts";
import { CHECKOUT_SCRIPT_GLOBAL, checkoutScript } from "./script.ts";

export type { CheckoutAttemptView };

/** The merchant's look on its payers' pages (issue 25's brand settings). */
export interface CheckoutBrand {
  displayName: string;
  /** `#rrggbb`, already checked for contrast against white text; null = the page's default. */
  accentColor: string | null;
  /** A same-origin path to the stored logo (never a remote URL); null = none. */
  logoUrl: string | null;
  supportEmail: string | null;
}

/** A completed payment's essentials on the success page (the checkout routes fill them from the mail service). */
export interface CheckoutReceipt {
  /** The public receipt page. */
  url: string;
  /** "M-Pesa QKT7ABC123" or "Card •••• 4081", in the page's language. */
  method: string;
  /** The date and time paid, in the merchant's zone, in the page's language. */
  paidAt: string;
  clientReference: string | null;
  /** The shop's website, for "Back to <merchant>" when the merchant gave no callback_url. */
  website: string | null;
}

export interface CheckoutView {
  /** The payment's id (server side only: never on the page). */
  id: number;
  merchantId: number;
  /** The ways this transaction can be paid on the page: cards through a card-capable channel, M-Pesa for KES. */
  methods: { card: boolean; mpesa: boolean };
  /** How many more failed attempts the transaction takes before it fails (CHECKOUT_MAX_ATTEMPTS). */
  attemptsLeft: number;
  /** The latest attempt, if any. */
  attempt: CheckoutAttemptView | null;
  /** Filled by the checkout routes from the merchant's settings. */
  brand?: CheckoutBrand;
  reference: string;
  amount: bigint;
  currency: string;
  status: string;
  description: string | null;
  merchantName: string;
  acceptsCards: boolean;
  /**
   * The card form's "Save this card" box: `offered` when the payment has a customer and its channel charges saved
   * cards; `requested` when the merchant asked to save it (initialize's save_payment_method): the box starts ticked.
   */
  saveCard: { offered: boolean; requested: boolean };
  /** The payer pays on the provider's own page (Paystack) and comes back here. */
  hosted: boolean;
  mode: "test" | "live";
  /** The sandbox's card form, whose test cards the page lists in test mode. */
  sandbox: boolean;
  failureReason: string | null;
  /** The failure's code when the transaction failed: `abandoned` when it expired unpaid (the page's final "expired" state). */
  failureCode: string | null;
  /** The merchant's callback_url with the reference appended: where the payer goes once the payment is settled. */
  returnUrl: string | null;
  /** Filled by the checkout routes once the payment is completed. */
  receipt?: CheckoutReceipt | null;
}


export interface CheckoutPageOptions {
  /** The payer is back from the provider's page and its answer is not in yet: say so, and look again shortly. */
  confirming?: boolean;
  /** Shown above the result, e.g. that the provider could not be reached (a catalogue key, so it is translated). */
  notice?: "notConfirmed";
  /** The response's CSP nonce, on the page's inline script and style (no 'unsafe-inline'). */
  nonce?: string;
  lang?: Language;
  /** The method to show first when offered (a payment link's card payer chose it there: `?method=card`). */
  method?: "card" | "mpesa";
}

/** Minor units to a display string with the currency's exponent, without floating point (src/money.ts). */
export const formatAmount = (amount: bigint, currency: string): string => formatMoney(amount, currency);

/**
 * What a payer needs to prove they paid, on the success page itself: our reference (and the shop's order number),
 * the M-Pesa code or the card, the date; the full receipt's link; and the way back to the shop when the merchant
 * gave no callback_url.
 */
function receiptEssentials(view: CheckoutView, receipt: CheckoutReceipt, t: Messages, merchant: string): string {
  const row = (id: string, label: string, value: string) => `<dt>${escapeHtml(label)}</dt><dd id="${id}">${escapeHtml(value)}</dd>`;
  const back = !view.returnUrl && receipt.website ? `<p><a id="back-to-shop" href="${escapeHtml(receipt.website)}">${escapeHtml(format(t.backTo, { merchant }))}</a></p>` : "";
  return `<dl class="receipt" id="receipt">${row("receipt-reference", t.receiptReference, view.reference)}${
    receipt.clientReference ? row("receipt-client-reference", t.receiptOrder, receipt.clientReference) : ""
  }${row("receipt-method", t.receiptMethod, receipt.method)}${row("receipt-date", t.receiptDate, receipt.paidAt)}</dl>
  <p><a id="receipt-link" href="${escapeHtml(receipt.url)}">${escapeHtml(t.viewReceipt)}</a></p>${back}`;
}

/** JSON inside a <script> element: nothing in it can close the element (`<` as \u003c, still the same string). */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, "\\u003c");

const attemptsLeftText = (t: Messages, n: number) => (n === 1 ? t.attemptsLeftOne : format(t.attemptsLeft, { n }));

/**
 * The payer's consent to keep the card for the merchant's later charges: unticked unless the merchant asked, which the
 * page then says (the payer may still untick it). The script sends its state as save_payment_method.
 */
function saveCardBox(t: Messages, merchant: string, requested: boolean): string {
  const asked = requested ? `<p class="hint" id="save-card-requested">${escapeHtml(format(t.saveCardRequested, { merchant }))}</p>` : "";
  return `${asked}<label class="save-card"><input type="checkbox" id="save-card"${requested ? ' checked aria-describedby="save-card-requested"' : ""}> ${escapeHtml(format(t.saveCard, { merchant }))}</label>`;
}

/**
 * The hosted checkout page: the merchant's brand, the amount, and every way to pay it (M-Pesa first where it is
 * offered: most Kenyan payers pay by M-Pesa). A settled or expired payment shows its outcome and no form; a pending
 * one shows where its latest attempt stands (waiting on the phone, or failed with another try offered). The
 * script follows the payment live through /status.
 */
export function renderCheckoutPage(view: CheckoutView | null, options: CheckoutPageOptions = {}): string {
  const lang = options.lang ?? "en";
  const { messages: t, errors } = catalogues[lang];
  const nonce = options.nonce ? ` nonce="${escapeHtml(options.nonce)}"` : "";
  const brand: PageBrand = view?.brand ?? { displayName: view?.merchantName ?? "", accentColor: null, logoUrl: null, supportEmail: null };
  const merchant = brand.displayName || view?.merchantName || "";
  const other: Language = lang === "en" ? "sw" : "en";
  const checkoutPath = view ? `/payment/checkout/${encodeURIComponent(view.reference)}` : "";
  const amount = view ? formatAmount(view.amount, view.currency) : "";
  const backLink = view?.returnUrl ? `<a id="return" href="${escapeHtml(view.returnUrl)}">${escapeHtml(format(t.returnTo, { merchant }))}</a>` : "";
  const testMode = view?.mode === "test";
  const attempt = view?.attempt ?? null;
  const expired = view?.status === "failed" && view.failureCode === "abandoned";

  let body: string;
  let script = "";
  if (!view) {
    body = `<h1>${escapeHtml(t.notFoundTitle)}</h1><p id="result">${escapeHtml(t.notFoundText)}</p>`;
  } else {
    const heading = `${testMode ? `<p class="test-ribbon" role="note">${escapeHtml(t.testMode)}</p>` : ""}
  ${brandHeader(brand, t, lang, `${checkoutPath}?lang=${other}`)}
  <h1 id="amount">${escapeHtml(amount)}</h1>
  ${view.description ? `<p class="description">${escapeHtml(view.description)}</p>` : ""}
  ${options.notice ? `<p id="notice">${escapeHtml(t[options.notice])}</p>` : ""}`;
    const reason = reasonText(lang, view.failureCode, view.failureReason);
    const methods = { mpesa: view.methods.mpesa, card: view.methods.card || view.acceptsCards };
    if (view.status !== "pending") {
      body = expired
        ? `${heading}<h2 id="expired">${escapeHtml(t.expiredTitle)}</h2><p id="result" class="failed expired">${escapeHtml(format(t.expiredText, { merchant }))}</p>${backLink}`
        : `${heading}<p id="result" class="${view.status === "completed" ? "completed" : "failed"}">${escapeHtml(
            view.status === "completed" ? t.completed : reason ? format(t.failedBecause, { reason }) : t.failed,
          )}</p>${view.status === "completed" && view.receipt ? receiptEssentials(view, view.receipt, t, merchant) : ""}${backLink}`;
    } else if (view.hosted) {
      body = `${heading}<p id="result" class="${options.confirming ? "pending" : ""}" role="status">${escapeHtml(options.confirming ? t.confirming : t.hostedUnavailable)}</p>`;
    } else if (!methods.card && !methods.mpesa) {
      body = `${heading}<p id="result">${escapeHtml(t.noMethods)}</p>`;
    } else {
      // Where the latest attempt stands decides what shows first; the script then follows it live.
      const waiting = attempt?.status === "pending";
      const failedAttempt = attempt?.status === "failed" ? attempt : null;
      const chosen: "mpesa" | "card" =
        failedAttempt && methods[failedAttempt.method] ? failedAttempt.method : options.method && methods[options.method] ? options.method : methods.mpesa ? "mpesa" : "card";
      const retrying = failedAttempt?.method === "mpesa" && methods.mpesa;
      const attemptReason = failedAttempt ? reasonText(lang, failedAttempt.code, failedAttempt.reason) : null;
      const resultText = waiting
        ? attempt.method === "mpesa"
          ? format(attempt.detail ? t.checkPhoneText : t.checkPhoneTextNoPhone, { phone: attempt.detail ?? "", amount })
          : t.inProgress
        : failedAttempt
          ? attemptReason
            ? format(t.attemptFailed, { reason: attemptReason })
            : t.attemptFailedNoReason
          : "";
      const resultClass = waiting ? "pending" : failedAttempt ? "failed" : "";
      const hide = (shown: boolean) => (shown ? "" : " hidden");
      body = `${heading}
  <section id="waiting" aria-labelledby="waiting-title"${hide(waiting && attempt.method === "mpesa")}>
    <div class="spinner" aria-hidden="true"></div>
    <h2 id="waiting-title" tabindex="-1">${escapeHtml(t.checkPhone)}</h2>
  </section>
  <p id="result" role="status" aria-live="polite" class="${resultClass}">${escapeHtml(resultText)}</p>
  <p id="attempts-left" class="attempts">${failedAttempt ? escapeHtml(attemptsLeftText(t, view.attemptsLeft)) : ""}</p>
  <div id="retry"${hide(!waiting && !!retrying)}>
    <button type="button" id="try-again">${escapeHtml(t.tryAgain)}</button>
    <button type="button" id="another-number" class="secondary">${escapeHtml(t.anotherNumber)}</button>
  </div>
  ${
    methods.card && methods.mpesa
      ? `<fieldset id="methods"${hide(!waiting)}><legend>${escapeHtml(t.payWith)}</legend>
    <label class="method"><input type="radio" name="method" value="mpesa"${chosen === "mpesa" ? " checked" : ""}> ${escapeHtml(t.methodMpesa)}</label>
    <label class="method"><input type="radio" name="method" value="card"${chosen === "card" ? " checked" : ""}> ${escapeHtml(t.methodCard)}</label>
  </fieldset>`
      : ""
  }
  ${
    methods.mpesa
      ? `<section id="mpesa-panel" aria-label="${escapeHtml(t.methodMpesa)}"${hide(!waiting && chosen === "mpesa" && !retrying)}>
    <form id="mpesa" novalidate>
      <label for="phone">${escapeHtml(t.phone)}</label>
      <input id="phone" name="phone" type="tel" inputmode="tel" autocomplete="tel" required aria-describedby="phone-hint">
      <p class="hint" id="phone-hint">${escapeHtml(t.phoneHint)}</p>
      <button type="submit">${escapeHtml(format(t.payMpesa, { amount }))}</button>
    </form>
    ${testMode && view.sandbox ? `<p class="hint" id="phone-test-hint">${escapeHtml(t.testPhones)}</p>` : ""}
  </section>`
      : ""
  }
  ${
    methods.card
      ? `<section id="card-panel" aria-label="${escapeHtml(t.methodCard)}"${hide(!waiting && chosen === "card")}>
    <form id="pay" novalidate>
      <label for="card-number">${escapeHtml(t.cardNumber)}</label>
      <input id="card-number" name="card_number" inputmode="numeric" autocomplete="cc-number" required>
      <div class="row">
        <div><label for="expiry-month">${escapeHtml(t.month)}</label><input id="expiry-month" name="expiry_month" inputmode="numeric" autocomplete="cc-exp-month" placeholder="MM" required></div>
        <div><label for="expiry-year">${escapeHtml(t.year)}</label><input id="expiry-year" name="expiry_year" inputmode="numeric" autocomplete="cc-exp-year" placeholder="YYYY" required></div>
        <div><label for="cvc">${escapeHtml(t.cvc)}</label><input id="cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" required></div>
      </div>
      ${view.saveCard.offered ? saveCardBox(t, merchant, view.saveCard.requested) : ""}
      <button type="submit">${escapeHtml(format(t.pay, { amount }))}</button>
    </form>
    ${testMode && view.sandbox ? `<p class="hint" id="card-hint">${escapeHtml(t.testCards)}</p>` : ""}
  </section>`
      : ""
  }
  ${backLink.replace("<a ", "<a hidden ")}`;
      const data: CheckoutPageData = {
        t: {
          completed: t.completed, failed: t.failed, failedBecause: t.failedBecause, attemptFailed: t.attemptFailed,
          attemptFailedNoReason: t.attemptFailedNoReason, attemptsLeft: t.attemptsLeft, attemptsLeftOne: t.attemptsLeftOne,
          checkPhoneText: t.checkPhoneText, checkPhoneTextNoPhone: t.checkPhoneTextNoPhone, inProgress: t.inProgress,
          networkError: t.networkError, expired: `${t.expiredTitle}. ${format(t.expiredText, { merchant })}`, anotherCard: t.anotherCard,
          pushPending: t.pushPending, pushLimitPhone: t.pushLimitPhone, pushLimitBusy: t.pushLimitBusy,
        },
        reasons: catalogues[lang].reasons,
        errors,
        amount,
        polling: waiting,
      };
      // One script: the bundled client code (src/checkout/browser/checkout.ts), called with this page's strings and state (JSON is a JS literal).
      script = `<script${nonce}>${checkoutScript()}\n${CHECKOUT_SCRIPT_GLOBAL}.startCheckout(${scriptJson(data)});</script>`;
    }
    body += supportFooter(brand, t);
  }
  return `<!doctype html>
<html lang="${lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${options.confirming && view?.status === "pending" ? `<meta http-equiv="refresh" content="5">` : ""}
<title>${escapeHtml(merchant ? `${t.checkoutTitle}: ${merchant}` : t.checkoutTitle)}</title>
<style${nonce}>
  ${baseCss(readableAccent(brand.accentColor))}
  #methods { border: 0; padding: 0; margin: 1rem 0 0; display: flex; gap: .5rem; }
  #methods legend { font-weight: 600; margin-bottom: .25rem; padding: 0; }
  .method { flex: 1 1 0; margin: 0; display: flex; align-items: center; gap: .5rem; padding: .6rem .75rem; border: 1px solid #767676; border-radius: 4px; cursor: pointer; }
  .method:has(input:checked) { border: 2px solid var(--accent); }
  .save-card { display: flex; align-items: flex-start; gap: .5rem; font-weight: 400; margin-top: 1rem; cursor: pointer; }
  #save-card-requested { margin-top: 1rem; } #save-card-requested + .save-card { margin-top: .5rem; }
  .save-card input { flex: none; width: 1.25rem; height: 1.25rem; margin: .05rem 0 0; accent-color: var(--accent); }
  #retry { display: flex; flex-direction: column; }
  #waiting { text-align: center; margin-top: 1rem; }
  .spinner { width: 2.5rem; height: 2.5rem; margin: 0 auto; border: 4px solid #d4d4d4; border-top-color: var(--accent); border-radius: 50%; animation: spin 1s linear infinite; }
  @keyframes spin { to { transform: rotate(360deg); } }
  @media (prefers-reduced-motion: reduce) { .spinner { animation: none; } }
  .attempts { color: #444; margin: .25rem 0 0; } .attempts:empty { display: none; } #result { font-weight: 600; } #result.pending { font-weight: 400; text-align: center; } #return { display: inline-block; margin-top: 1rem; }
</style></head>
<body>
  <main>
  ${body}
  </main>
  ${script}
</body></html>`;
}
