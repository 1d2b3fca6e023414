import type { InvoiceCharge, LinkedInvoice, LinkedSubscription } from "./store.ts";

/**
 * Subscriptions and invoices as /v1 shows them, which is what their events carry (webhooks send it as `data`).
 * test/integration/billing.test.ts holds the REST shape and the webhook's to the same keys.
 */

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function subscriptionView(s: LinkedSubscription) {
  return {
    id: s.reference,
    customer: s.customerId,
    plan: s.plan.reference,
    payment_method: s.paymentMethod.reference,
    status: s.status,
    amount: Number(s.plan.amount),
    currency: s.plan.currency,
    trial_end: iso(s.trialEnd),
    current_period_start: iso(s.currentPeriodStart),
    current_period_end: iso(s.currentPeriodEnd),
    cancel_at_period_end: s.cancelAtPeriodEnd,
    canceled_at: iso(s.canceledAt),
    next_invoice_at: iso(s.nextInvoiceAt),
    test_clock: s.testClock?.reference ?? null,
    metadata: s.metadata ?? null,
    created_at: iso(s.createdAt),
  };
}

/** The payer's way to finish a charge that waits for them (a card's bank asking for OTP): the checkout page. */
export function nextActionOf(charges: readonly Pick<InvoiceCharge, "status" | "providerCheckoutUrl" | "reference">[], checkoutUrl: (reference: string) => string) {
  const last = charges.at(-1);
  return last?.status === "pending" && last.providerCheckoutUrl ? { type: "redirect" as const, url: checkoutUrl(last.reference) } : null;
}

export function invoiceView(i: LinkedInvoice, checkoutUrl: (reference: string) => string) {
  return {
    id: i.reference,
    subscription: i.subscription.reference,
    customer: i.customerId,
    amount_due: Number(i.amountDue),
    currency: i.currency,
    period_start: iso(i.periodStart),
    period_end: iso(i.periodEnd),
    status: i.status,
    attempts: i.attempts,
    next_attempt_at: iso(i.nextAttemptAt),
    paid_at: iso(i.paidAt),
    transaction_reference: i.transactions.at(-1)?.reference ?? null,
    charges: i.transactions.map((c) => ({ attempt: c.invoiceAttempt, transaction_reference: c.reference, status: c.status, failure_code: c.failureCode, created_at: iso(c.createdAt) })),
    next_action: nextActionOf(i.transactions, checkoutUrl),
    created_at: iso(i.createdAt),
  };
}
