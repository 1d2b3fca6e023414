import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { GatewayError } from "../errors.ts";
import { boolField, intField, required, stringField } from "../rest/params.ts";
import type { Services } from "../services.ts";
import { assertSafeText, unsafeTextIn } from "../validation.ts";
import { payerLanguage, registerCheckoutAttemptRoutes } from "./attempt-routes.ts";
import { chooseLanguage } from "./i18n.ts";
import { sendPayerPage } from "./layout.ts";
import { renderCheckoutPage, type CheckoutPageOptions, type CheckoutView } from "./page.ts";
import { checkoutScript } from "./script.ts";

/**
 * The payer's side: the hosted checkout page and the card payment it submits. No API key here: the
 * unguessable reference in the URL is what the merchant handed to its payer.
 */
export function registerCheckoutRoutes(app: FastifyInstance, services: Services) {
  checkoutScript(); // bundled now, at start, rather than on the first payer's request
  // Showing the page is free; what makes a call to the provider (paying, returning from its page) spends the
  // caller's budget: a payer has no credential, so its IP's, which throttles card testing.
  const page = { config: { auth: "none", rateLimit: "none" } } as const;
  const payment = { config: { auth: "none", rateLimit: "caller" } } as const;
  type PageRequest = FastifyRequest<{ Params: { reference: string }; Querystring: { lang?: string } }>;
  const sendPage = async (request: PageRequest, reply: FastifyReply, view: CheckoutView | null, options: CheckoutPageOptions = {}) => {
    if (view) view.brand = await services.brand.checkoutBrand(view.merchantId);
    // English or Swahili: the page's switch (?lang=) first, then the browser's Accept-Language.
    const { lang } = chooseLanguage(request.query.lang, request.headers["accept-language"]);
    if (view?.status === "completed") view.receipt = await services.mail.checkoutReceipt(view.id, lang);
    return sendPayerPage(reply, view ? 200 : 404, (nonce) => renderCheckoutPage(view, { ...options, nonce, lang }));
  };

  app.get<{ Params: { reference: string }; Querystring: { lang?: string; method?: string } }>("/payment/checkout/:reference", page, async (request, reply) => {
    // A reference no transaction can have (control characters, absurd length) is simply not found.
    const reference = request.params.reference;
    const view = unsafeTextIn(reference, "reference") ? null : await services.transactions.checkoutView(reference);
    if (view?.hosted && view.status === "pending") {
      // The payer pays on the provider's page (Paystack's) and comes back to .../return.
      const providerPage = await services.transactions.hostedCheckoutUrl(reference).catch((error: unknown) => {
        request.log.warn({ reference, err: (error as Error).message }, "provider payment page unavailable");
        return null;
      });
      if (providerPage) return reply.header("cache-control", "no-store").redirect(providerPage, 303);
    }
    // The method the payer already chose (a payment link's first page) is shown first.
    const method = request.query.method === "card" || request.query.method === "mpesa" ? request.query.method : undefined;
    return sendPage(request, reply, view, method ? { method } : {});
  });

  /** The payer is back from the provider's page (Paystack's callback_url): ask the provider, record, show the result. */
  app.get<{ Params: { reference: string }; Querystring: { lang?: string } }>("/payment/checkout/:reference/return", payment, async (request, reply) => {
    const reference = request.params.reference;
    if (unsafeTextIn(reference, "reference")) return sendPage(request, reply, null);
    let notice: CheckoutPageOptions["notice"];
    try {
      await services.transactions.verifyHostedPaymentByReference(reference, "payer return");
    } catch (error) {
      request.log.warn({ reference, err: (error as Error).message }, "payment verification on return failed");
      notice = "notConfirmed";
    }
    const view = await services.transactions.checkoutView(reference);
    // Settled, and the merchant gave a callback_url: the payer goes straight back there, as Paystack would send them.
    if (view?.returnUrl && view.status !== "pending") return reply.header("cache-control", "no-store").redirect(view.returnUrl, 303);
    return sendPage(request, reply, view, { confirming: true, ...(notice ? { notice } : {}) });
  });

  registerCheckoutAttemptRoutes(app, services); // M-Pesa from the page, and the status it polls (attempt-routes.ts)

  app.post<{ Params: { reference: string } }>("/payment/checkout/:reference/pay", payment, async (request, reply) => {
    const body = (request.body && typeof request.body === "object" ? request.body : {}) as Record<string, unknown>;
    assertSafeText({ params: request.params, body });
    const { transaction, outcome } = await services.transactions.payWithCard(request.params.reference, {
      number: required(stringField(body, "card_number"), "card_number"),
      expMonth: required(intField(body, "expiry_month"), "expiry_month"),
      expYear: required(intField(body, "expiry_year"), "expiry_year"),
      cvc: required(stringField(body, "cvc"), "cvc"),
    }, { savePaymentMethod: boolField(body, "save_payment_method"), language: payerLanguage(body) });
    // This caller's own charge decides its answer (a concurrent one was refused with a 409 before charging).
    if (outcome.outcome !== "succeeded") throw new GatewayError("payment_declined", outcome.reason);
    return reply.send({
      status: "success",
      message: "Payment completed",
      transaction: { reference: transaction.reference, amount: Number(transaction.amount), currency: transaction.currency, status: transaction.status },
    });
  });
}
