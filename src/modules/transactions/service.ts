import { randomBytes } from "node:crypto";
import type { Principal } from "../../auth.ts";
import { luhnValid } from "../../cards.ts";
import { statusDateWhere, type StatusDateFilters } from "../../filters.ts";
import type { PrismaClient, Sql } from "../../db/database.ts";
import type { PaymentChannel, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, isUniqueViolation, NotFoundError, ValidationError } from "../../errors.ts";
import type { JobDefinition, JobRunner } from "../../jobs/runner.ts";
import type { JobRequest } from "../../jobs/store.ts";
import { inIdempotencyScope, recoveredObjectId } from "../../idempotency/scope.ts";
import type { Logger } from "../../logger.ts";
import { parseAmount, parseCurrency } from "../../money.ts";
import { pageWindow, resolvePaging, toPage, type Page, type Paging } from "../../paging.ts";
import { normalizeMsisdn, normalizePhone, phoneOrNull, toMsisdn } from "../../phone.ts";
import type { Connectors } from "../../providers/index.ts";
import type {
  CardDetails,
  CardOutcome,
  CollectionCallback,
  CollectionOutcome,
  Connector,
  HostedCheckoutConnector,
  HostedPaymentStatus,
  MomoConnector,
  SettledCollectionOutcome,
} from "../../providers/types.ts";
import { optionalText, unsafeTextIn } from "../../validation.ts";
import type { ChannelService } from "../channels/service.ts";
import { normalizeEmail, type CustomerService } from "../customers/service.ts";
import type { EventPublisher } from "../events/publisher.ts";
import type { StatusCounter } from "../events/status-machine.ts";
import {
  findTransaction,
  selectsColumnsOnly,
  TRANSACTION_COLUMNS,
  TRANSACTION_SUMMARY_COLUMNS,
  transactionFromRow,
  transactionSummaryFromRow,
  type TransactionRow,
} from "./rows.ts";
import { afterCreate, insertPendingTransaction, toPublishedEvent, transitionTransaction, type TransitionChanges, type TransitionRequest } from "./state-machine.ts";

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
const newAccessCode = () => randomToken(16);

export interface InitializeInput {
  amount: unknown;
  email?: string | null;
  paymentChannelId?: number | null;
  description?: string | null;
  currency?: string | null;
  firstName?: string | null;
  lastName?: string | null;
  phone?: string | null;
  /** The merchant's page to send the payer back to after paying (Paystack's field). */
  callbackUrl?: string | null;
  /** The merchant's own reference, kept as the client reference (the gateway's reference stays the key). */
  reference?: string | null;
  /** A JSON object of the merchant's, stored and echoed as sent. */
  metadata?: unknown;
}

export const MAX_METADATA_BYTES = 8 * 1024;
const MAX_METADATA_DEPTH = 10;
/** Levels of nesting below the metadata object itself; deeper is a 400 naming `metadata`. */
function metadataDepth(value: unknown): number {
  if (value === null || typeof value !== "object") return 0;
  let deepest = 0;
  for (const item of Object.values(value)) deepest = Math.max(deepest, metadataDepth(item));
  return 1 + deepest;
}

/**
 * initialize's `metadata`: a JSON object (not an array or a scalar) of at most 8 KB serialized (UTF-8),
 * returned as the object to store; null or absent is no metadata. Anything else is a 400 naming the field.
 */
export function parseMetadata(value: unknown): Record<string, unknown> | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) throw new ValidationError("metadata", "must be a JSON object");
  const serialized = JSON.stringify(value);
  if (Buffer.byteLength(serialized, "utf8") > MAX_METADATA_BYTES) {
    throw new ValidationError("metadata", `must be at most ${MAX_METADATA_BYTES} bytes as JSON (${MAX_METADATA_BYTES / 1024} KB)`);
  }
  if (metadataDepth(value) > MAX_METADATA_DEPTH) throw new ValidationError("metadata", `must be nested at most ${MAX_METADATA_DEPTH} levels deep`);
  // Text jsonb cannot store (NUL, lone surrogates): the one text check, which REST and GraphQL inputs have already passed.
  const unsafe = unsafeTextIn(value, "metadata");
  if (unsafe) throw unsafe;
  return value as Record<string, unknown>;
}

/** An http(s) URL the payer's browser is sent to; no credentials in it, at most 2,048 characters. */
function parseCallbackUrl(value: string | null | undefined): string | null {
  const text = optionalText(value, "callback_url", 2048);
  if (!text) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ValidationError("callback_url", "must be an absolute http(s) URL");
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.username || url.password) {
    throw new ValidationError("callback_url", "must be an absolute http(s) URL without credentials");
  }
  return url.href;
}

/** Where the payer goes after paying: the merchant's callback_url with ?trxref=<ref>&reference=<ref>, as Paystack sends them. */
export function payerReturnUrl(callbackUrl: string, reference: string): string {
  const url = new URL(callbackUrl);
  url.searchParams.set("trxref", reference);
  url.searchParams.set("reference", reference);
  return url.href;
}

export type TransactionFilters = StatusDateFilters & {
  /** One term matched exactly against the reference, client reference, provider receipt, e-mail or phone. */
  search?: string | null;
};

const MAX_SEARCH_LENGTH = 100;

/** A search term as each column stores it; null for no search. */
export interface TransactionSearch {
  /** Compared as typed with reference, client_reference and provider_reference. */
  text: string;
  /** The e-mail as stored (lower-cased), when the term looks like one. */
  email: string | null;
  /** The phone as stored (E.164), when the term reads as one: +254..., 254... or a Kenyan 07.../01.... */
  phone: string | null;
}

/**
 * Exact matches only, so each branch of the OR is an index scan (the unique reference, and the
 * (merchant, mode, column) indexes of the others); a substring search would read every row of the merchant.
 */
export function parseTransactionSearch(search: string | null | undefined): TransactionSearch | null {
  const text = search?.trim();
  if (!text) return null;
  if (text.length > MAX_SEARCH_LENGTH) throw new ValidationError("search", `must be at most ${MAX_SEARCH_LENGTH} characters`);
  const email = text.includes("@") ? text.toLowerCase() : null;
  return { text, email, phone: phoneOrNull(text) };
}

/** Status, inclusive UTC date range and search as a Prisma filter, scoped to the caller's merchant and mode. */
export function transactionWhere(principal: Principal, filters: TransactionFilters): Prisma.TransactionWhereInput {
  const where: Prisma.TransactionWhereInput = statusDateWhere(principal, filters);
  const search = parseTransactionSearch(filters.search);
  if (search) {
    where.OR = [
      { reference: search.text },
      { clientReference: search.text },
      { providerReference: search.text },
      ...(search.email ? [{ email: search.email }] : []),
      ...(search.phone ? [{ phoneNumber: search.phone }] : []),
    ];
  }
  return where;
}

/** Newest first; id breaks ties between rows created in the same millisecond. */
export const newestFirst: Prisma.TransactionOrderByWithRelationInput[] = [{ createdAt: "desc" }, { id: "desc" }];

function validateCard(card: CardDetails): CardDetails {
  const number = card.number.replace(/[\s-]/g, "");
  if (!/^\d{12,19}$/.test(number) || !luhnValid(number)) throw new ValidationError("card_number", "is not a valid card number");
  if (!Number.isInteger(card.expMonth) || card.expMonth < 1 || card.expMonth > 12) {
    throw new ValidationError("expiry_month", "must be a month from 1 to 12");
  }
  const now = new Date();
  const expYear = card.expYear < 100 ? 2000 + card.expYear : card.expYear;
  if (!Number.isInteger(expYear) || expYear * 12 + card.expMonth < now.getUTCFullYear() * 12 + now.getUTCMonth() + 1) {
    throw new ValidationError("expiry_year", "the card has expired");
  }
  if (!/^\d{3,4}$/.test(card.cvc)) throw new ValidationError("cvc", "must be 3 or 4 digits");
  return { number, expMonth: card.expMonth, expYear, cvc: card.cvc };
}

export interface CollectionTiming {
  /** A pending push with no callback after this long is queried. */
  reconcileAfterMs: number;
  /** First wait between two queries of one push; doubles each time, capped at 60 s. */
  queryBackoffMs: number;
  /** After this long with no answer a push is failed as expired (1019). */
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
  collection: CollectionTiming;
  hosted: HostedTiming;
  /** Where a channel's provider sends the outcome of an STK push (mobile money owns the URL shape). */
  stkCallbackUrl(channel: PaymentChannel, momo: MomoConnector): string;
}

export interface StkCollectionInput {
  amount: unknown;
  phoneNumber?: string | null;
  paymentChannelId?: number | null;
  reference?: string | null;
  description?: string | null;
}

/** A payment the provider reports on its own (an M-Pesa C2B confirmation), recorded once per receipt. */
export interface ProviderPayment {
  providerReference: string;
  amount: bigint;
  currency: string;
  /** Digits, as providers write them; null when the provider masks it. */
  phoneNumber: string | null;
  clientReference: string | null;
  paymentMethod: string;
}

export const RECONCILE_JOB = "transaction.reconcile";
const MOMO_CURRENCY = "KES";
const MAX_QUERY_BACKOFF_MS = 60_000;
const MAX_VERIFY_BACKOFF_MS = 60 * 60_000;
/** How long a checkout card charge holds its transaction by default; longer than any connector's charge timeout. */
export const CARD_CHARGE_LEASE_MS = 2 * 60_000;
export const PAYMENT_IN_PROGRESS = "A payment for this transaction is in progress";
const alreadySettled = (status: string) => new GatewayError("conflict", `Transaction is already ${status}`);
/** What a retry of a push interrupted by a crash is told: the push is not sent again, it is reconciled. */
const RECOVERED_PUSH_MESSAGE = "Request already accepted for processing";

function connectorOf(connectors: Connectors, channel: PaymentChannel): Connector | undefined {
  return connectors.for(channel);
}

/** The channel's mobile-money capability, or a 400 naming the channel. */
export function momoConnectorOf(connectors: Connectors, channel: PaymentChannel): MomoConnector {
  const momo = connectorOf(connectors, channel)?.momo;
  if (!momo) throw new ValidationError("payment_channel_id", `payment channel ${channel.id} (${channel.provider}) does not take mobile money`);
  return momo;
}

/**
 * The payments core. Every write to `transactions` happens here, through one pipeline: validate ->
 * resolve the channel and its connector by capability -> create the row -> call the connector ->
 * transition (state-machine.ts). The row exists before any provider is asked, so no provider answer
 * can arrive for a payment the gateway has no record of.
 */
export function createTransactionService(deps: TransactionServiceDeps) {
  const { prisma, channels, customers, connectors, logger } = deps;
  const stateMachine = { prisma, publisher: deps.publisher, jobs: deps.jobs, metrics: deps.metrics, sql: deps.sql };

  const checkoutUrl = (reference: string) => `${deps.publicBaseUrl}/payment/checkout/${reference}`;
  /** Where a hosted-checkout provider sends the payer back (Paystack's callback_url). */
  const returnUrl = (reference: string) => `${checkoutUrl(reference)}/return`;
  const transition = (request: TransitionRequest) => transitionTransaction(stateMachine, request);

  /**
   * The transaction an interrupted earlier attempt of this Idempotency-Keyed request committed: the
   * retry answers with it instead of creating (and, for a push, sending) a second one.
   */
  async function recoveredTransaction(principal: Principal): Promise<Transaction | null> {
    const id = recoveredObjectId("transaction");
    if (id === null) return null;
    return prisma.transaction.findFirst({ where: { id, merchantId: principal.merchantId, mode: principal.mode } });
  }

  /**
   * Initialize's insert, with the payer's customer in the same statement: the existing one by e-mail, else
   * a new one (ON CONFLICT covers a concurrent first payment by the same e-mail). A returning payer's
   * customer row is left as it is, as findOrCreateCustomer does.
   */
  async function insertCheckoutTransaction(
    principal: Principal,
    t: {
      reference: string;
      accessCode: string;
      amount: bigint;
      currency: string;
      description: string | null;
      email: string;
      phone: string | null;
      firstName: string | null;
      lastName: string | null;
      channelId: number;
      callbackUrl: string | null;
      clientReference: string | null;
      metadata: Record<string, unknown> | null;
    },
  ): Promise<Transaction> {
    const [row] = await deps.sql.query<TransactionRow>(
      `WITH existing AS (
         SELECT id FROM customers WHERE merchant_id = $1 AND mode = $2::"Mode" AND email = $3
       ), created AS (
         INSERT INTO customers (merchant_id, mode, email, first_name, last_name, phone)
         SELECT $1, $2::"Mode", $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM existing)
         ON CONFLICT (merchant_id, mode, email) DO UPDATE SET email = EXCLUDED.email
         RETURNING id
       )
       INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, description, email,
         phone_number, channel_id, customer_id, callback_url, client_reference, metadata, updated_at)
       VALUES ($1, $2::"Mode", $7, $8, $9::bigint, $10, 'pending', $11, $3, $6, $12,
         COALESCE((SELECT id FROM existing), (SELECT id FROM created)), $13, $14, $15::jsonb, now())
       RETURNING ${TRANSACTION_COLUMNS}`,
      [
        principal.merchantId,
        principal.mode,
        t.email,
        t.firstName,
        t.lastName,
        t.phone,
        t.reference,
        t.accessCode,
        t.amount.toString(),
        t.currency,
        t.description,
        t.channelId,
        t.callbackUrl,
        t.clientReference,
        t.metadata === null ? null : JSON.stringify(t.metadata),
      ],
    );
    return transactionFromRow(row!);
  }

  /** Verify's one statement: by reference, within the caller's merchant and mode. */
  async function transactionByReference(principal: Principal, reference: string): Promise<Transaction | null> {
    return findTransaction(deps.sql, `reference = $1 AND merchant_id = $2 AND mode = $3::"Mode"`, [reference, principal.merchantId, principal.mode]);
  }

  /**
   * The list's page and its total in one round trip: the count (an index-only scan) joined to the page
   * (the index in order, stopping at the limit). A page past the end is the one row of the count with
   * no transaction in it. A window count would read every matching row in full instead.
   */
  async function transactionPage(
    where: ReturnType<typeof statusDateWhere>,
    search: TransactionSearch | null,
    paging: Paging,
    summary: boolean,
  ): Promise<[Transaction[], number]> {
    const params: unknown[] = [where.merchantId, where.mode];
    let filter = `merchant_id = $1 AND mode = $2::"Mode"`;
    if (where.status) filter += ` AND status = $${params.push(where.status)}::"TransactionStatus"`;
    const created = where.createdAt as { gte?: Date; lt?: Date } | undefined;
    if (created?.gte) filter += ` AND created_at >= $${params.push(created.gte)}`;
    if (created?.lt) filter += ` AND created_at < $${params.push(created.lt)}`;
    if (search) {
      const text = params.push(search.text);
      const branches = [`reference = $${text}`, `client_reference = $${text}`, `provider_reference = $${text}`];
      if (search.email) branches.push(`email = $${params.push(search.email)}`);
      if (search.phone) branches.push(`phone_number = $${params.push(search.phone)}`);
      filter += ` AND (${branches.join(" OR ")})`;
    }
    // The offset as exact text: (page - 1) * limit can pass 2^53 for an absurd page, and PostgreSQL takes a bigint.
    const offset = String((BigInt(paging.page) - 1n) * BigInt(paging.limit));
    const limit = params.push(paging.limit);
    const skip = params.push(offset);
    const rows = await deps.sql.query<{ total: number } & ({ id: null } | TransactionRow)>(
      `SELECT counted.total, page.* FROM (SELECT count(*)::int AS total FROM transactions WHERE ${filter}) counted
       LEFT JOIN LATERAL (
         SELECT ${summary ? TRANSACTION_SUMMARY_COLUMNS : TRANSACTION_COLUMNS} FROM transactions WHERE ${filter}
         ORDER BY created_at DESC, id DESC LIMIT $${limit} OFFSET $${skip}::bigint
       ) page ON true
       ORDER BY page."createdAt" DESC, page.id DESC`,
      params,
    );
    const fromRow = summary ? transactionSummaryFromRow : transactionFromRow;
    const items = rows.flatMap(({ total: _total, ...row }) => (row.id === null ? [] : [fromRow(row as TransactionRow)]));
    return [items, rows[0]!.total];
  }

  /** Records a provider's verdict on a collection; false when it was already settled. */
  async function settleCollection(transaction: Transaction, outcome: SettledCollectionOutcome, source: string, changes: TransitionChanges = {}): Promise<boolean> {
    const result =
      outcome.state === "completed"
        ? await transition({
            transactionId: transaction.id,
            to: "completed",
            changes: { ...changes, ...(outcome.providerReference ? { providerReference: outcome.providerReference } : {}) },
          })
        : await transition({
            transactionId: transaction.id,
            to: "failed",
            changes: { ...changes, failureCode: outcome.code, failureReason: outcome.message.slice(0, 500) || null },
          });
    if (result.applied) logger.info({ reference: transaction.reference, status: result.transaction.status, source }, "collection settled");
    return result.applied;
  }

  /** A callback is applied only when it matches what was asked for: same request, amount and phone. */
  async function applyCollectionCallback(channel: PaymentChannel, callback: CollectionCallback): Promise<boolean> {
    const transaction = await findTransaction(deps.sql, "channel_id = $1 AND checkout_request_id = $2", [channel.id, callback.providerRequestId]);
    if (!transaction) {
      logger.warn({ channelId: channel.id, providerRequestId: callback.providerRequestId }, "collection callback for an unknown request; not applied");
      return false;
    }
    if (callback.outcome.state === "completed") {
      const amountOk = callback.amount === null || callback.amount === transaction.amount;
      const phoneOk = callback.phoneNumber === null || !/^\d+$/.test(callback.phoneNumber) || callback.phoneNumber === toMsisdn(transaction.phoneNumber);
      if (!amountOk || !phoneOk) {
        logger.warn(
          { reference: transaction.reference, expectedAmount: String(transaction.amount), callbackAmount: String(callback.amount), phoneMatches: phoneOk },
          "collection callback does not match the transaction (amount or phone); not applied",
        );
        return true;
      }
    }
    try {
      await settleCollection(transaction, callback.outcome, "callback");
    } catch (error) {
      // A receipt is the provider's unique id for one payment: seen on another transaction, this callback is a replay or a provider fault.
      if (!isUniqueViolation(error)) throw error;
      logger.error(
        { reference: transaction.reference, providerReference: callback.outcome.state === "completed" ? callback.outcome.providerReference : undefined },
        "collection callback carries a provider reference already recorded for another transaction; not applied",
      );
    }
    return true;
  }

  /**
   * Applies what a hosted-checkout provider answered when asked: a payment completes only when the
   * provider's amount and currency are the stored ones. True when the answer settled it (now or before).
   */
  async function applyHostedStatus(transaction: Transaction, status: HostedPaymentStatus, source: string): Promise<boolean> {
    if (status.outcome.state === "pending") return false;
    if (status.outcome.state === "completed" && (status.amount !== transaction.amount || status.currency !== transaction.currency)) {
      logger.error(
        { reference: transaction.reference, expected: `${transaction.amount} ${transaction.currency}`, reported: `${status.amount} ${status.currency}`, source },
        "provider reports a payment of another amount or currency; not applied",
      );
      return false;
    }
    await settleCollection(transaction, status.outcome, source, { paymentMethod: status.paymentMethod ?? "card" });
    return true;
  }

  /** Asks the provider about a pending hosted payment and records a settled answer. Throws when the provider cannot be asked. */
  async function verifyHostedPayment(transaction: Transaction & { channel: PaymentChannel | null }, source: string): Promise<Transaction> {
    const hosted = transaction.channel ? connectorOf(connectors, transaction.channel)?.hosted : undefined;
    if (!hosted || transaction.status !== "pending") return transaction;
    const status = await hosted.verify({ config: channels.readChannelConfig(transaction.channel!), reference: transaction.reference });
    await applyHostedStatus(transaction, status, source);
    return prisma.transaction.findUniqueOrThrow({ where: { id: transaction.id } });
  }

  /**
   * Starts the payment at the provider and stores where its page is. A refusal fails the transaction:
   * the payer was never sent anywhere, so nothing can be paid on it.
   */
  async function openHostedPayment(transaction: Transaction, channel: PaymentChannel, hosted: HostedCheckoutConnector, failOnRefusal = true): Promise<Transaction> {
    let started;
    try {
      started = await hosted.start({
        config: channels.readChannelConfig(channel),
        reference: transaction.reference,
        amount: transaction.amount,
        currency: transaction.currency,
        email: transaction.email ?? "",
        callbackUrl: returnUrl(transaction.reference),
        metadata: { transaction_id: transaction.id, reference: transaction.reference, merchant_id: transaction.merchantId },
      });
    } catch (error) {
      const refusal = error instanceof GatewayError ? error : new GatewayError("provider_unavailable", undefined, { cause: error });
      logger.warn({ reference: transaction.reference, code: refusal.code, err: refusal.message }, "hosted payment not started at the provider");
      // A late start (after a crash) may race another page load's: that one's refusal must not fail the payment.
      if (failOnRefusal) await transition({ transactionId: transaction.id, to: "failed", changes: { failureCode: refusal.code, failureReason: refusal.message.slice(0, 500) } });
      throw refusal;
    }
    return prisma.transaction.update({ where: { id: transaction.id }, data: { providerAccessCode: started.accessCode, providerCheckoutUrl: started.checkoutUrl } });
  }

  /** A pending hosted payment with no webhook: verify with backoff, and give up as abandoned after the provider's window. */
  async function reconcileHosted(transaction: Transaction & { channel: PaymentChannel }, hosted: HostedCheckoutConnector, attempt: number) {
    try {
      const status = await hosted.verify({ config: channels.readChannelConfig(transaction.channel), reference: transaction.reference });
      if (status.outcome.state !== "pending") {
        await applyHostedStatus(transaction, status, "reconciliation");
        return; // settled, or reported with another amount (logged for a person to look at; asking again will not change it)
      }
    } catch (error) {
      logger.warn({ reference: transaction.reference, err: (error as Error).message }, "hosted payment verification failed; will retry");
    }
    const abandonAt = transaction.createdAt.getTime() + deps.hosted.abandonAfterMs;
    if (Date.now() >= abandonAt) {
      await settleCollection(transaction, { state: "failed", code: "abandoned", message: "The payer did not complete the payment" }, "expiry");
      return;
    }
    const backoff = Math.min(deps.hosted.verifyAfterMs * 2 ** attempt, MAX_VERIFY_BACKOFF_MS);
    return { retryInMs: Math.max(0, Math.min(backoff, abandonAt - Date.now())) };
  }

  /**
   * Asks the provider about a collection whose callback is overdue: settles what it answers, expires
   * what outlived the push, and otherwise asks again later with exponential backoff.
   */
  const reconcileJob: JobDefinition<{ transactionId: number }> = {
    kind: RECONCILE_JOB,
    concurrency: 5,
    async run({ transactionId }, job) {
      const transaction = await prisma.transaction.findUnique({ where: { id: transactionId }, include: { channel: true } });
      if (!transaction || transaction.status !== "pending" || !transaction.channel) return;
      const hosted = connectorOf(connectors, transaction.channel)?.hosted;
      if (hosted) return reconcileHosted({ ...transaction, channel: transaction.channel }, hosted, job.attempt);
      let outcome: CollectionOutcome = { state: "pending" };
      if (transaction.checkoutRequestId) {
        try {
          const momo = momoConnectorOf(connectors, transaction.channel);
          outcome = await momo.stkQuery({ config: channels.readChannelConfig(transaction.channel), checkoutRequestId: transaction.checkoutRequestId });
        } catch (error) {
          logger.warn({ reference: transaction.reference, err: (error as Error).message }, "collection status query failed; will retry");
        }
      }
      if (outcome.state !== "pending") {
        await settleCollection(transaction, outcome, "reconciliation");
        return;
      }
      if (Date.now() - transaction.createdAt.getTime() >= deps.collection.lifetimeMs) {
        await settleCollection(transaction, { state: "failed", code: "1019", message: "The STK push expired with no answer from the customer" }, "expiry");
        return;
      }
      return { retryInMs: Math.min(deps.collection.queryBackoffMs * 2 ** (job.attempt - 1), MAX_QUERY_BACKOFF_MS) };
    },
  };
  deps.jobs.register(reconcileJob);

  return {
    checkoutUrl,

    /**
     * A card/checkout payment: validate -> resolve channel and currency -> customer -> row. The row is one
     * INSERT (no interactive transaction holding a pooled connection), except for a request with an
     * Idempotency-Key, whose recovery point is written in the same database transaction. The payer's
     * customer record is found or created first: it stands on its own if the insert then fails.
     */
    async initialize(principal: Principal, input: InitializeInput) {
      const recovered = await recoveredTransaction(principal);
      if (recovered) return recovered;
      const amount = parseAmount(input.amount);
      if (!input.email) throw new ValidationError("email", "is required");
      const email = normalizeEmail(input.email);
      const phone = input.phone ? normalizePhone(input.phone) : null;
      const firstName = optionalText(input.firstName, "first_name", 100);
      const lastName = optionalText(input.lastName, "last_name", 100);
      const description = optionalText(input.description, "description", 500);
      const callbackUrl = parseCallbackUrl(input.callbackUrl);
      // Kept as STK push keeps its reference: the merchant's own, not unique; the gateway's reference stays the key.
      const clientReference = optionalText(input.reference, "reference", 100);
      const metadata = parseMetadata(input.metadata);
      const { channel, defaultCurrency } = await channels.resolvePaymentChannelAndCurrency(principal, input.paymentChannelId);
      const connector = connectorOf(connectors, channel);
      if (!connector) throw new GatewayError("forbidden", `Payment channel ${channel.id} (${channel.provider}) cannot take payments`);
      const currency = parseCurrency(input.currency || defaultCurrency!, connector.currencies, channel.provider);
      const hosted = connector.hosted;
      hosted?.checkPayment({ amount, currency });

      const fields = { reference: newReference(), accessCode: newAccessCode(), amount, currency, description, email, phone, firstName, lastName, channelId: channel.id, callbackUrl, clientReference, metadata };
      if (!hosted && !inIdempotencyScope()) {
        // The common case, in one statement: the payer's customer (found or created) and the row.
        const transaction = await insertCheckoutTransaction(principal, fields);
        afterCreate(stateMachine, { transaction, event: null, jobsQueued: 0 });
        return transaction;
      }
      const customer = await customers.findOrCreateCustomer(principal, { email, firstName, lastName, phone });
      const row: Prisma.TransactionUncheckedCreateInput = {
        merchantId: principal.merchantId,
        mode: principal.mode,
        reference: fields.reference,
        accessCode: fields.accessCode,
        amount,
        currency,
        description,
        email,
        phoneNumber: phone,
        channelId: channel.id,
        customerId: customer.id,
        callbackUrl,
        clientReference,
        ...(metadata === null ? {} : { metadata: metadata as Prisma.InputJsonObject }),
      };
      if (hosted) {
        // Row and its verification job first, then the provider: whatever happens at Paystack is found again.
        const verifyAt = new Date(Date.now() + deps.hosted.verifyAfterMs);
        const created = await prisma.$transaction((tx) =>
          insertPendingTransaction(tx, row, { announce: false, jobs: (t) => [{ kind: RECONCILE_JOB, payload: { transactionId: t.id }, runAt: verifyAt }] }),
        );
        afterCreate(stateMachine, created);
        return openHostedPayment(created.transaction, channel, hosted);
      }
      // Under an Idempotency-Key the row and its recovery point commit together (src/idempotency).
      const created = await prisma.$transaction((tx) => insertPendingTransaction(tx, row, { announce: false }));
      afterCreate(stateMachine, created);
      return created.transaction;
    },

    /**
     * An STK push: the row (with its transaction.pending event and its reconciliation job) commits
     * first, then the provider is asked. A refused push fails the row, so nothing is ever in flight
     * at a provider without a record here, and a crash in between is settled by reconciliation.
     */
    async startStkCollection(principal: Principal, input: StkCollectionInput) {
      const recovered = await recoveredTransaction(principal);
      if (recovered) return { transaction: recovered, customerMessage: RECOVERED_PUSH_MESSAGE };
      const amount = parseAmount(input.amount);
      const phoneNumber = normalizeMsisdn(input.phoneNumber);
      const clientReference = optionalText(input.reference, "reference", 100);
      const description = optionalText(input.description, "description", 500);
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const momo = momoConnectorOf(connectors, channel);
      if (!connectorOf(connectors, channel)!.currencies.includes(MOMO_CURRENCY)) {
        throw new ValidationError("payment_channel_id", `payment channel ${channel.id} cannot collect ${MOMO_CURRENCY}`);
      }
      const callbackUrl = deps.stkCallbackUrl(channel, momo);
      const config = channels.readChannelConfig(channel);
      const reference = newReference();
      // The provider's own bounds are checked before anything is recorded: a 400 leaves no row behind.
      momo.checkAmount(amount, MOMO_CURRENCY);

      const created = await prisma.$transaction((tx) =>
        insertPendingTransaction(
          tx,
          {
            merchantId: principal.merchantId,
            mode: principal.mode,
            reference,
            accessCode: newAccessCode(),
            amount,
            currency: MOMO_CURRENCY,
            description,
            phoneNumber,
            paymentMethod: "momo_stk",
            clientReference,
            channelId: channel.id,
          },
          {
            announce: true,
            jobs: (t) => [{ kind: RECONCILE_JOB, payload: { transactionId: t.id }, runAt: new Date(Date.now() + deps.collection.reconcileAfterMs) }],
          },
        ),
      );
      const transactionId = created.transaction.id;
      afterCreate(stateMachine, created);

      let accepted;
      try {
        accepted = await momo.stkPush({
          config,
          amount,
          currency: MOMO_CURRENCY,
          phoneNumber: toMsisdn(phoneNumber),
          accountReference: clientReference ?? reference,
          description: description ?? "Payment",
          callbackUrl,
          deliverCallback: async (body) => applyCollectionCallback(channel, momo.parseStkCallback(body)),
        });
      } catch (error) {
        const refusal = error instanceof GatewayError ? error : new GatewayError("provider_unavailable", undefined, { cause: error });
        await transition({ transactionId, to: "failed", changes: { failureCode: refusal.code, failureReason: refusal.message.slice(0, 500) } });
        throw refusal;
      }
      const transaction = await prisma.transaction.update({ where: { id: transactionId }, data: { checkoutRequestId: accepted.checkoutRequestId } });
      return { transaction, customerMessage: accepted.customerMessage };
    },

    applyCollectionCallback,

    /**
     * Where the payer of a hosted-checkout payment goes to pay: the provider's page while it is pending
     * (started now if an interrupted initialize never got that far), null otherwise.
     */
    async hostedCheckoutUrl(reference: string): Promise<string | null> {
      const transaction = await prisma.transaction.findUnique({ where: { reference }, include: { channel: true } });
      const hosted = transaction?.channel ? connectorOf(connectors, transaction.channel)?.hosted : undefined;
      if (!transaction || !hosted || transaction.status !== "pending") return null;
      if (transaction.providerCheckoutUrl) return transaction.providerCheckoutUrl;
      return (await openHostedPayment(transaction, transaction.channel!, hosted, false)).providerCheckoutUrl;
    },

    /** The payer is back from the provider's page (or the provider notified us): ask the provider, then record it. */
    async verifyHostedPaymentByReference(reference: string, source: string, channelId?: number): Promise<Transaction | null> {
      const transaction = await prisma.transaction.findFirst({ where: { reference, ...(channelId === undefined ? {} : { channelId }) }, include: { channel: true } });
      if (!transaction) {
        logger.warn({ channelId, source }, "hosted payment notice for an unknown reference; not applied");
        return null;
      }
      return verifyHostedPayment(transaction, source);
    },

    /**
     * A payment the provider announces itself (M-Pesa C2B), recorded once per receipt (the unique
     * channel + provider reference) and completed; `jobs` follow only the first recording.
     */
    async recordProviderPayment(channel: PaymentChannel, payment: ProviderPayment, jobs: JobRequest[] = []) {
      const where = { channelId: channel.id, providerReference: payment.providerReference };
      let transaction = await prisma.transaction.findFirst({ where });
      if (!transaction) {
        try {
          const created = await prisma.$transaction((tx) =>
            insertPendingTransaction(
              tx,
              {
                merchantId: channel.merchantId,
                mode: channel.mode,
                reference: newReference(),
                accessCode: newAccessCode(),
                amount: payment.amount,
                currency: payment.currency,
                paymentMethod: payment.paymentMethod,
                phoneNumber: payment.phoneNumber && /^\d{8,15}$/.test(payment.phoneNumber) ? `+${payment.phoneNumber}` : payment.phoneNumber,
                clientReference: payment.clientReference?.slice(0, 100) || null,
                providerReference: payment.providerReference,
                channelId: channel.id,
              },
              { announce: false },
            ),
          );
          transaction = created.transaction;
        } catch (error) {
          // A concurrent delivery of the same confirmation inserted it first.
          if ((error as { code?: string }).code !== "P2002") throw error;
          transaction = await prisma.transaction.findFirstOrThrow({ where });
        }
      }
      // A row left pending by an interrupted earlier delivery is completed now.
      const result = await transition({ transactionId: transaction.id, to: "completed", jobs });
      return { transaction: result.transaction, applied: result.applied };
    },

    /** `query` carries the relations a GraphQL selection needs, so one read serves it. */
    async getByReference(
      principal: Principal,
      reference: string,
      query: { include?: Prisma.TransactionInclude; select?: Prisma.TransactionSelect } = {},
    ): Promise<Transaction> {
      const transaction = selectsColumnsOnly(query)
        ? await transactionByReference(principal, reference)
        : ((await prisma.transaction.findFirst({
            ...query,
            where: { reference, merchantId: principal.merchantId, mode: principal.mode },
          })) as Transaction | null);
      if (!transaction) throw new NotFoundError("Transaction");
      return transaction;
    },

    /**
     * One page with totals; `query` carries the relations a GraphQL selection needs (no N+1). With `summary`
     * the items carry only the summary fields (rows.ts), for a selection that reads no others.
     */
    async listPage(
      principal: Principal,
      input: TransactionFilters & { page?: number | null; limit?: number | null },
      query: { include?: Prisma.TransactionInclude; select?: Prisma.TransactionSelect } = {},
      options: { summary?: boolean } = {},
    ): Promise<Page<Transaction>> {
      const where = transactionWhere(principal, input);
      const paging = resolvePaging(input);
      if (selectsColumnsOnly(query)) {
        const [items, total] = await transactionPage(statusDateWhere(principal, input), parseTransactionSearch(input.search), paging, options.summary ?? false);
        return toPage(items, total, paging);
      }
      const [items, total] = await Promise.all([
        prisma.transaction.findMany({ ...query, where, orderBy: newestFirst, ...pageWindow(paging) }),
        prisma.transaction.count({ where }),
      ]);
      return toPage(items as Transaction[], total, paging);
    },

    /**
     * A payer's card payment from the hosted checkout: validate -> claim the transaction -> charge ->
     * record. The claim (one conditional UPDATE of `charge_started_at`) admits one charge call per
     * transaction at a time, across instances; a concurrent submission is a 409, never a second charge.
     * Each caller gets its own outcome: a declined card fails the transaction (as Paystack does) and
     * is reported as declined, whatever another attempt did. A charge that throws without an outcome
     * (provider unavailable) releases the claim so the payer can retry; a claim older than the lease
     * (its instance crashed mid-charge) may be taken over.
     */
    async payWithCard(reference: string, cardInput: CardDetails): Promise<{ transaction: Transaction; outcome: CardOutcome }> {
      // The payer's path: plain SQL throughout (src/db/sql.ts), four statements with the status change.
      const transaction = await findTransaction(deps.sql, "reference = $1", [reference]);
      if (!transaction) throw new NotFoundError("Transaction");
      if (transaction.status !== "pending") throw alreadySettled(transaction.status);
      const card = validateCard(cardInput);
      const channel = transaction.channelId === null ? null : await channels.findById(transaction.channelId);
      const connector = channel ? connectorOf(connectors, channel) : undefined;
      if (!channel || !connector?.chargeCard) {
        throw new GatewayError("forbidden", "This transaction's payment channel does not take card payments here");
      }
      if (!channel.isActive) throw new GatewayError("channel_inactive", `Payment channel ${channel.id} is inactive`);
      // A live sandbox channel (made before sandbox became test-only) would pass public test cards as live payments.
      if (!channels.isUsableChannel(channel)) throw new GatewayError("forbidden", "This transaction's payment channel is a sandbox channel, which takes test payments only");
      const config = channels.readChannelConfig(channel);

      // The claim's timestamp is its token: only the attempt that wrote it releases it.
      const claimedAt = new Date();
      const lapsedBefore = new Date(claimedAt.getTime() - (deps.cardChargeLeaseMs ?? CARD_CHARGE_LEASE_MS));
      // Answers the row's status either way: the claim's outcome and, when refused, why, in one round trip.
      const [claim] = await deps.sql.query<{ claimed: boolean; status: string }>(
        `WITH claimed AS (
           UPDATE transactions SET charge_started_at = $2, updated_at = $2
           WHERE id = $1 AND status = 'pending' AND (charge_started_at IS NULL OR charge_started_at < $3)
           RETURNING status
         )
         SELECT true AS claimed, status::text FROM claimed
         UNION ALL SELECT false, status::text FROM transactions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM claimed)`,
        [transaction.id, claimedAt, lapsedBefore],
      );
      if (!claim?.claimed) {
        if (claim && claim.status !== "pending") throw alreadySettled(claim.status as Transaction["status"]);
        throw new GatewayError("conflict", PAYMENT_IN_PROGRESS);
      }

      let outcome: CardOutcome;
      try {
        logger.info({ reference }, "card charge sent");
        outcome = await connector.chargeCard({ reference, amount: transaction.amount, currency: transaction.currency, card, config });
      } catch (error) {
        await prisma.transaction
          .updateMany({ where: { id: transaction.id, chargeStartedAt: claimedAt }, data: { chargeStartedAt: null } })
          .catch((releaseError: unknown) => logger.warn({ reference, err: (releaseError as Error).message }, "card charge claim not released; it lapses with its lease"));
        logger.warn({ reference, err: (error as Error).message }, "card charge failed without an outcome; claim released");
        throw error instanceof GatewayError ? error : new GatewayError("provider_unavailable", undefined, { cause: error });
      }
      const result = await transition(
        outcome.outcome === "succeeded"
          ? { transactionId: transaction.id, to: "completed", changes: { paymentMethod: "card", providerReference: outcome.providerReference } }
          : { transactionId: transaction.id, to: "failed", changes: { paymentMethod: "card", failureCode: outcome.code, failureReason: outcome.reason } },
      );
      if (!result.applied) {
        // Only possible when this charge outlived its lease and another attempt took over and settled:
        // this attempt's outcome is not the recorded one, so it is not reported as if it were.
        logger.error(
          { reference, outcome: outcome.outcome, providerReference: outcome.outcome === "succeeded" ? outcome.providerReference : undefined },
          "card charge finished after the transaction was settled by another attempt; not recorded",
        );
        throw alreadySettled(result.transaction.status);
      }
      return { transaction: result.transaction, outcome };
    },

    /** What the payer's checkout page shows; null when the reference is unknown. */
    async checkoutView(reference: string) {
      const t = await prisma.transaction.findUnique({
        where: { reference },
        select: {
          reference: true, amount: true, currency: true, status: true, description: true, mode: true,
          failureReason: true, callbackUrl: true,
          merchant: { select: { name: true } }, channel: { select: { provider: true } },
        },
      });
      if (!t) return null;
      return {
        reference: t.reference,
        amount: t.amount,
        currency: t.currency,
        status: t.status,
        description: t.description,
        mode: t.mode,
        failureReason: t.failureReason,
        returnUrl: t.callbackUrl ? payerReturnUrl(t.callbackUrl, t.reference) : null,
        sandbox: t.channel?.provider === "sandbox",
        merchantName: t.merchant.name,
        acceptsCards: t.channel !== null && connectors.for(t.channel)?.chargeCard !== undefined,
        hosted: t.channel !== null && connectors.for(t.channel)?.hosted !== undefined,
      };
    },

    /** The latest settling event of a transaction (completed or failed), as subscribers receive it. */
    async lastSettlingEvent(transactionId: number) {
      const event = await prisma.event.findFirst({
        where: { transactionId, type: { in: ["transaction.completed", "transaction.failed"] } },
        orderBy: { id: "desc" },
      });
      return event ? toPublishedEvent(event) : null;
    },

    transition,
  };
}

export type TransactionService = ReturnType<typeof createTransactionService>;
