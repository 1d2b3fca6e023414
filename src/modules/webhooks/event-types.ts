/**
 * Every event type an endpoint can subscribe to. In a module of its own, with no imports, so the dashboard's
 * event picker (src/dashboard/app, bundled for the browser) offers exactly the list the server accepts.
 */
export const webhookEventTypes = ["transaction.pending", "transaction.completed", "transaction.failed", "payout.completed", "payout.failed", "refund.completed", "refund.failed",
  "dispute.created", "dispute.updated", "dispute.closed",
  "subscription.created", "subscription.updated", "subscription.canceled", "invoice.created", "invoice.paid", "invoice.payment_failed"] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];
/**
 * The test event "Send test event" sends to one endpoint (whatever it subscribes to): not subscribable, as nothing but
 * that button makes one.
 */
export const WEBHOOK_TEST_EVENT = "webhook.test";
