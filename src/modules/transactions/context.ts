import type { JobRequest } from "../../jobs/store.ts";
import { randomBytes } from "node:crypto";
import type { Principal } from "../../auth.ts";
import type { PrismaClient, Reader, Sql } from "../../db/database.ts";
import type { PaymentChannel, PaymentMethod, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, ValidationError } from "../../errors.ts";
import { recoveredObject } from "../../idempotency/scope.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import type { Logger } from "../../logger.ts";
import type { Connectors } from "../../providers/index.ts";
import type { Connector, MomoConnector, SavedCard } from "../../providers/types.ts";
import type { PushLimiter } from "../../rate-limit/pushes.ts";
import type { ChannelService } from "../channels/service.ts";
import type { CustomerService } from "../customers/service.ts";
import type { EventPublisher } from "../events/publisher.ts";
import type { StatusCounter } from "../events/status-machine.ts";
import { transitionTransaction, transitionTransactions, type StateMachineDeps, type TransitionRequest, type TransitionResult } from "./status.ts";
import { createAttemptStore, type AttemptStore } from "./attempt-store.ts";
import { createTransactionStore, type TransactionStore } from "./store.ts";

/** How long a checkout card charge holds its transaction by default; longer than any connector's charge timeout. */
export const CARD_CHARGE_LEASE_MS = 2 * 60_000;

export interface CheckoutSettings {
  /** Failed attempts a hosted-checkout payment takes before it fails (CHECKOUT_MAX_ATTEMPTS). */
  maxAttempts: number;
  /** An unpaid hosted-checkout payment fails as `abandoned` this long after it was created (CHECKOUT_EXPIRY_MS). */
  expiryMs: number;
}
export const DEFAULT_CHECKOUT_SETTINGS: CheckoutSettings = { maxAttempts: 3, expiryMs: 24 * 3_600_000 };

/** What every flow of the payments core (card.ts, hosted.ts, collections.ts, ...) shares: deps, store, transition. */

export interface CollectionTiming {
  /** A pending push with no callback after this long is queried. */
  reconcileAfterMs: number;
  /** First wait between two queries of one push; doubles each time, capped at 60 s. */
  queryBackoffMs: number;
  /** After this long with no answer a push is failed with its provider's expired-push verdict. */
  lifetimeMs: number;
}

export interface HostedTiming {
  /** A pending hosted payment is first verified this long after initialize; the wait then doubles, capped at an hour. */
  verifyAfterMs: number;
  /** Still unpaid this long after initialize: failed as abandoned. */
  abandonAfterMs: number;
}

export interface TransactionServiceDeps {
  prisma: PrismaClient;
  /** Plain SQL for the hottest reads and the initialize insert (src/db/sql.ts). */
  sql: Sql;
  /** The reader for lists, the CSV export and the stats (a replica when there is one); the primary when unset. */
  read?: Reader;
  channels: ChannelService;
  customers: CustomerService;
  connectors: Connectors;
  publisher: EventPublisher;
  jobs: JobRunner;
  /** Counts committed status changes when set (/metrics). */
  metrics?: StatusCounter;
  logger: Logger;
  publicBaseUrl: string;
  /** How long a card charge's claim holds its transaction (CHECKOUT_CHARGE_LEASE_MS); default CARD_CHARGE_LEASE_MS. */
  cardChargeLeaseMs?: number;
  /** Retries and expiry on the hosted checkout (CHECKOUT_MAX_ATTEMPTS, CHECKOUT_EXPIRY_MS); defaults 3 and 24 h. */
  checkout?: CheckoutSettings;
  collection: CollectionTiming;
  hosted: HostedTiming;
  /** What the payer pages' STK pushes spend (per phone, link, merchant); none: unlimited (scripts and unit tests). */
  pushLimits?: PushLimiter;
  /** Where a channel's provider sends the outcome of an STK push (mobile money owns the URL shape). */
  stkCallbackUrl(channel: PaymentChannel, momo: MomoConnector): string;
  /**
   * Jobs a card payment's completion queues with itself (disputes: asking whether the sandbox's disputing card was
   * disputed). Given by the composition root, as the disputes service is made after this one.
   */
  jobsOnCardPaid?(channel: PaymentChannel, payment: { reference: string; amount: bigint; currency: string; providerReference: string | null }): JobRequest[];
  /** Where a paid payment's card or phone is saved when the payer consented (payment-methods/service.ts). */
  paymentMethods?: PaymentMethodSaver;
}

/** Whose saved method it is and which channel saved it. */
export interface MethodOwner {
  merchantId: number;
  mode: "test" | "live";
  customerId: number;
  channelId: number;
}

export interface PaymentMethodSaver {
  saveCard(owner: MethodOwner, card: SavedCard): Promise<unknown>;
  saveMpesa(owner: MethodOwner, msisdn: string): Promise<unknown>;
  /** The customer's method to charge and its provider token; refuses a detached or single-use one. */
  chargeable(principal: Principal, reference: string, customerId: number): Promise<{ method: PaymentMethod; token: string | null }>;
  /** chargeable() for many in one query: each request's method, or the error that refuses it. */
  chargeableMany(requests: { principal: Principal; reference: string; customerId: number }[]): Promise<({ method: PaymentMethod; token: string | null } | Error)[]>;
  /** The token of a method still attached (a retried charge's), or null. */
  tokenOf(paymentMethodId: number): Promise<string | null>;
}

/** The job that settles a pending collection or hosted payment whose provider has not told us (reconcile.ts). */
export const RECONCILE_JOB = "transaction.reconcile";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Random base62 text from the CSPRNG (rejection sampling keeps it uniform). */
function randomToken(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/**
 * URL-safe and unguessable (~119 bits): the reference alone opens the hosted checkout page. Its
 * characters are ones every provider takes in a reference (Paystack: alphanumerics, `-`, `.`, `=`);
 * older `txn_` references keep working, as lookups are by the whole string.
 */
export const newReference = () => `txn-${randomToken(20)}`;
/** Paystack-style access code: what a checkout integration may use instead of the whole URL. */
export const newAccessCode = () => randomToken(16);

export const alreadySettled = (status: string) => new GatewayError("conflict", `Transaction is already ${status}`);

/** A provider call that threw: its own GatewayError as it is, anything else as provider_unavailable. */
export const asProviderError = (error: unknown) => (error instanceof GatewayError ? error : new GatewayError("provider_unavailable", undefined, { cause: error }));

export function connectorOf(connectors: Connectors, channel: PaymentChannel): Connector | undefined {
  return connectors.for(channel);
}

/** The channel's mobile-money capability, or a 400 naming the channel. */
export function momoConnectorOf(connectors: Connectors, channel: PaymentChannel): MomoConnector {
  const momo = connectorOf(connectors, channel)?.momo;
  if (!momo) throw new ValidationError("payment_channel_id", `payment channel ${channel.id} (${channel.provider}) does not take mobile money`);
  return momo;
}

export interface FlowContext {
  deps: TransactionServiceDeps;
  store: TransactionStore;
  /** Every statement on the payer's attempts (transaction_attempts). */
  attempts: AttemptStore;
  /** The same statements on the reader: for lists, exports and stats only, which may lag the primary a little. */
  readStore: TransactionStore;
  stateMachine: StateMachineDeps;
  /** The one status change (status.ts). */
  transition(request: TransitionRequest): Promise<TransitionResult>;
  /** Many changes to one status in one statement (status.ts transitionTransactions): a billing batch's settled charges. */
  transitionMany(requests: TransitionRequest[]): Promise<TransitionResult[]>;
  /** The gateway's hosted checkout page for a payment. */
  checkoutUrl(reference: string): string;
  /** Where a hosted-checkout provider sends the payer back (Paystack's callback_url). */
  returnUrl(reference: string): string;
  /**
   * The transaction an interrupted earlier attempt of this Idempotency-Keyed request committed: the
   * retry answers with it instead of creating (and, for a push, sending) a second one.
   */
  recoveredTransaction(principal: Principal): Promise<Transaction | null>;
}

/**
 * Saves a paid payment's card or phone for its customer when the payer consented (transactions.save_payment_method).
 * The payment stands whatever happens here: a method that could not be saved is logged, not an error.
 */
export async function savePaymentMethodOf(deps: TransactionServiceDeps, t: Transaction, channelId: number | null, saved: { card: SavedCard } | { msisdn: string } | null | undefined): Promise<void> {
  if (!deps.paymentMethods || !t.savePaymentMethod || t.customerId === null || channelId === null || !saved) return;
  const owner = { merchantId: t.merchantId, mode: t.mode, customerId: t.customerId, channelId };
  try {
    if ("card" in saved) await deps.paymentMethods.saveCard(owner, saved.card);
    else await deps.paymentMethods.saveMpesa(owner, saved.msisdn);
  } catch (error) {
    deps.logger.error({ reference: t.reference, err: (error as Error).message }, "payment method not saved");
  }
}

export function createFlowContext(deps: TransactionServiceDeps): FlowContext {
  const store = createTransactionStore(deps);
  const stateMachine: StateMachineDeps = { prisma: deps.prisma, publisher: deps.publisher, jobs: deps.jobs, metrics: deps.metrics, sql: deps.sql };
  const checkoutUrl = (reference: string) => `${deps.publicBaseUrl}/payment/checkout/${reference}`;
  return {
    deps,
    store,
    attempts: createAttemptStore(deps),
    readStore: deps.read ? createTransactionStore(deps.read) : store,
    stateMachine,
    transition: (request) => transitionTransaction(stateMachine, request),
    transitionMany: (requests) => transitionTransactions(stateMachine, requests),
    checkoutUrl,
    returnUrl: (reference) => `${checkoutUrl(reference)}/return`,
    recoveredTransaction: (principal) => recoveredObject(principal, "transaction", (id) => store.findInScope(principal, id)),
  };
}
