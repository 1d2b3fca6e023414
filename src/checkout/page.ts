import { currencies, isKnownCurrency } from "../money.ts";

export interface CheckoutView {
  reference: string;
  amount: bigint;
  currency: string;
  status: string;
  description: string | null;
  merchantName: string;
  acceptsCards: boolean;
  /** The payer pays on the provider's own page (Paystack) and comes back here. */
  hosted: boolean;
}

export interface CheckoutPageOptions {
  /** The payer is back from the provider's page and its answer is not in yet: say so, and look again shortly. */
  confirming?: boolean;
  /** Shown above the result, e.g. that the provider could not be reached. */
  notice?: string;
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

/** The hosted checkout page: amount, merchant, and a card form that posts to /pay. */
export function renderCheckoutPage(view: CheckoutView | null, options: CheckoutPageOptions = {}): string {
  const body = !view
    ? `<h1>Payment not found</h1><p>This payment link is not valid.</p>`
    : `<p class="merchant">${escapeHtml(view.merchantName)}</p>
  <h1 id="amount">${escapeHtml(formatAmount(view.amount, view.currency))}</h1>
  ${view.description ? `<p class="description">${escapeHtml(view.description)}</p>` : ""}
  ${options.notice ? `<p id="notice">${escapeHtml(options.notice)}</p>` : ""}
  ${
    view.status !== "pending"
      ? `<p id="result" class="${view.status}">This payment is ${escapeHtml(view.status)}.</p>`
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
  <p id="result" role="status"></p>
  <script>
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
      if (answer.status === "success") {
        form.remove();
        result.className = "completed";
        result.textContent = "Payment completed. Thank you.";
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
        if (response && response.status === 402) form.remove();
      }
    });
  </script>`
  }`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${options.confirming && view?.status === "pending" ? `<meta http-equiv="refresh" content="5">` : ""}
<title>Checkout</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 26rem; margin: 3rem auto; padding: 0 1rem; color: #1a1a1a; }
  h1 { font-size: 2rem; margin: .25rem 0 1rem; } .merchant { color: #555; margin: 0; }
  label { display: block; margin: .5rem 0; font-size: .9rem; } input { display: block; width: 100%; padding: .5rem; font-size: 1rem; box-sizing: border-box; }
  .row { display: flex; gap: .5rem; } button { margin-top: 1rem; width: 100%; padding: .75rem; font-size: 1rem; background: #0a6; color: #fff; border: 0; border-radius: 4px; }
  .completed { color: #0a6; } .failed { color: #c22; }
</style></head>
<body>
  ${body}
</body></html>`;
}
