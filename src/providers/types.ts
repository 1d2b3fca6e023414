import type { GatewayError } from "../errors.ts";
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
  /** Charges a card saved on an earlier payment, without the payer. */
  savedCards?: SavedCardConnector;
  payouts?: PayoutConnector;
  refunds?: RefundConnector;
  /** Chargebacks: a payer contesting a card payment with their bank (absent where the rail has none: M-Pesa). */
  disputes?: DisputeConnector;
  /** What the provider posts back to the gateway (its callbacks), and where. */
  inbound?: InboundConnector;
  /** Its record of payments and money, for the daily reconciliation. */
  reconciliation?: ReconciliationConnector;
  /** Whether the provider accepts a channel's credentials, asked with a call that needs them (absent: the provider needs none). */
  credentials?: CredentialsConnector;
}

/** What the provider said of a channel's credentials, in the merchant's words (never a secret). */
export interface CredentialsVerdict {
  ok: boolean;
  message: string;
}

export interface CredentialsConnector {
  /**
   * Shows the credentials to the provider with a call that changes nothing (Daraja's OAuth token, Paystack's
   * GET /balance). `live`: the channel takes real money, so test credentials (a test key, a sandbox environment)
   * are refused too. Never throws for a refusal or an unreachable provider: both are verdicts.
   */
  verify(request: { config: unknown; live: boolean }): Promise<CredentialsVerdict>;
}

/** What a card charge came to: the core records it through the state machine. */
export type CardOutcome =
  | { outcome: "succeeded"; providerReference: string; last4: string; brand: string; saved?: SavedCard }
  | { outcome: "declined" | "failed"; code: string; reason: string; last4: string; brand: string };

/**
 * A card the provider can charge again without the payer (Paystack's `authorization`): what a successful payment
 * leaves behind. `token` charges it (secret: stored sealed, never shown); `signature` is the same for one card across
 * payments, so one card saved twice is one payment method.
 */
export interface SavedCard {
  token: string;
  signature: string;
  brand: string;
  last4: string;
  expMonth: number | null;
  expYear: number | null;
  bank: string | null;
  reusable: boolean;
}

/** A charge of a saved card: the payment's reference is fixed before the call, so a lost answer is asked about by it. */
export interface SavedCardChargeRequest {
  config: unknown;
  token: string;
  email: string;
  reference: string;
  amount: bigint;
  currency: string;
}

/** A saved card's charge: settled, refused, or waiting for the payer (`redirectUrl`: where the bank wants them). */
export type SavedCardOutcome =
  | { outcome: "succeeded"; providerReference: string }
  | { outcome: "declined" | "failed"; code: string; reason: string }
  | { outcome: "pending"; redirectUrl: string | null };

/** Charging saved cards without the payer (recurring payments). */
export interface SavedCardConnector {
  charge(request: SavedCardChargeRequest): Promise<SavedCardOutcome>;
  /** What became of an earlier charge by its reference; "unknown" when the provider never received it. */
  status(request: { config: unknown; reference: string }): Promise<SavedCardOutcome | { outcome: "unknown" }>;
}

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
  /**
   * Fields the provider echoes back, null when it did not send them or they could not be read ("abc", 99.999, a
   * negative): a success is applied only when both are there and match the stored row exactly.
   */
  amount: bigint | null;
  /** As the provider wrote it (digits: 254712345678); compared with the stored number after normalisation. */
  phoneNumber: string | null;
}

/** What the gateway (relaying the merchant's answer) says to a C2B validation: accepted, or rejected with the provider's code. */
export type C2bDecision = { accept: true } | { accept: false; code: string };

/** A parsed C2B validation or confirmation payload. */
export interface C2bPayment {
  transId: string;
  amount: bigint;
  phoneNumber: string | null;
  billRef: string;
  shortcode: string;
}

export interface MomoConnector {
  /** True for a simulator that prompts no phone (the built-in sandbox): the payer pages' push limits do not apply. */
  readonly simulated?: boolean;
  /** The currency this rail collects in (M-Pesa: KES): the core never names it. */
  readonly currency: string;
  /** The verdict the core records when a push outlived its lifetime with no answer, in the provider's own words (M-Pesa: 1019). */
  readonly expiredPush: { state: "failed"; code: string; message: string };
  /** The code a C2B validation is rejected with when the merchant registered `Cancelled` and gave no answer (M-Pesa: C2B00016). */
  readonly c2bDefaultRejectCode: string;
  /** Throws a ValidationError naming `amount` when the provider cannot collect it (units, bounds). */
  checkAmount(amount: bigint, currency: string): void;
  stkPush(request: StkPushRequest): Promise<StkPushAccepted>;
  stkQuery(request: { config: unknown; checkoutRequestId: string }): Promise<CollectionOutcome>;
  /** Also used for the sandbox's in-process callbacks, which never pass through HTTP. */
  parseStkCallback(body: unknown): CollectionCallback;
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
  /** True when payers pay this channel's shortcode from their phone's menu (C2B), so its URLs must be registered to record them. */
  takesC2b(config: unknown): boolean;
  parseC2bPayment(body: unknown): C2bPayment;
  /** The provider's validation reply: accepted, or rejected with its code. */
  c2bValidationReply(decision: C2bDecision): unknown;
  /** Reads a merchant's validation answer (given in the provider's format); null when it is not one. */
  readC2bValidationDecision(body: unknown): C2bDecision | null;
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
  /** The card it was paid with, as the provider can charge it again; null when it cannot say. */
  savedCard?: SavedCard | null;
}

/**
 * A provider's notification whose signature checked out. It only says which object to look at: the
 * gateway confirms the outcome by asking the provider before anything changes.
 */
export type ProviderNotification =
  | { kind: "collection"; reference: string; event: string }
  | { kind: "payout"; reference: string; event: string }
  /**
   * A refund changed at the provider. Paystack's refund.* webhooks name the refunded payment's reference
   * (`transaction_reference`), and only some name the refund's own id: the gateway asks about the pending
   * refunds the notice can mean.
   */
  | { kind: "refund"; event: string; paymentReference: string | null; providerReference: string | null }
  /** A dispute opened, was reminded of or resolved at the provider (Paystack's charge.dispute.*): the gateway asks about it. */
  | { kind: "dispute"; event: string; providerReference: string }
  | { kind: "other"; event: string };

export interface HostedCheckoutConnector {
  /** Throws a ValidationError naming the field the provider cannot take (amount, currency, email). */
  checkPayment(request: { amount: bigint; currency: string }): void;
  start(request: HostedPaymentRequest): Promise<HostedPaymentStarted>;
  verify(request: { config: unknown; reference: string }): Promise<HostedPaymentStatus>;
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
  /** Our id of the request it answers (Daraja's OriginatorConversationID); null when it names none. */
  providerRequestId: string | null;
  outcome: SettledCollectionOutcome;
  /** What the provider says it sent; null when absent or unreadable. A success is applied only with the row's exact amount. */
  amount: bigint | null;
}

export interface PayoutConnector {
  /** True when this channel's credentials allow payouts (e.g. an M-Pesa initiator is configured). */
  canPayOut(config: unknown): boolean;
  /** What a channel's config needs before it can pay out, for the refusal's message (when canPayOut can say no). */
  readonly payOutNeeds?: string;
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
  /** A payout's result as the provider posts it (also the sandbox's in-process results). */
  parseResult(body: unknown): PayoutResult;
  /** The answer to queryStatus; null when it does not settle the payout (the query failed, or it is still in flight). */
  parseStatusResult(body: unknown): PayoutResult | null;
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
  /** Where a provider that answers later (Daraja) posts the refund's result, its queue timeout and a status query's answer. */
  callbacks?: RefundCallbackUrls;
}

export interface RefundCallbackUrls {
  result: string;
  timeout: string;
  /** The ResultURL of a status query about this refund (its answer names the query, not the refund). */
  statusResult: string;
}

/**
 * A provider's result for one refund (Daraja's Reversal or B2C Result, or a status answer about one), parsed by its
 * connector; amount in minor units. It is applied only when it names the refund's request (our id, or the
 * provider's conversation id kept while pending) and, when it completes it, carries the refund's exact amount.
 */
export interface RefundResult extends PayoutResult {
  /** The provider's own id of the request (Daraja's ConversationID), matched when our request id is not echoed. */
  conversationId: string | null;
}

/** The rail a refund takes. */
export interface RefundRail {
  method: string;
  /**
   * The payment's receipt when this rail reverses it whole (M-Pesa's Reversal): the provider is asked to reverse
   * a receipt at most once, whatever a later result says, which the database holds to (refunds.reversed_receipt).
   */
  reverses?: string;
}

/** What a refund came to, or that it is still on its way. */
export type RefundOutcome =
  | { state: "pending"; providerReference?: string | null; note?: string | null }
  | { state: "completed"; providerReference: string | null }
  | { state: "failed"; code: string; message: string };

export interface RefundConnector {
  /**
   * The rail for refunding `amount` of this payment (`sandbox`, `paystack_refund`, ...), or why it cannot be.
   * Throws a ValidationError naming `amount` when the rail cannot move that amount (units, bounds), and a
   * GatewayError when the payment cannot be refunded by the gateway at all (no M-Pesa receipt to reverse).
   */
  method(payment: RefundedPayment, amount: bigint, config: unknown): RefundRail | { refused: string };
  /** Asks the provider to refund. A refusal is a GatewayError other than provider_unavailable; anything else is unknown. */
  send(request: RefundRequest): Promise<RefundOutcome>;
  /** What became of a refund: the reconciler asks, and a refund whose sending was interrupted is asked about, never resent. */
  queryStatus(request: RefundRequest): Promise<RefundOutcome>;
  /** How long after sending to ask first (then with doubling waits). */
  readonly checkAfterMs: number;
  /** What the merchant is told to do about a payment whose receipt was sent for reversal and will not be sent again. */
  readonly reversedOnceAdvice?: string;
}

/* ---- Disputes (chargebacks). Amounts in minor units; the connector converts. ---- */

/** Why the payer disputes, in the gateway's words (the provider's category mapped; `general` when unknown). */
export const DISPUTE_REASONS = ["fraudulent", "product_not_received", "product_unacceptable", "duplicate", "subscription_canceled", "credit_not_processed", "general"] as const;
export type DisputeReason = (typeof DISPUTE_REASONS)[number];

/** needs_response -> under_review -> won | lost; needs_response -> lost (accepted, or the deadline passed). */
export type DisputeState = "needs_response" | "under_review" | "won" | "lost";

/** The provider's record of one dispute, provider-neutral. */
export interface ProviderDispute {
  /** The provider's id of the dispute (Paystack's numeric id as text). */
  providerReference: string;
  /** The disputed payment's reference as the provider keeps it (ours); null when it does not say. */
  paymentReference: string | null;
  /** What is disputed; null when the provider does not say (then the payment's whole amount). */
  amount: bigint | null;
  currency: string | null;
  reason: DisputeReason;
  state: DisputeState;
  /** The deadline for the merchant's answer (Paystack's dueAt); null when none is given. */
  dueBy: Date | null;
  resolvedAt: Date | null;
  /** What the provider or the bank wrote, oldest first. */
  messages: { sender: string; body: string; createdAt: string | null }[];
  /** What the provider charges on a lost dispute (minor units); 0 when it charges none. */
  fee: bigint;
}

/** The merchant's answer, as the provider takes it. */
export interface DisputeEvidence {
  customerName: string;
  customerEmail: string;
  customerPhone: string;
  serviceDetails: string;
  deliveryAddress: string | null;
  /** YYYY-MM-DD */
  deliveryDate: string | null;
}

/** The disputed payment, as the gateway recorded it. */
export interface DisputedPayment {
  reference: string;
  amount: bigint;
  currency: string;
  /** The provider's id of the payment (Paystack's transaction id, the sandbox's charge). */
  providerReference: string | null;
  completedAt: Date | null;
}

/** What the gateway knows of a dispute when it asks: a simulator (the sandbox) answers from it, a real provider from its own record. */
export interface DisputeQuery {
  config: unknown;
  providerReference: string;
  /** Null when the gateway does not know the dispute yet (a provider's notice of a new one). */
  payment: DisputedPayment | null;
  /** When evidence was submitted (contested), and its service details; null before. */
  submitted: { at: Date; serviceDetails: string } | null;
  /** When the merchant accepted the loss; null before. */
  acceptedAt: Date | null;
}

export interface DisputeConnector {
  /** Asks the provider about one dispute (a notification only names it). */
  fetch(request: DisputeQuery): Promise<ProviderDispute>;
  /**
   * The dispute the provider has on a payment, or null: asked when a payment may have been disputed unseen (the
   * sandbox's disputing card, or reconciliation). Absent when the provider only tells by notification.
   */
  ofPayment?(request: { config: unknown; payment: DisputedPayment }): Promise<ProviderDispute | null>;
  /** The sandbox only: how long after evidence is submitted its verdict comes, so the gateway asks then (not at its usual interval). */
  decidesAfterMs?: number;
  /** The sandbox only: in how long a dispute opens on a payment it just approved (null: never), so the gateway asks then. */
  opensAfterMs?(payment: DisputedPayment): number | null;
  /** Hands one evidence file to the provider; answers the name later submissions use (Paystack's upload_url fileName). */
  uploadFile(request: { config: unknown; providerReference: string; fileName: string; contentType: string; bytes: Buffer }): Promise<{ providerFileName: string }>;
  /** Submits the evidence and contests the dispute (Paystack: evidence, then resolve `declined`). */
  contest(request: DisputeQuery & { evidence: DisputeEvidence; files: string[]; amount: bigint; message: string }): Promise<void>;
  /** Accepts the loss (Paystack: resolve `merchant-accepted` with the refund amount). */
  accept(request: DisputeQuery & { amount: bigint; message: string }): Promise<void>;
}

/* ---- Inbound: what a provider posts back to the gateway, at /callbacks/<provider>/<channel token>/<path>. ---- */

/** One callback as it arrived, after the core found its channel by the token in its path. */
export interface InboundRequest {
  /** Which of the connector's `paths` it came to ("/stk", "/b2c/status/:reference", "" for the token itself). */
  path: string;
  /** The named segments of that path, percent-decoded ({ reference }). */
  params: Record<string, string>;
  /** The body's exact bytes, as a signature covers them; empty when none was sent. */
  rawBody: Buffer;
  /** The Content-Type header as sent; undefined when absent. */
  contentType: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  /** The channel's decrypted credentials, decrypted on demand (Daraja's callbacks need none). */
  config(): unknown;
}

/**
 * What one callback says, provider-neutral: the core applies it through the service that owns the
 * object (transactions, payouts, M-Pesa C2B), exactly once, whatever the provider's wire format.
 */
export type InboundCallback =
  /** A collection's result (M-Pesa's STK callback): checked against the stored row, then applied. */
  | { kind: "collection_result"; result: CollectionCallback }
  /** A C2B payment asking to be accepted; `body` is the provider's payload, relayed to the merchant as sent. */
  | { kind: "c2b_validation"; payment: C2bPayment; body: unknown }
  /** A C2B payment made; `body` is forwarded to the merchant as sent. */
  | { kind: "c2b_confirmation"; payment: C2bPayment; body: unknown }
  | { kind: "payout_result"; result: PayoutResult }
  /** The provider's queue gave up on a payout request (its providerRequestId, null when it names none): its fate is unknown. */
  | { kind: "payout_timeout"; providerRequestId: string | null }
  /** The answer to a status query about the payout `reference` (its ids are the query's); null settles nothing. */
  | { kind: "payout_status_result"; reference: string; result: PayoutResult | null }
  /** A refund's result (Daraja's Reversal or B2C Result on the refund's ResultURL). */
  | { kind: "refund_result"; result: RefundResult }
  /** The provider's queue gave up on a refund request: its fate is unknown, so it is asked about now. */
  | { kind: "refund_timeout"; providerRequestId: string | null }
  /** The answer to a status query about the refund `reference`; null settles nothing. */
  | { kind: "refund_status_result"; reference: string; result: RefundResult | null }
  /** A signed notification that only names what to look at (Paystack): the gateway asks the provider before changing anything. */
  | { kind: "notification"; notification: ProviderNotification }
  /** The answer to an account balance request made for the reconciliation `reference` (Daraja's AccountBalance result, or its queue timeout). */
  | { kind: "balance_result"; reference: string; result: AccountBalanceResult };

/** What the gateway decided about a callback, when its reply depends on it (a C2B validation's verdict). */
export type InboundVerdict = C2bDecision | undefined;

/** The gateway's own URLs a provider posts one channel's callbacks to; absent where the provider has none. */
export interface ChannelCallbackUrls {
  /** Collection results (M-Pesa's STK CallBackURL). */
  collection?: string;
  c2bValidation?: string;
  c2bConfirmation?: string;
  /** Payout results and queue timeouts (Daraja's ResultURL and QueueTimeOutURL). */
  payoutResult?: string;
  payoutTimeout?: string;
  /** ResultURL of a status query about one payout (its answer names the query, not the payout). */
  payoutStatusResult?(reference: string): string;
}

/** Builds the URL of one callback: `${PUBLIC_BASE_URL}/callbacks/${segment}/${channel token}${path}`. */
export type CallbackUrlBuilder = (segment: string, path: string) => string;

export interface InboundConnector {
  /**
   * Path segments besides the provider's registry name that its callbacks arrive under: URLs already
   * registered with the provider for existing channels ("daraja"). The core accepts both.
   */
  aliases: readonly string[];
  /** The paths below the channel token it serves: "/stk", "/b2c/status/:reference" (a named segment), "" (the token itself). */
  paths: readonly string[];
  /** Larger bodies are a 413: unread when their length is declared, else once read (never past the server's body limit). */
  maxBodyBytes: number;
  /**
   * Authenticates and parses one callback. Throws a GatewayError when it refuses it (a bad signature,
   * a body that is not the provider's format); `refuse` decides how that is answered. Changes nothing.
   */
  read(request: InboundRequest): InboundCallback;
  /** The reply the provider expects once the callback was applied (or deliberately ignored). */
  acknowledge(callback: InboundCallback, verdict: InboundVerdict): unknown;
  /**
   * A refusal in the provider's reply shape (Daraja reads only {ResultCode, ResultDesc}); null leaves it
   * to the gateway's error envelope.
   */
  refuse(error: GatewayError): { status: number; body: unknown } | null;
  /**
   * The channel's callback URLs, as handed to the provider with each request (STK CallBackURL, B2C
   * ResultURL, C2B registration). Throws a ValidationError when the provider would refuse them.
   */
  callbackUrls(at: CallbackUrlBuilder): ChannelCallbackUrls;
  /** The one URL a merchant pastes into the provider's dashboard (Paystack's webhook URL); absent when the gateway hands out its URLs itself. */
  webhookUrl?(at: CallbackUrlBuilder): string;
  /**
   * Where the provider posts one refund's result, queue timeout and status answer (Daraja's Reversal and
   * refund B2C requests); absent when its refunds are settled otherwise (webhooks, asking).
   */
  refundCallbackUrls?(at: CallbackUrlBuilder, reference: string): RefundCallbackUrls;
  /** Where the provider posts the answer to an account balance request made for one reconciliation (Daraja). */
  balanceCallbackUrls?(at: CallbackUrlBuilder, reference: string): { result: string; timeout: string };
}

/* ---- Reconciliation: the provider's own record of a day, provider-neutral. Amounts in minor units. ---- */

/** One payment as the provider records it. */
export interface ProviderPaymentRecord {
  /** The provider's id of the payment (Paystack's transaction id, the sandbox's charge or receipt). */
  providerReference: string | null;
  /** The gateway's reference when the provider keeps it (the reference the payment was opened with). */
  reference: string | null;
  amount: bigint;
  currency: string;
  /** `reversed`: paid, then given back to the payer by the provider (a chargeback lost or accepted, or a refund in full). */
  status: "completed" | "failed" | "pending" | "reversed";
  /** When the provider created it (its day is the report's), and when it was paid; null when the provider does not say. */
  createdAt: Date | null;
  paidAt: Date | null;
}

/** What the provider paid out to the merchant's bank for a day (Paystack's settlements), summed per currency. */
export interface ProviderSettlementSummary {
  count: number;
  /** Per currency: what was collected, the fees taken and what was sent to the bank. */
  totals: Record<string, { total: bigint; fees: bigint; settled: bigint }>;
  statuses: Record<string, number>;
}

/** One account of a balance answer ("Working Account|KES|453845.00|453845.00|0.00|0.00"), minor units. */
export interface ProviderAccountBalance {
  account: string;
  currency: string;
  current: bigint;
  available: bigint;
  reserved: bigint;
  uncleared: bigint;
}

export type AccountBalanceResult =
  | { state: "received"; accounts: ProviderAccountBalance[]; completedAt: string | null }
  | { state: "failed"; code: string; message: string };

export interface ReconciliationConnector {
  /** True when payments() lists every payment of the day (Paystack); false when it answers only for the references asked (the sandbox). */
  readonly listsAll?: boolean;
  /**
   * The provider's payments of one UTC day [from, to). A provider with no account to list (the sandbox) answers
   * for the provider references the gateway recorded that day instead; one that can list (Paystack) lists them all, paging.
   */
  payments?(request: { config: unknown; from: Date; to: Date; providerReferences: string[] }): Promise<ProviderPaymentRecord[]>;
  /** What the provider settled to the merchant's bank that day. */
  settlements?(request: { config: unknown; from: Date; to: Date }): Promise<ProviderSettlementSummary>;
  /** Why the balance cannot be asked for on this channel (no initiator), or undefined when it can. */
  balanceUnavailable?(config: unknown): string | undefined;
  /** Asks for the account balance; the answer is posted later to `resultUrl` (a `balance_result` callback). */
  requestBalance?(request: { config: unknown; resultUrl: string; timeoutUrl: string }): Promise<void>;
}
