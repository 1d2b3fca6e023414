import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { GatewayError } from "../errors.ts";
import { currencies, isKnownCurrency } from "../money.ts";
import { MPESA_WHOLE_AMOUNT, type LinkMethod, type LinkUnavailable, type LinkPageView as ServiceLinkView } from "../modules/payment-links/service.ts";
import type { Services } from "../services.ts";
import { unsafeTextIn } from "../validation.ts";
import { catalogues, chooseLanguage, format, withLang, type Language, type Messages } from "./i18n.ts";
import { baseCss, brandHeader, escapeHtml, readableAccent, sendPayerPage, supportFooter, type PageBrand } from "./layout.ts";
import { formatAmount } from "./page.ts";

/**
 * The public page of a payment link, /pay/<slug>: the merchant, what the payment is for and its amount (or an
 * amount field for an open link), the method (M-Pesa or card, where the link's channel offers both), the M-Pesa
 * phone and the payer's e-mail (optional with M-Pesa, required for a card), posted as a plain form (no script:
 * the fields of the method not chosen are hidden by CSS alone). The POST makes this payer's transaction, sends an
 * M-Pesa payer's prompt at once, and sends them on to the hosted checkout with a 303 (for M-Pesa, its "check your
 * phone"). No API key: the unguessable slug is what the merchant handed out.
 */

const exponentOf = (currency: string) => (isKnownCurrency(currency) ? currencies[currency].exponent : 2);

/** Minor units as the payer types them: "1500.00" for KES 1,500.00 (no grouping, the currency's decimals). */
function majorText(amount: bigint, currency: string): string {
  const exponent = exponentOf(currency);
  if (exponent === 0) return amount.toString();
  const unit = 10n ** BigInt(exponent);
  return `${amount / unit}.${(amount % unit).toString().padStart(exponent, "0")}`;
}

/** The refusal of a comma that is not a thousands separator ("1,50"): a decimal comma would silently be read as 150. */
export const AMOUNT_SEPARATOR_PROBLEM = "use a point for decimals and commas only between groups of three digits";

/**
 * What the payer typed ("1500", "1,500.5") in minor units, exactly (no floating point); a 400 naming `amount` otherwise.
 * The pages write amounts as Kenya does in both their languages: `.` for decimals, `,` between thousands. A comma
 * anywhere else ("1,50", "1.500,50") is refused rather than guessed at.
 */
export function parseMajorAmount(text: unknown, currency: string): bigint {
  const exponent = exponentOf(currency);
  const value = typeof text === "string" ? text.trim() : "";
  if (value === "") throw new GatewayError("validation_failed", "amount: enter the amount to pay", { field: "amount" });
  const example = exponent ? "1,500.50" : "1,500";
  const match = /^(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?$/.exec(value);
  if (!match && value.includes(",") && /^[\d.,]+$/.test(value)) {
    throw new GatewayError("validation_failed", `amount: ${AMOUNT_SEPARATOR_PROBLEM}, e.g. ${example}`, { field: "amount" });
  }
  const whole = match?.[1]!.replace(/,/g, "") ?? "";
  const decimals = match?.[2];
  if (!match || whole.length > 12 || (decimals !== undefined && (exponent === 0 || decimals.length > exponent))) {
    throw new GatewayError("validation_failed", `amount: enter a number such as ${exponent ? "150.00" : "150"}`, { field: "amount" });
  }
  return BigInt(whole) * 10n ** BigInt(exponent) + BigInt((decimals ?? "").padEnd(exponent, "0") || "0");
}

interface LinkPageView extends Omit<ServiceLinkView, "ownPending"> {
  brand?: PageBrand;
}

interface FormState {
  /** Already in the page's language. */
  error?: string;
  field?: string;
  email?: string;
  amount?: string;
  phone?: string;
  method?: LinkMethod;
}

const UNAVAILABLE_TEXT: Record<LinkUnavailable, [keyof Messages, keyof Messages]> = {
  not_found: ["linkNotFoundTitle", "linkNotFoundText"],
  inactive: ["linkInactiveTitle", "linkInactiveText"],
  expired: ["linkExpiredTitle", "linkExpiredText"],
  paid: ["linkPaidTitle", "linkPaidText"],
  busy: ["linkBusyTitle", "linkBusyText"],
  being_paid: ["linkBeingPaidTitle", "linkBeingPaidText"],
};

export function renderPaymentLinkPage(view: LinkPageView | null, nonce: string, state: FormState = {}, lang: Language = "en"): string {
  const t = catalogues[lang].messages;
  const reason: LinkUnavailable | null = view ? view.unavailable : "not_found";
  const brand: PageBrand | null = view ? (view.brand ?? { displayName: view.merchantName, accentColor: null, logoUrl: null, supportEmail: null }) : null;
  const other: Language = lang === "en" ? "sw" : "en";
  const header = view && brand ? brandHeader(brand, t, lang, `/pay/${encodeURIComponent(view.link.slug)}?lang=${other}`) : "";
  let body: string;
  if (reason || !view) {
    const [title, text] = UNAVAILABLE_TEXT[reason ?? "not_found"];
    body = `${header}<h1 id="title">${escapeHtml(t[title])}</h1><p id="result" class="${reason}">${escapeHtml(t[text])}</p>`;
  } else {
    const { link } = view;
    const open = link.amount === null;
    // A field the error names is marked invalid and described by the error first, then by its own hint.
    const describedBy = (field: string, hint: string) =>
      state.error && state.field === field ? ` aria-invalid="true" aria-describedby="error ${hint}"` : ` aria-describedby="${hint}"`;
    // A channel that offers neither (none usable now) keeps the card form: paying then says why.
    const methods = view.methods.mpesa ? view.methods : { card: true, mpesa: false };
    const both = methods.card && methods.mpesa;
    const chosen: LinkMethod = state.method && methods[state.method] ? state.method : methods.mpesa ? "mpesa" : "card";
    const radio = (method: LinkMethod, label: string) =>
      `<label class="method"><input type="radio" id="method-${method}" name="method" value="${method}"${chosen === method ? " checked" : ""}> ${escapeHtml(label)}</label>`;
    // With both, what belongs to one method only is shown for it alone (by CSS: the page has no script).
    const forMethod = (method: LinkMethod, html: string) => (!methods[method] ? "" : both ? `<span class="for-${method}">${html}</span>` : html);
    const payMpesa = open ? t.payMpesaAny : format(t.payMpesa, { amount: formatAmount(link.amount!, link.currency) });
    body = `${link.mode === "test" ? `<p class="test-ribbon" role="note">${escapeHtml(t.testMode)}</p>` : ""}
  ${header}
  <h1 id="amount">${open ? escapeHtml(t.anyAmount) : escapeHtml(formatAmount(link.amount!, link.currency))}</h1>
  <p class="description" id="description">${escapeHtml(link.description)}</p>
  ${state.error ? `<p id="error" class="failed" role="alert">${escapeHtml(state.error)}</p>` : ""}
  <form id="pay" method="post" novalidate>
    ${
      open
        ? `<label for="amount-input">${escapeHtml(format(t.amountLabel, { currency: link.currency }))}</label>
    <input id="amount-input" name="amount" inputmode="decimal" autocomplete="transaction-amount" required${describedBy("amount", "min-amount")} value="${escapeHtml(state.amount ?? "")}" placeholder="${escapeHtml(majorText(link.minAmount, link.currency))}">
    <p class="hint" id="min-amount">${escapeHtml(format(t.atLeast, { amount: formatAmount(link.minAmount, link.currency) }))}</p>`
        : ""
    }
    ${
      both
        ? `<fieldset id="methods"><legend>${escapeHtml(t.payWith)}</legend>${radio("mpesa", t.methodMpesa)}${radio("card", t.methodCard)}</fieldset>`
        : `<input type="hidden" name="method" value="${chosen}">`
    }
    ${
      methods.mpesa
        ? `<div id="phone-field" class="${both ? "for-mpesa" : ""}">
    <label for="phone">${escapeHtml(t.phone)}</label>
    <input id="phone" name="phone" type="tel" inputmode="tel" autocomplete="tel"${methods.card ? "" : " required"}${describedBy("phone", "phone-hint")} value="${escapeHtml(state.phone ?? "")}">
    <p class="hint" id="phone-hint">${escapeHtml(t.phoneHint)}</p>
    </div>`
        : ""
    }
    <label for="email">${escapeHtml(t.email)}</label>
    <input id="email" name="email" type="email" autocomplete="email"${methods.card && !methods.mpesa ? " required" : ""}${describedBy("email", "email-hint")} value="${escapeHtml(state.email ?? "")}">
    <p class="hint" id="email-hint">${forMethod("mpesa", escapeHtml(t.emailHintMpesa))}${forMethod("card", escapeHtml(t.emailHintCard))}</p>
    <button type="submit">${forMethod("mpesa", escapeHtml(payMpesa))}${forMethod("card", escapeHtml(t.continue))}</button>
  </form>`;
  }
  if (brand) body += supportFooter(brand, t);
  const title = view ? format(t.linkTitle, { merchant: brand!.displayName }) : t.linkTitleNotFound;
  return `<!doctype html>
<html lang="${lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style nonce="${escapeHtml(nonce)}">
  ${baseCss(readableAccent(brand?.accentColor))}
  .paid { color: #047857; }
  #methods { border: 0; padding: 0; margin: 1rem 0 0; display: flex; gap: .5rem; }
  #methods legend { font-weight: 600; margin-bottom: .25rem; padding: 0; }
  .method { flex: 1 1 0; margin: 0; display: flex; align-items: center; gap: .5rem; padding: .6rem .75rem; border: 1px solid #767676; border-radius: 4px; cursor: pointer; }
  .method:has(input:checked) { border: 2px solid var(--accent); }
  form:has(#method-card:checked) .for-mpesa, form:has(#method-mpesa:checked) .for-card { display: none; }
</style></head>
<body>
  <main>
  ${body}
  </main>
</body></html>`;
}

export function registerPaymentLinkRoutes(app: FastifyInstance, services: Services) {
  const links = services.paymentLinks;
  type LinkRequest = FastifyRequest<{ Params: { slug: string }; Querystring: { lang?: string } }>;
  // As the checkout page's headers (a nonce CSP; this page has no script at all), in the payer's language, with the merchant's brand.
  const sendPage = async (request: LinkRequest, reply: FastifyReply, status: number, view: LinkPageView | null, state?: FormState) => {
    const { lang } = chooseLanguage(request.query.lang, request.headers["accept-language"]);
    if (view) view.brand = await services.brand.checkoutBrand(view.link.merchantId);
    return sendPayerPage(reply, status, (nonce) => renderPaymentLinkPage(view, nonce, state, lang));
  };
  const statusOf = (reason: LinkUnavailable | null) => (reason === null ? 200 : reason === "not_found" ? 404 : reason === "busy" || reason === "being_paid" ? 409 : 410);
  const checkoutOf = (request: LinkRequest, reference: string) => {
    const { lang, chosen } = chooseLanguage(request.query.lang, request.headers["accept-language"]);
    return withLang(`/payment/checkout/${encodeURIComponent(reference)}`, lang, chosen);
  };

  // Its own plugin scope, for the one form-encoded body the gateway takes (the rest of it speaks JSON only).
  app.register(async (scope) => {
    scope.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string", bodyLimit: 16 * 1024 }, (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });

    scope.get<{ Params: { slug: string }; Querystring: { lang?: string } }>("/pay/:slug", { config: { auth: "none", rateLimit: "none" } }, async (request, reply) => {
      const view = await links.pageView(request.params.slug, links.payerTokenFrom(request.headers.cookie));
      // The payer who started this single-use link's pending payment goes straight back to it.
      if (view?.ownPending) return reply.header("cache-control", "no-store").redirect(checkoutOf(request, view.ownPending), 303);
      return sendPage(request, reply, statusOf(view ? view.unavailable : "not_found"), view);
    });

    // What makes a transaction spends the caller's budget (its IP's: a payer has no credential).
    scope.post<{ Params: { slug: string }; Querystring: { lang?: string } }>("/pay/:slug", { config: { auth: "none", rateLimit: "caller" } }, async (request, reply) => {
      const form = (request.body && typeof request.body === "object" ? request.body : {}) as Record<string, unknown>;
      const payerToken = links.payerTokenFrom(request.headers.cookie);
      const view = await links.pageView(request.params.slug, payerToken);
      if (view?.ownPending) return reply.header("cache-control", "no-store").redirect(checkoutOf(request, view.ownPending), 303);
      if (!view || view.unavailable) return sendPage(request, reply, statusOf(view ? view.unavailable : "not_found"), view);
      const email = typeof form.email === "string" ? form.email : "";
      const typed = typeof form.amount === "string" ? form.amount : "";
      const phone = typeof form.phone === "string" ? form.phone : "";
      const method = form.method === "card" || form.method === "mpesa" ? form.method : undefined;
      const state: FormState = { email, amount: typed, phone, ...(method ? { method } : {}) };
      const { lang, chosen } = chooseLanguage(request.query.lang, request.headers["accept-language"]);
      const t = catalogues[lang].messages;
      try {
        const bad = unsafeTextIn(form, "");
        if (bad) throw bad;
        const amount = view.link.amount === null ? parseMajorAmount(typed, view.link.currency) : undefined;
        if (amount !== undefined && amount < view.link.minAmount) {
          throw new GatewayError("validation_failed", `amount: must be at least ${formatAmount(view.link.minAmount, view.link.currency)}`, { field: "amount" });
        }
        const result = await links.pay(request.params.slug, { email, amount, phone, method: form.method, language: lang }, payerToken);
        if ("unavailable" in result) {
          return sendPage(request, reply, statusOf(result.unavailable), { ...view, unavailable: result.unavailable });
        }
        // A single-use link's new payment: this browser is its payer from now on (this link's path only).
        if (result.payerToken) reply.header("set-cookie", links.payerCookie(view.link.slug, result.payerToken));
        // On to the checkout, in the language the payer chose here (an M-Pesa payer's prompt is already on its way).
        const checkout = `/payment/checkout/${encodeURIComponent(result.reference)}${result.method === "card" ? "?method=card" : ""}`;
        return reply.header("cache-control", "no-store").redirect(withLang(checkout, lang, chosen), 303);
      } catch (error) {
        // The payer's own mistake: the form again, saying what to fix, with what they typed.
        if (error instanceof GatewayError && error.code === "validation_failed") {
          const field = error.field === "amount" || error.field === "email" || error.field === "phone" ? error.field : undefined;
          const minimum = formatAmount(view.link.minAmount, view.link.currency);
          const message =
            field === "email"
              ? email.trim() === ""
                ? t.emailRequiredCard
                : t.badEmail
              : field === "phone"
                ? t.badPhone
                : field !== "amount"
                  ? error.message
                  : typed.trim() === ""
                    ? t.amountMissing
                    : error.message.startsWith("amount: must be at least")
                      ? format(t.amountTooSmall, { amount: minimum })
                      : error.message.includes(MPESA_WHOLE_AMOUNT)
                        ? t.mpesaWholeAmount
                        : error.message.includes(AMOUNT_SEPARATOR_PROBLEM)
                          ? format(t.amountSeparator, { example: exponentOf(view.link.currency) ? "1,500.50" : "1,500" })
                          : format(t.amountFormat, { example: exponentOf(view.link.currency) ? "150.00" : "150" });
          return sendPage(request, reply, 400, view, { ...state, error: message, ...(field ? { field } : {}) });
        }
        throw error;
      }
    });
  });
}
