import type { Principal } from "../../auth.ts";
import type { PaymentChannel, Transaction } from "../../db/generated/prisma/client.ts";
import { isUniqueViolation, ValidationError } from "../../errors.ts";
import type { JobRequest } from "../../jobs/store.ts";
import { parseAmount } from "../../money.ts";
import { kenyanMobileOrNull, normalizeMsisdn, toMsisdn } from "../../phone.ts";
import type { CollectionCallback, CollectionOutcome, SettledCollectionOutcome } from "../../providers/types.ts";
import { optionalText } from "../../validation.ts";
import { asProviderError, connectorOf, momoConnectorOf, newAccessCode, newReference, RECONCILE_JOB, type FlowContext } from "./context.ts";
import { afterCreate, insertPendingTransaction, type TransitionChanges } from "./state-machine.ts";

/**
 * Mobile-money collections: an STK push and the provider's callback on it, a payment the provider
 * reports on its own (M-Pesa C2B), and the reconciliation of a push whose callback is overdue.
 */

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

const MOMO_CURRENCY = "KES";
const MAX_QUERY_BACKOFF_MS = 60_000;
/** What a retry of a push interrupted by a crash is told: the push is not sent again, it is reconciled. */
const RECOVERED_PUSH_MESSAGE = "Request already accepted for processing";

/** Records a provider's verdict on a collection (or a hosted payment); false when it was already settled. */
export async function settleCollection(
  ctx: FlowContext,
  transaction: Transaction,
  outcome: SettledCollectionOutcome,
  source: string,
  changes: TransitionChanges = {},
): Promise<boolean> {
  const result =
    outcome.state === "completed"
      ? await ctx.transition({
          transactionId: transaction.id,
          to: "completed",
          changes: { ...changes, ...(outcome.providerReference ? { providerReference: outcome.providerReference } : {}) },
        })
      : await ctx.transition({
          transactionId: transaction.id,
          to: "failed",
          changes: { ...changes, failureCode: outcome.code, failureReason: outcome.message.slice(0, 500) || null },
        });
  if (result.applied) ctx.deps.logger.info({ reference: transaction.reference, status: result.transaction.status, source }, "collection settled");
  return result.applied;
}

/**
 * The fields of a collection callback that do not match what was asked for; empty when it may be applied. A
 * success must carry the amount (exactly the row's, in minor units), the phone (the number pushed to, after
 * normalisation) and the provider's receipt: one missing or unreadable does not match. A failure carries none of
 * them; its request id (which found the row) is its match.
 */
export function collectionMismatch(callback: CollectionCallback, asked: { amount: bigint; phoneNumber: string | null }): string[] {
  if (callback.outcome.state !== "completed") return [];
  const mismatched: string[] = [];
  if (callback.amount === null || callback.amount !== asked.amount) mismatched.push("amount");
  const phone = kenyanMobileOrNull(callback.phoneNumber);
  if (phone === null || asked.phoneNumber === null || phone !== asked.phoneNumber) mismatched.push("phone");
  if (!callback.outcome.providerReference) mismatched.push("receipt");
  return mismatched;
}

export function createCollectionFlow(ctx: FlowContext) {
  const { deps, store, transition } = ctx;
  const { channels, connectors, logger } = deps;

  /**
   * A callback is applied only when it matches what was asked for: same request, amount and phone. `otherwise`
   * is asked when no transaction made the request (a push from the checkout page is matched on its attempt).
   */
  async function applyCollectionCallback(channel: PaymentChannel, callback: CollectionCallback, otherwise?: () => Promise<boolean>): Promise<boolean> {
    const transaction = await store.findByCollectionRequest(channel.id, callback.providerRequestId);
    if (!transaction && (await otherwise?.())) return true;
    if (!transaction) {
      logger.warn({ channelId: channel.id, providerRequestId: callback.providerRequestId }, "collection callback for an unknown request; not applied");
      return false;
    }
    const mismatched = collectionMismatch(callback, transaction);
    if (mismatched.length) {
      // Left for the reconciliation's status query, which asks the provider itself.
      logger.warn(
        { reference: transaction.reference, providerRequestId: callback.providerRequestId, mismatched, expectedAmount: String(transaction.amount), callbackAmount: String(callback.amount) },
        "collection callback does not match the transaction field by field; not applied, left for the status query",
      );
      return true;
    }
    try {
      await settleCollection(ctx, transaction, callback.outcome, "callback");
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

  return {
    /**
     * An STK push: the row (with its transaction.pending event and its reconciliation job) commits
     * first, then the provider is asked. A refused push fails the row, so nothing is ever in flight
     * at a provider without a record here, and a crash in between is settled by reconciliation.
     */
    async startStkCollection(principal: Principal, input: StkCollectionInput) {
      const recovered = await ctx.recoveredTransaction(principal);
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

      const created = await deps.prisma.$transaction((tx) =>
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
            keyedBy: principal,
            jobs: (t) => [{ kind: RECONCILE_JOB, payload: { transactionId: t.id }, runAt: new Date(Date.now() + deps.collection.reconcileAfterMs) }],
          },
        ),
      );
      const transactionId = created.transaction.id;
      afterCreate(ctx.stateMachine, created);

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
        const refusal = asProviderError(error);
        await transition({ transactionId, to: "failed", changes: { failureCode: refusal.code, failureReason: refusal.message.slice(0, 500) } });
        throw refusal;
      }
      const transaction = await store.setCollectionRequest(transactionId, accepted.checkoutRequestId);
      return { transaction, customerMessage: accepted.customerMessage };
    },

    applyCollectionCallback,

    /**
     * A payment the provider announces itself (M-Pesa C2B), recorded once per receipt (the unique
     * channel + provider reference) and completed; `jobs` follow only the first recording.
     */
    async recordProviderPayment(channel: PaymentChannel, payment: ProviderPayment, jobs: JobRequest[] = []) {
      const receipt = { channelId: channel.id, providerReference: payment.providerReference };
      let transaction = await store.findByProviderReceipt(receipt);
      if (!transaction) {
        try {
          const created = await deps.prisma.$transaction((tx) =>
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
          transaction = await store.findByProviderReceipt(receipt);
          if (!transaction) throw error;
        }
      }
      // A row left pending by an interrupted earlier delivery is completed now.
      const result = await transition({ transactionId: transaction.id, to: "completed", jobs });
      return { transaction: result.transaction, applied: result.applied };
    },

    /** The outcome of a simulated C2B payment once its confirmation is recorded: the newest matching one, or null. */
    findSimulatedC2b(channel: PaymentChannel, match: { clientReference: string; amount: bigint; since: Date }): Promise<Transaction | null> {
      return store.findLatestC2b(channel.id, match);
    },

    /**
     * Asks the provider about a push whose callback is overdue: settles what it answers, expires what
     * outlived the push, and otherwise asks again later with exponential backoff.
     */
    async reconcileCollection(transaction: Transaction & { channel: PaymentChannel }, attempt: number) {
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
        await settleCollection(ctx, transaction, outcome, "reconciliation");
        return;
      }
      if (Date.now() - transaction.createdAt.getTime() >= deps.collection.lifetimeMs) {
        await settleCollection(ctx, transaction, { state: "failed", code: "1019", message: "The STK push expired with no answer from the customer" }, "expiry");
        return;
      }
      return { retryInMs: Math.min(deps.collection.queryBackoffMs * 2 ** (attempt - 1), MAX_QUERY_BACKOFF_MS) };
    },
  };
}

export type CollectionFlow = ReturnType<typeof createCollectionFlow>;
