import { toMsisdn } from "../../phone.ts";
import type { TransactionSnapshot } from "../transactions/status.ts";

export { webhookEventTypes, type WebhookEventType } from "./event-types.ts";

/** The transaction as the REST API shows it, plus what a receiver needs to reconcile it. */
export function transactionWebhookData(t: TransactionSnapshot) {
  return {
    id: t.id,
    reference: t.reference,
    client_reference: t.client_reference,
    amount: t.amount,
    currency: t.currency,
    status: t.status,
    payment_method: t.payment_method,
    phone_number: toMsisdn(t.phone_number),
    checkout_request_id: t.checkout_request_id,
    provider_reference: t.provider_reference,
    failure_code: t.failure_code,
    failure_reason: t.failure_reason,
    // Events recorded before metadata existed have no key: null, as for a payment sent without it.
    metadata: t.metadata ?? null,
    created_at: t.created_at,
    completed_at: t.completed_at,
    // The checkout attempt that settled it (issue 25); absent for payments with no attempts (STK push API, C2B).
    ...(t.attempt ? { attempt: t.attempt } : {}),
  };
}

/**
 * The body a merchant's endpoint receives: the same bytes on every attempt (built from the stored
 * event alone), so a signature and a receiver's dedupe on webhook-id both hold across retries.
 */
export function webhookBody(event: { type: string; createdAt: Date | string; payload: unknown }): string {
  // Payouts, refunds, disputes, subscriptions and invoices are stored as their /v1 routes show them already.
  const payload = event.payload as { transaction?: TransactionSnapshot; payout?: unknown; refund?: unknown; dispute?: unknown; subscription?: unknown; invoice?: unknown };
  const data = payload.transaction ? transactionWebhookData(payload.transaction) : (payload.payout ?? payload.refund ?? payload.dispute ?? payload.subscription ?? payload.invoice ?? payload);
  return JSON.stringify({ type: event.type, timestamp: new Date(event.createdAt).toISOString(), data });
}
