import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Principal } from "../../auth.ts";
import { randomReference } from "../../references.ts";
import type { Reader } from "../../db/database.ts";
import type { PaymentChannel, Refund, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, isUniqueViolation, NotFoundError, ValidationError } from "../../errors.ts";
import type { Logger } from "../../logger.ts";
import { amountSchema, formatMoney } from "../../money.ts";
import { filteredList } from "../../paging.ts";
import type { Connectors } from "../../providers/index.ts";
import type { RefundCallbackUrls, RefundConnector, RefundOutcome, RefundRequest, RefundResult } from "../../providers/types.ts";
import { optionalTextSchema, parseInput, refuse } from "../../validation.ts";
import type { ChannelService } from "../channels/service.ts";
import type { TransactionService } from "../transactions/service.ts";
import type { StatusMachineDeps } from "../events/status-machine.ts";
import { createMoneyOut, idOrReference } from "../money-out/lifecycle.ts";
import * as store from "./store.ts";
import { REFUND_STATUS, type RefundFilters, type RefundQuery } from "./store.ts";

export const REFUND_CHECK_JOB = "refund.check";
export const refundReasons = ["requested_by_customer", "duplicate", "fraudulent", "other"] as const;

/** The list filters as callers give them: status, dates, and the refunded transaction's reference or id. */
export type RefundListFilters = Omit<RefundFilters, "transactionId"> & { transaction?: string | null };

export interface RefundInput {
  /** The transaction's reference, or its numeric id. */
  transaction: unknown;
  amount?: unknown;
  reason?: string | null;
  merchantNote?: string | null;
  customerNote?: string | null;
}

export interface RefundServiceDeps extends StatusMachineDeps {
  /** The reader for the lists (a replica when there is one); the primary when unset. */
  read?: Reader;
  channels: ChannelService;
  transactions: Pick<TransactionService, "getWithChannel">;
  connectors: Connectors;
  logger: Logger;
  /** Where a provider that answers later (Daraja) posts one refund's result; undefined for providers that post none. */
  refundCallbackUrls?(channel: PaymentChannel, reference: string): RefundCallbackUrls | undefined;
}

/**
 * The fields of a provider's result that do not match the refund; empty when it may be applied. It must name the
 * refund's request: our id (Daraja's OriginatorConversationID, which Daraja may replace by its own) or the
 * provider's conversation id we keep while pending; one present that contradicts the one we keep does not match,
 * and naming neither never does (a status answer on the refund's own path included). A success must also carry
 * the refund's exact amount: missing or unreadable does not match.
 */
export function resultMismatch(refund: Pick<Refund, "providerRequestId" | "providerReference" | "amount">, result: RefundResult): string[] {
  const mismatched: string[] = [];
  const ours = result.providerRequestId !== null && result.providerRequestId === refund.providerRequestId;
  const theirs = result.conversationId !== null && refund.providerReference !== null && result.conversationId === refund.providerReference;
  const contradicts = result.conversationId !== null && refund.providerReference !== null && result.conversationId !== refund.providerReference;
  if (!(ours || theirs) || contradicts) mismatched.push("request_id");
  if (result.outcome.state === "completed" && (result.amount === null || result.amount !== refund.amount)) mismatched.push("amount");
  return mismatched;
}

/**
 * Why a payment whose receipt was sent for reversal takes no other refund. A reversal is asked for once: a later
 * "Failed" may be forged or wrong while the money went back, so sending it again could pay the payer twice. The
 * decision is left to a person who can see the provider's own record.
 */
function reversedOnce(
  rail: RefundConnector,
  payment: string,
  receipt: string,
  failed: { reference: string; failureCode: string | null; failureReason: string | null } | null,
): GatewayError {
  const outcome = failed ? `refund ${failed.reference} asked for it and was reported failed (${[failed.failureCode, failed.failureReason].filter(Boolean).join(": ")})` : "another refund asked for it";
  return new GatewayError(
    "transaction_not_refundable",
    `Transaction ${payment}: its receipt ${receipt} was already sent for reversal (${outcome}); a receipt is sent for reversal only once, so ${rail.reversedOnceAdvice ?? "check what became of it with the provider"}`,
  );
}

const disputedError = (reference: string) =>
  new GatewayError("transaction_disputed", `Transaction ${reference} has an open dispute: it cannot be refunded until the dispute is closed (answer or accept it)`);

/** Said wherever a refund's amount is null (REST and GraphQL alike). */
/** Nothing remains to refund: said as such, not as "at most KES 0.00" (charged back counts as given back too). */
function nothingLeftToRefund(transaction: { reference: string; amountChargedBack: bigint }): GatewayError {
  const why = transaction.amountChargedBack > 0n ? "has nothing left to refund (refunded and charged back in full)" : "has been fully refunded";
  return new GatewayError("amount_exceeds_refundable", `amount: this payment (${transaction.reference}) ${why}`);
}

export const NULL_REFUND_AMOUNT = "must be a positive integer in minor units, not null; leave it out to refund all that is still refundable";

/** A transaction named by its reference or its numeric id. */
const isTransactionKey = (key: unknown): key is string | number =>
  typeof key === "number" ? Number.isSafeInteger(key) && key >= 1 : typeof key === "string" && key.trim() !== "";
const TRANSACTION_KEY_REQUIRED = "is required: the transaction's reference or id";

/** A refund's input, in the order its fields are reported when several are wrong. */
const refundInput = z.object({
  /**
   * Absent means all that remains (null); otherwise a positive whole number of minor units. An explicit null is
   * refused: money leaves on the caller's word, and null is too easily an unset variable.
   */
  amount: z
    .unknown()
    .optional()
    .transform((amount, ctx) => (amount === undefined ? null : amount === null ? refuse(ctx, NULL_REFUND_AMOUNT) : amount))
    .pipe(amountSchema.nullable()),
  reason: z.enum(refundReasons, `must be one of ${refundReasons.join(", ")}`).nullish().transform((reason) => reason ?? null),
  merchantNote: optionalTextSchema(255),
  customerNote: optionalTextSchema(255),
  transaction: z.custom<string | number>(isTransactionKey, TRANSACTION_KEY_REQUIRED),
});

/**
 * Refunds over their own table, in the payments core's shape: validate -> the payment and its rail ->
 * reserve (never more than was paid, decided in the database) -> provider -> the one status machine.
 * The row is committed before the provider hears of it, with the job that will ask what became of it:
 * a refund whose outcome is unknown is asked about, never sent again.
 */
export function createRefundService(deps: RefundServiceDeps) {
  const { prisma, channels, connectors, transactions, logger } = deps;
  const reader = deps.read?.prisma ?? prisma;

  const railOf = (channel: PaymentChannel): RefundConnector | undefined => connectors.for(channel)?.refunds;

  const moneyOut = createMoneyOut(deps, {
    table: REFUND_STATUS,
    queryJob: REFUND_CHECK_JOB,
    callScope: (refund) => ({ merchantId: refund.merchantId, refundId: refund.id, transactionId: refund.transactionId }),
    findScoped: store.findScoped,
  });

  /** The one place a rail's answer lands: a settled outcome through the status machine; a pending one records the provider's id and note. */
  async function settle(refund: Refund, outcome: RefundOutcome, failure: { refusedAtOnce?: boolean } = {}): Promise<void> {
    if (outcome.state === "pending") {
      const providerReference = outcome.providerReference ?? refund.providerReference;
      const failureReason = outcome.note === undefined ? refund.failureReason : (outcome.note?.slice(0, 500) ?? null);
      if (providerReference !== refund.providerReference || failureReason !== refund.failureReason) {
        await store.recordPending(prisma, refund.id, { providerReference, failureReason });
      }
      return;
    }
    // A request the provider refused at once reversed nothing: its receipt may be sent again (cleared in the same statement).
    const released = outcome.state === "failed" && failure.refusedAtOnce && refund.reversedReceipt !== null ? { reversedReceipt: null } : {};
    await moneyOut.applyOutcome(refund, outcome, released);
  }

  /** Asks the rail what became of a pending refund and applies the answer: the job and providers' notices share it. */
  async function askRail(refund: NonNullable<Awaited<ReturnType<typeof store.findWithPayment>>>, rail: RefundConnector): Promise<RefundOutcome> {
    const outcome = await moneyOut.callFor(refund, () => rail.queryStatus(requestOf(refund, refund.transaction, refund.channel)));
    await settle(refund, outcome);
    return outcome;
  }

  function requestOf(refund: Refund, transaction: Transaction, channel: PaymentChannel): RefundRequest {
    return {
      config: channels.readChannelConfig(channel),
      reference: refund.reference,
      providerRequestId: refund.providerRequestId,
      amount: refund.amount,
      currency: refund.currency,
      payment: {
        reference: transaction.reference,
        amount: transaction.amount,
        currency: transaction.currency,
        paymentMethod: transaction.paymentMethod,
        providerReference: transaction.providerReference,
        phoneNumber: transaction.phoneNumber,
      },
      merchantNote: refund.merchantNote,
      customerNote: refund.customerNote,
      createdAt: refund.createdAt,
      providerReference: refund.providerReference,
      callbacks: deps.refundCallbackUrls?.(channel, refund.reference),
    };
  }

  /**
   * A provider's result for a refund (Daraja's Reversal or B2C Result, or a status query's answer on the
   * refund's own path), settled through `settle` like every other answer: the status machine's guard makes
   * a duplicate, however many arrive at once, change nothing. Applied only when it matches the refund field by
   * field (resultMismatch); anything else is logged for support and left to the refund.check job's status query.
   */
  async function applyResult(channel: PaymentChannel, result: RefundResult, reference?: string): Promise<boolean> {
    const refund = reference
      ? await store.findByChannelReference(prisma, channel.id, reference)
      : await store.findForResult(prisma, channel.id, { providerRequestId: result.providerRequestId, conversationId: result.conversationId });
    // Settled already: a duplicate or late answer changes nothing (its conversation id now reads as the reversal's receipt).
    if (refund && refund.status !== "pending") return true;
    const mismatched = refund ? resultMismatch(refund, result) : ["refund"];
    if (mismatched.length) {
      logger.warn(
        { channelId: channel.id, reference: refund?.reference ?? reference, providerRequestId: result.providerRequestId, conversationId: result.conversationId, mismatched, resultAmount: String(result.amount) },
        "refund result does not match the refund field by field; not applied, left for the status query",
      );
      return false;
    }
    const { outcome } = result;
    await settle(refund!, outcome.state === "completed" ? { state: "completed", providerReference: outcome.providerReference } : outcome);
    return true;
  }

  /** Asks the rail what became of a pending refund, until it says. */
  moneyOut.askUntilSettled({
    find: (refundId) => store.findWithPayment(prisma, refundId),
    via: (refund) => railOf(refund.channel),
    ask: async (refund, rail) => (await askRail(refund, rail)).state !== "pending",
    // The first question was asked checkAfterMs after sending: the next ones wait twice as long, then twice again.
    firstWaitMs: (rail) => rail.checkAfterMs * 2,
  });

  /** The filters with `transaction` (a reference or id) resolved to its id; null when it names none of the caller's. */
  async function filtersOf(principal: Principal, input: RefundListFilters): Promise<RefundFilters | null> {
    if (!input.transaction) return { ...input, transactionId: null };
    const transaction = await paymentOf(principal, input.transaction).catch((error) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    });
    return transaction ? { ...input, transactionId: transaction.id } : null;
  }

  /** The caller's transaction named by `transaction` (its reference, or its numeric id). */
  function paymentOf(principal: Principal, key: unknown) {
    if (!isTransactionKey(key)) throw new ValidationError("transaction", TRANSACTION_KEY_REQUIRED);
    return transactions.getWithChannel(principal, String(key));
  }

  return {
    async createRefund(principal: Principal, input: RefundInput): Promise<Refund> {
      const recovered = await moneyOut.recovered(principal);
      if (recovered) return recovered;
      const { amount, reason, merchantNote, customerNote, transaction: key } = parseInput(refundInput, input);
      const transaction = await paymentOf(principal, key);
      if (transaction.status !== "completed" || !transaction.channel) {
        throw new GatewayError("transaction_not_refundable", `Transaction ${transaction.reference} is ${transaction.status}: only a completed payment can be refunded`);
      }
      const channel = transaction.channel;
      const rail = railOf(channel);
      if (!rail) throw new GatewayError("transaction_not_refundable", `Payments through ${channel.provider} channels cannot be refunded by the gateway`);
      const payment = { reference: transaction.reference, amount: transaction.amount, currency: transaction.currency, paymentMethod: transaction.paymentMethod, providerReference: transaction.providerReference, phoneNumber: transaction.phoneNumber };
      // "All that remains" is what the rail is chosen for: after a partial refund, the rest of an M-Pesa payment is no reversal.
      if (transaction.disputeStatus === "needs_response" || transaction.disputeStatus === "under_review") throw disputedError(transaction.reference);
      const wanted = amount ?? transaction.amount - transaction.amountChargedBack - (await store.unfailedAmount(prisma, transaction.id));
      if (wanted <= 0n) throw nothingLeftToRefund(transaction);
      const choice = rail.method(payment, wanted, channels.readChannelConfig(channel));
      if ("refused" in choice) throw new GatewayError("partial_refund_unsupported", choice.refused);

      return moneyOut.reserveAndSend(principal, {
        // Within what remains refundable: the amount the rail was chosen for. A refund committed meanwhile makes it
        // exceed what remains (refused), never changes it.
        async reserve(tx) {
          const reservation = await store
            .reserveRefund(tx, transaction, wanted, {
              reference: randomReference("re_"),
              providerRequestId: randomUUID(),
              method: choice.method,
              // Unique per channel: a second reversal of this receipt cannot even be recorded, let alone sent.
              reversedReceipt: choice.reverses ?? null,
              reason,
              merchantNote,
              customerNote,
            })
            .catch((error: unknown) => {
              // Only a receipt already sent for reversal (a refund of another payment holding the same receipt) gets here.
              if (isUniqueViolation(error) && choice.reverses) throw reversedOnce(rail, transaction.reference, choice.reverses, null);
              throw error;
            });
          if ("refund" in reservation) return reservation.refund;
          if (reservation.refused === "transaction_not_refundable") throw new GatewayError("transaction_not_refundable");
          if (reservation.refused === "transaction_disputed") throw disputedError(transaction.reference);
          if (reservation.refused === "reversal_failed") throw reversedOnce(rail, transaction.reference, reservation.failed.reversedReceipt!, reservation.failed);
          if (reservation.refundable <= 0n) throw nothingLeftToRefund(transaction);
          throw new GatewayError("amount_exceeds_refundable", `amount: at most ${formatMoney(reservation.refundable, transaction.currency)} can still be refunded on transaction ${transaction.reference}`);
        },
        // Refunds of one payment queue on its row lock, each holding a pooled connection meanwhile: under a burst
        // they wait longer than Prisma's defaults (2 s for a connection, 5 s in all) without anything being wrong.
        transactionOptions: { maxWait: 10_000, timeout: 15_000 },
        firstAskInMs: rail.checkAfterMs,
        send: async (refund) => settle(refund, await rail.send(requestOf(refund, transaction, channel))),
        refused: (refund, error) => settle(refund, { state: "failed", code: error.code, message: error.message }, { refusedAtOnce: true }),
      });
    },

    /** By id (digits) or reference, scoped to the caller's merchant and mode. */
    async getRefund(principal: Principal, key: string, query: RefundQuery = {}): Promise<Refund> {
      const refund = await store.findScoped(prisma, principal, idOrReference(key), query);
      if (!refund) throw new NotFoundError("Refund");
      return refund;
    },

    /** One page, newest first, with totals (GET /v1/refunds); `transaction` filters by the refunded transaction. GraphQL's connection: its slice and total. */
    ...filteredList<Refund, RefundListFilters, RefundFilters, RefundQuery>(filtersOf, {
      page: (principal, filters, paging, query) => store.listPage(reader, principal, filters, paging, query),
      slice: (principal, filters, query) => store.connectionSlice(reader, principal, filters, query),
      count: (principal, filters) => store.count(reader, principal, filters),
    }),

    refundedAmount: (transactionId: number) => store.refundedAmount(prisma, transactionId),
    /** A payment's completed refunds, oldest first (its receipt). */
    completedOf: (transactionId: number) => store.completedOf(prisma, transactionId),
    /** A refund with its payment and channel, by id (its receipt e-mail). */
    findWithPayment: (refundId: number) => store.findWithPayment(prisma, refundId),

    applyResult,

    /** The provider's queue gave up on a refund request (Daraja's QueueTimeOutURL): its fate is unknown, so ask now rather than wait. */
    async resultTimedOut(channel: PaymentChannel, providerRequestId: string | null): Promise<void> {
      await moneyOut.askNow(providerRequestId ? await store.findForResult(prisma, channel.id, { providerRequestId, conversationId: null }) : null);
    },

    /**
     * A provider's signed notice that a refund changed (Paystack's refund.* webhooks): only a reason to ask.
     * Each pending refund it can mean on this channel is asked about now and settled as the job would; a
     * provider that cannot be asked throws (the webhook is then answered with an error, so it comes again).
     */
    async verifyRefund(channel: PaymentChannel, notice: store.RefundNotice): Promise<void> {
      const rail = railOf(channel);
      const pending = rail ? await store.findPendingForNotice(prisma, channel.id, notice) : [];
      if (!rail || pending.length === 0) {
        logger.info({ channelId: channel.id, ...notice }, "refund notification for no pending refund; nothing to ask");
        return;
      }
      for (const refund of pending) await askRail(refund, rail);
    },
  };
}

export type RefundService = ReturnType<typeof createRefundService>;
