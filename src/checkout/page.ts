import { currencies, isKnownCurrency } from "../money.ts";

/** One try at paying a checkout transaction (issue 25): a card charge or an STK push. */
export interface CheckoutAttemptView {
  method: "card" | "mpesa";
  status: "pending" | "succeeded" | "failed";
  /** The provider's outcome code when failed: e.g. `card_declined`, `insufficient_funds`, `1032` (cancelled), `1037` (timeout). */
  code: string | null;
  /** The provider's words for a failure, shown to the payer. */
  reason: string | null;
  /** What the payer recognises it by: a masked phone (`2547*****149`) or a card's last four digits. */
  detail: string | null;
}

/** The merchant's look on its payers' pages (issue 25's brand settings). */
export interface CheckoutBrand {
  displayName: string;
  /** `#rrggbb`, already checked for contrast against white text; null = the page's default. */
  accentColor: string | null;
  /** A same-origin path to the stored logo (never a remote URL); null = none. */
  logoUrl: string | null;
  supportEmail: string | null;
}

export interface CheckoutView {
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
  /** The payer pays on the provider's own page (Paystack) and comes back here. */
  hosted: boolean;
  mode: "test" | "live";
  /** The sandbox's card form, whose test cards the page lists in test mode. */
  sandbox: boolean;
  failureReason: string | null;
  /** The merchant's callback_url with the reference appended: where the payer goes once the payment is settled. */
  returnUrl: string | null;
}

export interface CheckoutPageOptions {
  /** The payer is back from the provider's page and its answer is not in yet: say so, and look again shortly. */
  confirming?: boolean;
  /** Shown above the result, e.g. that the provider could not be reached. */
  notice?: string;
  /** The response's CSP nonce, on the page's inline script and style (no 'unsafe-inline'). */
  nonce?: string;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** Minor units to a display string with the currency's exponent, without floating point. */
export function formatAmount(amount: bigint, currency: string): string {
  const exponent = isKnownCurrency(currency) ? currencies[currency].exponent : 2;
  if (exponent === 0) return `${currency} ${amount.toLocaleString("en-US")}`;
  const unit = 10n ** BigInt(exponent);
  const whole = (amount / unit).toLocaleString("en-US");
  return `${currency} ${whole}.${(amount % unit).toString().padStart(exponent, "0")}`;
}

/** What a settled payment's page says: the outcome in words, with the provider's reason for a failure. */
function settledText(view: CheckoutView): string {
  if (view.status === "completed") return "Payment completed. Thank you.";
  return view.failureReason ? `This payment did not go through: ${view.failureReason}.` : "This payment did not go through.";
}

/** The hosted checkout page: amount, merchant, and a card form that posts to /pay. */
export function renderCheckoutPage(view: CheckoutView | null, options: CheckoutPageOptions = {}): string {
  const nonce = options.nonce ? ` nonce="${escapeHtml(options.nonce)}"` : "";
  const backLink = view?.returnUrl ? `<a id="return" href="${escapeHtml(view.returnUrl)}">Return to ${escapeHtml(view.merchantName)}</a>` : "";
  const testMode = view?.mode === "test";
  const body = !view
    ? `<h1>Payment not found</h1><p>This payment link is not valid.</p>`
    : `${testMode ? `<p class="test-ribbon" role="note">Test mode: no real money moves</p>` : ""}
  <p class="merchant">${escapeHtml(view.merchantName)}</p>
  <h1 id="amount">${escapeHtml(formatAmount(view.amount, view.currency))}</h1>
  ${view.description ? `<p class="description">${escapeHtml(view.description)}</p>` : ""}
  ${options.notice ? `<p id="notice">${escapeHtml(options.notice)}</p>` : ""}
  ${
    view.status !== "pending"
      ? `<p id="result" class="${view.status}">${escapeHtml(settledText(view))}</p>${backLink}`
      : view.hosted
        ? options.confirming
          ? `<p id="result" class="pending">We are confirming your payment. This page updates by itself.</p>`
          : `<p id="result">The payment page could not be opened. Please try again in a moment.</p>`
      : !view.acceptsCards
        ? `<p id="result">Card payments are not available for this payment.</p>`
        : `<form id="pay">
    <label>Card number <input name="card_number" inputmode="numeric" autocomplete="cc-number" required></label>
    <div class="row">
      <label>Month <input name="expiry_month" inputmode="numeric" placeholder="MM" required></label>
      <label>Year <input name="expiry_year" inputmode="numeric" placeholder="YYYY" required></label>
      <label>CVC <input name="cvc" inputmode="numeric" autocomplete="cc-csc" required></label>
    </div>
    <button type="submit">Pay ${escapeHtml(formatAmount(view.amount, view.currency))}</button>
  </form>
  ${
    testMode && view.sandbox
      ? `<p class="hint">Test cards: 4084 0840 8408 4081 succeeds; 4000 0000 0000 0002 is declined, 4000 0000 0000 9995 has insufficient funds. Any future expiry date and any CVC.</p>`
      : ""
  }
  <p id="result" role="status"></p>
  ${backLink.replace("<a ", "<a hidden ")}
  <script${nonce}>
    const form = document.getElementById("pay");
    const result = document.getElementById("result");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = Object.fromEntries(new FormData(form));
      form.querySelector("button").disabled = true;
      let response, answer;
      try {
        response = await fetch(location.pathname.replace(/\\/$/, "") + "/pay", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...data, expiry_month: Number(data.expiry_month), expiry_year: Number(data.expiry_year) }),
        });
        answer = await response.json();
      } catch {
        answer = { status: "error", message: "The payment could not be sent. Check your connection and try again." };
      }
      const back = document.getElementById("return");
      if (answer.status === "success") {
        form.remove();
        result.className = "completed";
        result.textContent = "Payment completed. Thank you.";
        // Back to the merchant's callback_url, with the reference, as Paystack does; the link stays for slow redirects.
        if (back) {
          back.hidden = false;
          setTimeout(() => location.assign(back.href), 1500);
        }
      } else if (response && response.status === 409) {
        // Settled already, or another payment of this transaction is being charged: no second
        // attempt from here; the page reloads to show how that payment ends.
        form.remove();
        result.className = "pending";
        result.textContent = answer.message + ". This page will refresh shortly.";
        setTimeout(() => location.reload(), 3000);
      } else {
        result.className = "failed";
        result.textContent = answer.message;
        form.querySelector("button").disabled = false;
        if (response && response.status === 402) {
          form.remove();
          if (back) back.hidden = false;
        }
      }
    });
  </script>`
  }`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${options.confirming && view?.status === "pending" ? `<meta http-equiv="refresh" content="5">` : ""}
<title>Checkout</title>
<style${nonce}>
  body { font-family: system-ui, sans-serif; max-width: 26rem; margin: 3rem auto; padding: 0 1rem; color: #1a1a1a; }
  h1 { font-size: 2rem; margin: .25rem 0 1rem; } .merchant { color: #555; margin: 0; }
  label { display: block; margin: .5rem 0; font-size: .9rem; } input { display: block; width: 100%; padding: .5rem; font-size: 1rem; box-sizing: border-box; }
  .row { display: flex; gap: .5rem; } button { margin-top: 1rem; width: 100%; padding: .75rem; font-size: 1rem; background: #0a6; color: #fff; border: 0; border-radius: 4px; }
  .completed { color: #0a6; } .failed { color: #c22; }
  .test-ribbon { background: #c2410c; color: #fff; font-weight: 600; text-align: center; padding: .4rem; margin: -3rem -1rem 2rem; letter-spacing: .02em; }
  .hint { color: #555; font-size: .85rem; margin-top: 1rem; } #return { display: inline-block; margin-top: 1rem; } #return[hidden] { display: none; }
</style></head>
<body>
  ${body}
</body></html>`;
}
