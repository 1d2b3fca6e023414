import type { Language } from "../../checkout/i18n.ts";

/**
 * What each message (e-mail) and the receipt page say, as plain facts: the mail service gathers them from the
 * database, templates.ts turns them into a subject, a text part and an HTML part in the reader's language, and
 * receipt-page.ts into the public receipt page. Nothing here reads the database or knows SMTP.
 */

export type MailLanguage = Language;

/** Messages to the payer (receipts; a subscription's invoice and its failed charge). */
export const PAYER_KINDS = ["payment_receipt", "refund_receipt", "invoice", "invoice_payment_failed"] as const;
export type PayerKind = (typeof PAYER_KINDS)[number];

/** Messages to the merchant's team (owners; developers too in test mode), each one they may opt out of. */
export const NOTICE_KINDS = ["payout_failed", "refund_failed", "dispute_opened", "dispute_reminder", "webhook_disabled", "daily_summary"] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];

export type MailKind = PayerKind | NoticeKind;

/** The merchant as the reader sees it. */
export interface MailBrand {
  /** The brand's display name, else the merchant's name. */
  name: string;
  /** `#rrggbb` already checked for contrast (readableAccent), or null for the default. */
  accentColor: string | null;
  supportEmail: string | null;
  /** The shop's own website (https), for "Back to <merchant>"; null when unknown. */
  website: string | null;
  /**
   * Where the logo is: in an e-mail `cid:<id>` of the inline attachment (no remote images); on the receipt page
   * the gateway's own path (`/brand/...`). Null: no logo.
   */
  logoSrc: string | null;
}

export type PaymentMethodFacts =
  | { kind: "card"; brand: string | null; last4: string | null }
  | { kind: "mpesa"; receiptCode: string | null; phone: string | null }
  | { kind: "other" };

/** A completed payment, as a receipt shows it. Amounts in minor units. */
export interface PaymentFacts {
  mode: "test" | "live";
  amount: bigint;
  currency: string;
  paidAt: Date;
  /** IANA zone every date is shown in (the merchant's). */
  timezone: string;
  /** Our reference. */
  reference: string;
  /** The merchant's own reference (their order number), when it sent one. */
  clientReference: string | null;
  method: PaymentMethodFacts;
  description: string | null;
  /** Sum of completed refunds so far. */
  amountRefunded: bigint;
  /** The public receipt page (absolute URL). */
  receiptUrl: string;
}

export interface RefundFacts {
  reference: string;
  amount: bigint;
  refundedAt: Date;
}

/** A subscription's invoice (sent when it is opened) or its failed charge ("payment failed, pay here"). */
export interface InvoiceFacts {
  mode: "test" | "live";
  reference: string;
  planName: string | null;
  amount: bigint;
  currency: string;
  periodStart: Date;
  periodEnd: Date;
  dueAt: Date;
  timezone: string;
  /** Why the last charge failed (invoice_payment_failed), in the provider's words. */
  failureReason: string | null;
  /** When the next automatic try is, if any. */
  nextAttemptAt: Date | null;
  /** Where the payer pays it themselves (a checkout page), when there is one. */
  payUrl: string | null;
}

export type PayerMail =
  | { kind: "payment_receipt"; payment: PaymentFacts }
  | { kind: "refund_receipt"; payment: PaymentFacts; refund: RefundFacts }
  | { kind: "invoice"; invoice: InvoiceFacts }
  | { kind: "invoice_payment_failed"; invoice: InvoiceFacts };

export interface DailyTotals {
  currency: string;
  /** Completed payments and their volume (minor units). */
  payments: number;
  volume: bigint;
  refunds: number;
  refunded: bigint;
  /** Failed payments. */
  failures: number;
}

/** Notices to the merchant's team. `dashboardUrl` is where the reader acts on it (absolute). */
export type Notice =
  | { kind: "payout_failed"; mode: "test" | "live"; reference: string; amount: bigint; currency: string; recipient: string | null; reason: string | null; dashboardUrl: string }
  | { kind: "refund_failed"; mode: "test" | "live"; reference: string; transactionReference: string; amount: bigint; currency: string; reason: string | null; dashboardUrl: string }
  | {
      kind: "dispute_opened" | "dispute_reminder";
      mode: "test" | "live";
      reference: string;
      transactionReference: string;
      amount: bigint;
      currency: string;
      reason: string | null;
      /** The provider's deadline for the merchant's answer. */
      dueBy: Date | null;
      timezone: string;
      dashboardUrl: string;
    }
  | { kind: "webhook_disabled"; mode: "test" | "live"; url: string; reason: string | null; dashboardUrl: string }
  | {
      kind: "daily_summary";
      mode: "test" | "live";
      /** The merchant's local day summed up, YYYY-MM-DD. */
      day: string;
      timezone: string;
      totals: DailyTotals[];
      dashboardUrl: string;
    };

/** One message, rendered: what goes into the e-mail (and the test inbox). */
export interface RenderedMail {
  /** One line: never a CR, LF or other control character. */
  subject: string;
  text: string;
  html: string;
}
