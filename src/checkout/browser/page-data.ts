/**
 * What the checkout page's server side (src/checkout/page.ts) hands its browser script (checkout.ts), and what the
 * script reads back from the gateway: the one description both sides are checked against. Types only, no DOM and
 * no Node, so both programs can import it.
 */

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

/** The page's words the script shows as the payment moves, in the page's language (placeholders as `{name}`). */
export type CheckoutScriptText =
  | "completed" | "failed" | "failedBecause" | "attemptFailed" | "attemptFailedNoReason" | "attemptsLeft" | "attemptsLeftOne"
  | "checkPhoneText" | "checkPhoneTextNoPhone" | "inProgress" | "networkError" | "expired" | "anotherCard"
  | "pushPending" | "pushLimitPhone" | "pushLimitBusy";

/** The script's argument, written into the page as JSON. */
export interface CheckoutPageData {
  t: Record<CheckoutScriptText, string>;
  /** The language's words for providers' failure codes (empty in English: the provider's own are shown). */
  reasons: Record<string, string>;
  /** The language's words for the gateway's refusals, by field name or HTTP status (empty in English). */
  errors: Record<string, string>;
  /** The amount as shown on the page, e.g. `KES 50.00`. */
  amount: string;
  /** An attempt is in flight: follow it through /status from the start. */
  polling: boolean;
}

/** GET /payment/checkout/:reference/status (the fields the script reads), and the shape it draws from /mpesa's 202. */
export interface CheckoutStatus {
  status: string;
  failure_code?: string | null;
  failure_reason?: string | null;
  attempts_left?: number;
  attempt?: CheckoutAttemptView | null;
}
