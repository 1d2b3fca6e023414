import type { FastifyInstance, FastifyReply } from "fastify";
import { GatewayError } from "../errors.ts";
import { currencies, isKnownCurrency } from "../money.ts";
import type { PaymentLink } from "../db/generated/prisma/client.ts";
import type { LinkUnavailable } from "../modules/payment-links/service.ts";
import { cspNonce } from "../security/headers.ts";
import type { Services } from "../services.ts";
import { unsafeTextIn } from "../validation.ts";
import { formatAmount } from "./page.ts";

/**
 * The public page of a payment link, /pay/<slug>: the merchant, what the payment is for and its amount (or an
 * amount field for an open link), and the payer's e-mail, posted as a plain form (it works without script).
 * The POST makes this payer's transaction and sends them on to the hosted checkout with a 303. No API key: the
 * unguessable slug is what the merchant handed out.
 */

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

const exponentOf = (currency: string) => (isKnownCurrency(currency) ? currencies[currency].exponent : 2);

/** Minor units as the payer types them: "1500.00" for KES 1,500.00 (no grouping, the currency's decimals). */
function majorText(amount: bigint, currency: string): string {
  const exponent = exponentOf(currency);
  if (exponent === 0) return amount.toString();
  const unit = 10n ** BigInt(exponent);
  return `${amount / unit}.${(amount % unit).toString().padStart(exponent, "0")}`;
}

/** What the payer typed ("1500", "1,500.5") in minor units, exactly (no floating point); a 400 naming `amount` otherwise. */
export function parseMajorAmount(text: unknown, currency: string): bigint {
  const exponent = exponentOf(currency);
  const value = typeof text === "string" ? text.trim().replace(/,/g, "") : "";
  if (value === "") throw new GatewayError("validation_failed", "amount: enter the amount to pay", { field: "amount" });
  const match = new RegExp(`^(\\d{1,12})(?:\\.(\\d{1,${Math.max(exponent, 1)}}))?$`).exec(value);
  if (!match || (exponent === 0 && match[2] !== undefined)) {
    throw new GatewayError("validation_failed", `amount: enter a number such as ${exponent ? "150.00" : "150"}`, { field: "amount" });
  }
  const fraction = (match[2] ?? "").padEnd(exponent, "0");
  return BigInt(match[1]!) * 10n ** BigInt(exponent) + BigInt(fraction || "0");
}

interface LinkPageView {
  link: PaymentLink;
  merchantName: string;
  unavailable: LinkUnavailable | null;
}

interface FormState {
  error?: string;
  field?: string;
  email?: string;
  amount?: string;
  testMode?: boolean;
}

const UNAVAILABLE_TEXT: Record<LinkUnavailable, [string, string]> = {
  not_found: ["Payment link not found", "This payment link is not valid. Check the link you were given."],
  inactive: ["This link is no longer active", "The merchant has turned this payment link off. Ask them for a new one."],
  expired: ["This link has expired", "The time to pay through this link has passed. Ask the merchant for a new one."],
  paid: ["This link has been paid", "This payment has already been made. Thank you."],
  busy: ["Another payment is being set up", "Someone is paying through this link right now. Try again in a moment."],
};

export function renderPaymentLinkPage(view: LinkPageView | null, nonce: string, state: FormState = {}): string {
  const reason: LinkUnavailable | null = view ? view.unavailable : "not_found";
  let body: string;
  if (reason || !view) {
    const [title, text] = UNAVAILABLE_TEXT[reason ?? "not_found"];
    body = `${view ? `<p class="merchant">${escapeHtml(view.merchantName)}</p>` : ""}<h1 id="title">${escapeHtml(title)}</h1><p id="result" class="${reason}">${escapeHtml(text)}</p>`;
  } else {
    const { link } = view;
    const open = link.amount === null;
    const errorFor = (field: string) => (state.error && state.field === field ? ` aria-invalid="true" aria-describedby="error"` : "");
    body = `${link.mode === "test" ? `<p class="test-ribbon" role="note">Test mode: no real money moves</p>` : ""}
  <p class="merchant">${escapeHtml(view.merchantName)}</p>
  <h1 id="amount">${open ? "Pay any amount" : escapeHtml(formatAmount(link.amount!, link.currency))}</h1>
  <p class="description" id="description">${escapeHtml(link.description)}</p>
  ${state.error ? `<p id="error" class="failed" role="alert">${escapeHtml(state.error)}</p>` : ""}
  <form id="pay" method="post" novalidate>
    ${
      open
        ? `<label for="amount-input">Amount (${escapeHtml(link.currency)})</label>
    <input id="amount-input" name="amount" inputmode="decimal" autocomplete="transaction-amount" required aria-describedby="min-amount"${errorFor("amount")} value="${escapeHtml(state.amount ?? "")}" placeholder="${escapeHtml(majorText(link.minAmount, link.currency))}">
    <p class="hint" id="min-amount">At least ${escapeHtml(formatAmount(link.minAmount, link.currency))}</p>`
        : ""
    }
    <label for="email">Your e-mail</label>
    <input id="email" name="email" type="email" autocomplete="email" required${errorFor("email")} value="${escapeHtml(state.email ?? "")}">
    <p class="hint">Your receipt is sent here.</p>
    <button type="submit">Continue to payment</button>
  </form>`;
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${view ? `Pay ${escapeHtml(view.merchantName)}` : "Payment link"}</title>
<style nonce="${escapeHtml(nonce)}">
  body { font-family: system-ui, sans-serif; max-width: 26rem; margin: 3rem auto; padding: 0 1rem; color: #1a1a1a; line-height: 1.4; }
  h1 { font-size: 2rem; margin: .25rem 0 .5rem; overflow-wrap: anywhere; } .merchant { color: #555; margin: 0; } .description { margin: 0 0 1.5rem; overflow-wrap: anywhere; }
  label { display: block; margin: 1rem 0 .25rem; font-weight: 600; } input { display: block; width: 100%; padding: .6rem; font-size: 1rem; box-sizing: border-box; border: 1px solid #767676; border-radius: 4px; }
  input:focus, button:focus { outline: 3px solid #1d4ed8; outline-offset: 2px; } input[aria-invalid="true"] { border-color: #b91c1c; }
  button { margin-top: 1.25rem; width: 100%; padding: .8rem; font-size: 1rem; background: #047857; color: #fff; border: 0; border-radius: 4px; cursor: pointer; }
  .hint { color: #555; font-size: .85rem; margin: .25rem 0 0; } .failed { color: #b91c1c; } .paid { color: #047857; }
  .test-ribbon { background: #c2410c; color: #fff; font-weight: 600; text-align: center; padding: .4rem; margin: -3rem -1rem 2rem; letter-spacing: .02em; }
</style></head>
<body>
  <main>
  ${body}
  </main>
</body></html>`;
}

export function registerPaymentLinkRoutes(app: FastifyInstance, services: Services) {
  const links = services.paymentLinks;
  const sendPage = (reply: FastifyReply, status: number, view: LinkPageView | null, state?: FormState) => {
    // As the checkout page: its one style runs by a nonce fresh to this response, no script at all, nothing from other hosts.
    const nonce = cspNonce();
    reply.header("cache-control", "no-store").header("x-frame-options", "DENY");
    reply.header("content-security-policy", `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`);
    return reply.code(status).type("text/html; charset=utf-8").send(renderPaymentLinkPage(view, nonce, state));
  };
  const statusOf = (reason: LinkUnavailable | null) => (reason === null ? 200 : reason === "not_found" ? 404 : reason === "busy" ? 409 : 410);

  // Its own plugin scope, for the one form-encoded body the gateway takes (the rest of it speaks JSON only).
  app.register(async (scope) => {
    scope.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string", bodyLimit: 16 * 1024 }, (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });

    scope.get<{ Params: { slug: string } }>("/pay/:slug", { config: { auth: "none", rateLimit: "none" } }, async (request, reply) => {
      const view = await links.pageView(request.params.slug);
      return sendPage(reply, statusOf(view ? view.unavailable : "not_found"), view);
    });

    // What makes a transaction spends the caller's budget (its IP's: a payer has no credential).
    scope.post<{ Params: { slug: string } }>("/pay/:slug", { config: { auth: "none", rateLimit: "caller" } }, async (request, reply) => {
      const form = (request.body && typeof request.body === "object" ? request.body : {}) as Record<string, unknown>;
      const view = await links.pageView(request.params.slug);
      if (!view || view.unavailable) return sendPage(reply, statusOf(view ? view.unavailable : "not_found"), view);
      const email = typeof form.email === "string" ? form.email : "";
      const typed = typeof form.amount === "string" ? form.amount : "";
      const state: FormState = { email, amount: typed };
      try {
        const bad = unsafeTextIn(form, "");
        if (bad) throw bad;
        const amount = view.link.amount === null ? parseMajorAmount(typed, view.link.currency) : undefined;
        if (amount !== undefined && amount < view.link.minAmount) {
          throw new GatewayError("validation_failed", `amount: must be at least ${formatAmount(view.link.minAmount, view.link.currency)}`, { field: "amount" });
        }
        const result = await links.pay(request.params.slug, { email, amount });
        if ("unavailable" in result) {
          return sendPage(reply, statusOf(result.unavailable), { ...view, unavailable: result.unavailable });
        }
        return reply.header("cache-control", "no-store").redirect(`/payment/checkout/${encodeURIComponent(result.reference)}`, 303);
      } catch (error) {
        // The payer's own mistake: the form again, saying what to fix, with what they typed.
        if (error instanceof GatewayError && error.code === "validation_failed") {
          const field = error.field === "amount" || error.field === "email" ? error.field : undefined;
          const message = field === "email" ? "Enter a valid e-mail address." : error.message.replace(/^amount: /, "Amount: ");
          return sendPage(reply, 400, view, { ...state, error: message, ...(field ? { field } : {}) });
        }
        throw error;
      }
    });
  });
}
