import type { ProviderName } from "./registry.ts";

export interface CardDetails {
  number: string;
  expMonth: number;
  expYear: number;
  cvc: string;
}

export interface CardChargeRequest {
  reference: string;
  amount: bigint;
  currency: string;
  card: CardDetails;
  /** The channel's decrypted credentials. */
  config: unknown;
}

/**
 * One interface per upstream provider. Each connector owns its wire format; nothing else knows a
 * provider's field names. Capabilities a provider lacks are simply absent.
 */
export interface Connector {
  readonly provider: ProviderName;
  readonly currencies: readonly string[];
  chargeCard?(request: CardChargeRequest): Promise<CardOutcome>;
  /** The payer pays on the provider's own page (Paystack); the gateway verifies every outcome. */
  hosted?: HostedCheckoutConnector;
  momo?: MomoConnector;
  payouts?: PayoutConnector;
  refunds?: RefundConnector;
}

/** What a card charge came to: the core records it through the state machine. */
export type CardOutcome =
  | { outcome: "succeeded"; providerReference: string; last4: string; brand: string }
  | { outcome: "declined" | "failed"; code: string; reason: string; last4: string; brand: string };

/* ---- Mobile money (M-Pesa STK push and C2B). Amounts are minor units; the connector converts. ---- */

export interface StkPushRequest {
  config: unknown;
  amount: bigint;
  currency: string;
  /** 254XXXXXXXXX */
  phoneNumber: string;
  accountReference: string;
  description: string;
  callbackUrl: string;
  /** Only the sandbox connector uses it: where its simulated callback is delivered (no network). */
  deliverCallback?: (body: unknown) => Promise<boolean>;
}

export interface StkPushAccepted {
  checkoutRequestId: string;
  merchantRequestId: string;
  customerMessage: string;
}

/** A provider's answer about one collection: still waiting, paid, or failed with the provider's code. */
export type CollectionOutcome =
  | { state: "pending" }
  | { state: "completed"; providerReference: string | null; message: string }
  | { state: "failed"; code: string; message: string };

export type SettledCollectionOutcome = Exclude<CollectionOutcome, { state: "pending" }>;

/** A provider's callback about one collection, parsed by its connector; amount in minor units. */
export interface CollectionCallback {
  /** The provider's id for the request (M-Pesa's CheckoutRequestID). */
  providerRequestId: string;
  outcome: SettledCollectionOutcome;
  /** Fields the provider echoes back, null when it did not send them; checked against the stored row. */
  amount: bigint | null;
  /** Digits only, as providers write numbers (254712345678). */
  phoneNumber: string | null;
}

/** A parsed C2B validation or confirmation payload. */
export interface C2bPayment {
  transId: string;
  amount: bigint;
  phoneNumber: string | null;
  billRef: string;
  shortcode: string;
}

export interface MomoConnector {
  /** Throws a ValidationError naming `amount` when the provider cannot collect it (units, bounds). */
  checkAmount(amount: bigint, currency: string): void;
  stkPush(request: StkPushRequest): Promise<StkPushAccepted>;
  stkQuery(request: { config: unknown; checkoutRequestId: string }): Promise<CollectionOutcome>;
  parseStkCallback(body: unknown): CollectionCallback;
  stkCallbackAck(): unknown;
  registerC2bUrls(request: { config: unknown; confirmationUrl: string; validationUrl: string; responseType: "Completed" | "Cancelled" }): Promise<void>;
  /**
   * Sandbox channels only. The sandbox connector plays M-Pesa itself: it asks deliverValidation (the
   * gateway's validation relay, answering in the provider's reply format) and, when accepted, delivers the
   * confirmation through deliverConfirmation. `rejected` says the validation refused it (nothing was paid).
   */
  simulateC2b(request: {
    config: unknown;
    amount: bigint;
    currency: string;
    phoneNumber: string;
    billRef: string;
    deliverValidation?: (body: unknown) => Promise<unknown>;
    deliverConfirmation?: (body: unknown) => Promise<void>;
  }): Promise<{ rejected: boolean } | void>;
  /** True when this channel may simulate C2B payments (never a production channel). */
  canSimulateC2b(config: unknown): boolean;
  parseC2bPayment(body: unknown): C2bPayment;
  /** The provider's validation reply: accepted, or rejected with its code. */
  c2bValidationReply(decision: { accept: true } | { accept: false; code: string }): unknown;
  /** Reads a merchant's validation answer (given in the provider's format); null when it is not one. */
  readC2bValidationDecision(body: unknown): { accept: true } | { accept: false; code: string } | null;
  c2bConfirmationAck(): unknown;
  /** Words the provider refuses in callback URLs. */
  forbiddenUrlWords: readonly string[];
  close?(): void;
}

/* ---- Hosted checkout (Paystack): the payer pays on the provider's page; outcomes are verified by asking. ---- */

export interface HostedPaymentRequest {
  config: unknown;
  /** The gateway's own reference, sent as the provider's: every later lookup uses it. */
  reference: string;
  amount: bigint;
  currency: string;
  email: string;
  /** Where the provider sends the payer back after paying. */
  callbackUrl: string;
  metadata: Record<string, string | number>;
}

export interface HostedPaymentStarted {
  accessCode: string;
  /** The provider's payment page for this payment. */
  checkoutUrl: string;
}

/** What the provider answers when asked about one payment; amount in minor units, as it reports them. */
export interface HostedPaymentStatus {
  outcome: CollectionOutcome;
  amount: bigint | null;
  currency: string | null;
  /** card, bank, mobile_money, ... when the provider says. */
  paymentMethod: string | null;
}

/**
 * A provider's notification whose signature checked out. It only says which object to look at: the
 * gateway confirms the outcome by asking the provider before anything changes.
 */
export type ProviderNotification =
  | { kind: "collection"; reference: string; event: string }
  | { kind: "payout"; reference: string; event: string }
  | { kind: "other"; event: string };

export interface HostedCheckoutConnector {
  /** Throws a ValidationError naming the field the provider cannot take (amount, currency, email). */
  checkPayment(request: { amount: bigint; currency: string }): void;
  start(request: HostedPaymentRequest): Promise<HostedPaymentStarted>;
  verify(request: { config: unknown; reference: string }): Promise<HostedPaymentStatus>;
  /**
   * Checks the notification's signature over the raw bytes (constant time) before reading them; null
   * when it does not verify, which must change nothing.
   */
  readNotification(request: { config: unknown; rawBody: Buffer; headers: Record<string, string | string[] | undefined> }): ProviderNotification | null;
  /** The gateway's answer to a notification it accepted. */
  notificationAck(): unknown;
}

/* ---- Payouts (M-Pesa B2C). Amounts are minor units; the connector converts. ---- */

export interface PayoutRequest {
  config: unknown;
  /** The gateway's payout reference: providers that key transfers by the caller's reference (Paystack) get it. */
  reference: string;
  /** Fixed and committed before the call (Daraja's OriginatorConversationID): the provider refuses a reuse. */
  providerRequestId: string;
  amount: bigint;
  currency: string;
  /** 254XXXXXXXXX */
  phoneNumber: string;
  commandId: string;
  remarks: string;
  resultUrl: string;
  timeoutUrl: string;
  /** Only the sandbox connector uses it: where its simulated result is delivered (no network). */
  deliverResult?: (body: unknown) => Promise<void>;
}

/** A provider's result for one payout, parsed by its connector. */
export interface PayoutResult {
  providerRequestId: string | null;
  outcome: SettledCollectionOutcome;
  /** What the provider says it sent, when it says (checked against the row). */
  amount: bigint | null;
}

export interface PayoutConnector {
  /** True when this channel's credentials allow payouts (e.g. an M-Pesa initiator is configured). */
  canPayOut(config: unknown): boolean;
  /** Throws a ValidationError naming `amount` when the provider cannot send it (units, bounds). */
  checkAmount(amount: bigint, currency: string): void;
  /** Sends the payout; resolves with the provider's conversation id once it accepted the request. */
  send(request: PayoutRequest): Promise<{ providerConversationId: string }>;
  /**
   * Asks the provider what became of a payout. Daraja posts the answer later to resultUrl; a provider that
   * answers at once (Paystack, the sandbox) hands it to deliverResult.
   */
  queryStatus(request: {
    config: unknown;
    reference: string;
    providerRequestId: string;
    resultUrl: string;
    timeoutUrl: string;
    deliverResult?: (body: unknown) => Promise<void>;
  }): Promise<void>;
  parseResult(body: unknown): PayoutResult;
  /** The answer to queryStatus; null when it does not settle the payout (the query failed, or it is still in flight). */
  parseStatusResult(body: unknown): PayoutResult | null;
  /** The request a queue-timeout notice names (its providerRequestId); null when it names none. It settles nothing. */
  parseTimeout(body: unknown): string | null;
  resultAck(): unknown;
  close?(): void;
}

/* ---- Refunds: money back to the payer of a completed payment, on the rail it came by. ---- */

/** The payment being refunded, as the gateway recorded it. */
export interface RefundedPayment {
  reference: string;
  amount: bigint;
  currency: string;
  paymentMethod: string | null;
  /** The provider's id of the payment (card charge, Paystack transaction, M-Pesa receipt). */
  providerReference: string | null;
  /** E.164, for mobile-money payments. */
  phoneNumber: string | null;
}

export interface RefundRequest {
  config: unknown;
  /** Ours (re_...), and our id for the provider request, both fixed before the call. */
  reference: string;
  providerRequestId: string;
  amount: bigint;
  currency: string;
  payment: RefundedPayment;
  merchantNote: string | null;
  customerNote: string | null;
  /** When the refund was created: a simulated provider answers by elapsed time. */
  createdAt: Date;
  /** The provider's id of the refund once it gave one. */
  providerReference: string | null;
}

/** What a refund came to, or that it is still on its way. */
export type RefundOutcome =
  | { state: "pending"; providerReference?: string | null; note?: string | null }
  | { state: "completed"; providerReference: string | null }
  | { state: "failed"; code: string; message: string };

export interface RefundConnector {
  /** The rail for refunding `amount` of this payment (`sandbox`, `paystack_refund`, ...), or why it cannot be. */
  method(payment: RefundedPayment, amount: bigint, config: unknown): { method: string } | { refused: string };
  /** Asks the provider to refund. A refusal is a GatewayError other than provider_unavailable; anything else is unknown. */
  send(request: RefundRequest): Promise<RefundOutcome>;
  /** What became of a refund: the reconciler asks, and a refund whose sending was interrupted is asked about, never resent. */
  queryStatus(request: RefundRequest): Promise<RefundOutcome>;
  /** How long after sending to ask first (then with doubling waits). */
  readonly checkAfterMs: number;
}
