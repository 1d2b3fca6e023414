import type { FastifyInstance } from "fastify";
import { NotFoundError } from "../errors.ts";
import { boolField } from "../rest/params.ts";
import type { Services } from "../services.ts";
import { assertSafeText, unsafeTextIn } from "../validation.ts";
import { LANGUAGES } from "./i18n.ts";

/** The page's language as the script sends it (`lang`): kept on the attempt, for the payer's receipt. Anything else: none. */
export const payerLanguage = (body: Record<string, unknown>): string | undefined =>
  (LANGUAGES as readonly unknown[]).includes(body.lang) ? (body.lang as string) : undefined;

/**
 * The payer's JSON endpoints beside the checkout page (issue 25): send an STK push for this payment, and
 * the payment's status, which the page polls while an attempt is pending. No API key: the unguessable
 * reference is the payer's credential, as for the page and its card form.
 */
export function registerCheckoutAttemptRoutes(app: FastifyInstance, services: Services) {
  // Sending a push costs the provider a call and the payer a prompt: the caller's budget, as /pay. Polling is free.
  const payment = { config: { auth: "none", rateLimit: "caller" } } as const;
  const status = { config: { auth: "none", rateLimit: "none" } } as const;

  app.post<{ Params: { reference: string } }>("/payment/checkout/:reference/mpesa", payment, async (request, reply) => {
    const body = (request.body && typeof request.body === "object" ? request.body : {}) as Record<string, unknown>;
    assertSafeText({ params: request.params, body });
    const { attempt } = await services.transactions.payWithMpesa(request.params.reference, body.phone, { savePaymentMethod: boolField(body, "save_payment_method"), language: payerLanguage(body) });
    return reply.code(202).header("cache-control", "no-store").send({ status: "pending", message: "Check your phone to approve the payment", attempt });
  });

  app.get<{ Params: { reference: string } }>("/payment/checkout/:reference/status", status, async (request, reply) => {
    // A reference no transaction can have (control characters, absurd length) is simply not found, as for the page.
    const reference = request.params.reference;
    const answer = unsafeTextIn(reference, "reference") ? null : await services.transactions.checkoutStatus(reference);
    if (!answer) throw new NotFoundError("Transaction");
    return reply.header("cache-control", "no-store").send(answer);
  });
}
