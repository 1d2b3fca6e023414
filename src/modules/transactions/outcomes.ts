import type { PaymentChannel, Transaction, TransactionAttempt } from "../../db/generated/prisma/client.ts";
import { isUniqueViolation } from "../../errors.ts";
import { kenyanMobileOrNull, toMsisdn } from "../../phone.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { CollectionCallback, MomoConnector, SettledCollectionOutcome } from "../../providers/types.ts";
import { paymentMethodOf, type AttemptMethod } from "./attempt-store.ts";
import { connectorOf, DEFAULT_CHECKOUT_SETTINGS, savePaymentMethodOf, type FlowContext } from "./context.ts";
import type { TransitionChanges } from "./status.ts";

/**
 * Where every provider verdict lands (a callback, a status query's answer, a webhook's verified answer, the
 * gateway's own expiry): it settles the attempt, then the payment, through the one status machine
 * (transactions/status.ts). A success settles both in one statement, so a receipt another payment holds leaves
 * both as they were; a failure fails the payment once its attempts are used up.
 */

const MAX_QUERY_BACKOFF_MS = 60_000;
/** The channel and connector a push went through. */
export interface PushTarget {
  channel: PaymentChannel;
  momo: MomoConnector;
}
/** What a verdict needs to know of its attempt. */
export type AttemptRef = Pick<TransactionAttempt, "id" | "transactionId" | "method" | "createdAt">;
const DEFAULT_FAILURE_REASON = "The M-Pesa payment did not go through";

/**
 * The fields of a collection callback that do not match what its attempt asked for; empty when it may be applied.
 * A success must carry the amount (exactly the attempt's, in minor units), the phone (the number pushed to, after
 * normalisation) and the provider's receipt: one missing or unreadable does not match. A failure carries none of
 * them; its request id (which found the attempt) is its match.
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

export function createOutcomes(ctx: FlowContext) {
  const { deps, store, attempts } = ctx;
  const { channels, connectors, logger } = deps;
  const settings = deps.checkout ?? DEFAULT_CHECKOUT_SETTINGS;

  /** Payments from initialize (no payment method until paid) take retries; any other payment is its one attempt. */
  const maxAttemptsOf = (t: Pick<Transaction, "paymentMethod">) => (t.paymentMethod === null ? settings.maxAttempts : 1);

  /**
   * A failed page attempt: its verdict, with the release of the claim it took while below the attempts limit (one
   * statement: the payer may try again as soon as the failure shows). At the limit the payment fails with this
   * attempt's code and reason (its event carries the attempt); `settled` is false when the attempt already was.
   */
  async function failAttempt(t: Transaction, attemptId: number, paymentMethod: string, code: string, reason: string) {
    const limit = maxAttemptsOf(t);
    const failed = await attempts.settleFailed({ attemptId, code, reason }, limit);
    if (failed === null || failed < limit) return { settled: failed !== null, transition: null };
    const transition = await ctx.transition({ transactionId: t.id, to: "failed", changes: { paymentMethod, failureCode: code, failureReason: reason.slice(0, 500) } });
    return { settled: true, transition };
  }

  /** A provider's verdict on one attempt, applied to it and then, through the status machine, to its payment. */
  async function applyAttemptOutcome(attempt: AttemptRef, outcome: SettledCollectionOutcome, source: string): Promise<void> {
    const paymentMethod = paymentMethodOf(attempt.method as AttemptMethod);
    if (outcome.state === "completed") {
      const receipt = outcome.providerReference;
      try {
        const result = await ctx.transition({
          transactionId: attempt.transactionId,
          to: "completed",
          changes: { paymentMethod, ...(receipt ? { providerReference: receipt } : {}) },
          settlesAttempt: { attemptId: attempt.id, status: "succeeded", providerReference: receipt },
        });
        const { reference, status } = result.transaction;
        if (result.applied) logger.info({ reference, attempt: attempt.id, source }, "collection settled");
        if (result.applied && result.transaction.savePaymentMethod) {
          // The payer consented to keep the phone the push went to (an M-Pesa method: later charges push to it).
          const pushed = await attempts.findById(attempt.id);
          await savePaymentMethodOf(deps, result.transaction, pushed?.channelId ?? null, pushed?.phoneNumber ? { msisdn: toMsisdn(pushed.phoneNumber) } : null);
        }
        else if (status !== "completed") logger.error({ reference, attempt: attempt.id, status, providerReference: receipt }, "payment succeeded after the transaction was settled; recorded on its attempt only");
      } catch (error) {
        // A receipt is the provider's unique id for one payment: seen on another transaction, this is a replay or a provider fault.
        if (!isUniqueViolation(error)) throw error;
        logger.error({ attempt: attempt.id, providerReference: receipt, source }, "collection carries a provider reference already recorded for another transaction; not applied");
      }
      return;
    }
    const t = await store.findById(attempt.transactionId);
    if (!t) return;
    if (maxAttemptsOf(t) <= 1) {
      const result = await ctx.transition({
        transactionId: t.id,
        to: "failed",
        changes: { paymentMethod, failureCode: outcome.code, failureReason: outcome.message.slice(0, 500) || null },
        settlesAttempt: { attemptId: attempt.id, status: "failed", code: outcome.code, reason: outcome.message },
      });
      if (result.applied) logger.info({ reference: t.reference, attempt: attempt.id, code: outcome.code, source }, "collection settled");
      return;
    }
    const failed = await failAttempt(t, attempt.id, paymentMethod, outcome.code, outcome.message || DEFAULT_FAILURE_REASON);
    if (failed.settled) logger.info({ reference: t.reference, attempt: attempt.id, code: outcome.code, source }, "checkout attempt failed");
  }

  /**
   * A collection callback, found in one lookup (its channel and the provider's request id), applied only when it
   * matches what its attempt asked for: true when it named an attempt (applied, or refused for not matching).
   */
  async function applyCollectionCallback(channel: PaymentChannel, callback: CollectionCallback): Promise<boolean> {
    const attempt = await attempts.findByRequest(channel.id, callback.providerRequestId);
    if (!attempt) {
      logger.warn({ channelId: channel.id, providerRequestId: callback.providerRequestId }, "collection callback for an unknown request; not applied");
      return false;
    }
    const mismatched = collectionMismatch(callback, attempt);
    if (mismatched.length) {
      // Left for the status query, which asks the provider itself.
      const t = await store.findById(attempt.transactionId);
      logger.warn(
        { reference: t?.reference, attempt: attempt.id, providerRequestId: callback.providerRequestId, mismatched, expectedAmount: String(attempt.amount), callbackAmount: String(callback.amount) },
        "collection callback does not match its attempt field by field; not applied, left for the status query",
      );
      return true;
    }
    await applyAttemptOutcome(attempt, callback.outcome, "callback");
    return true;
  }

  /** Asks the provider about a push with no verdict yet (a status query) and applies a settled answer: true when it settled. */
  async function queryPush(attempt: TransactionAttempt, push: PushTarget, merchantId: number): Promise<boolean> {
    if (!attempt.checkoutRequestId) return false; // never accepted (a crash before the answer): only its expiry settles it
    const checkoutRequestId = attempt.checkoutRequestId;
    const outcome = await withProviderCallScope({ merchantId, transactionId: attempt.transactionId, attemptId: attempt.id }, () =>
      push.momo.stkQuery({ config: channels.readChannelConfig(push.channel), checkoutRequestId }),
    );
    if (outcome.state === "pending") return false;
    await applyAttemptOutcome(attempt, outcome, "query");
    return true;
  }

  /** Fails a push with its provider's expired-push verdict once `since` is older than the push's lifetime; true when it did. */
  async function expirePushIfOutlived(attempt: TransactionAttempt, push: PushTarget, since: Date): Promise<boolean> {
    if (Date.now() - since.getTime() < deps.collection.lifetimeMs) return false;
    await applyAttemptOutcome(attempt, push.momo.expiredPush, "expiry");
    return true;
  }

  /** The channel and mobile-money connector a push went through; undefined when there is nothing to ask any more. */
  async function pushTargetOf(attempt: TransactionAttempt): Promise<PushTarget | undefined> {
    const channel = attempt.channelId === null ? null : await channels.findById(attempt.channelId);
    const momo = channel ? connectorOf(connectors, channel)?.momo : undefined;
    return channel && momo ? { channel, momo } : undefined;
  }

  /** Between two status queries of one push: doubling from STK_QUERY_BACKOFF_MS, at most a minute. */
  const nextQueryWaitMs = (attempt: number) => Math.min(deps.collection.queryBackoffMs * 2 ** (attempt - 1), MAX_QUERY_BACKOFF_MS);

  /** A verdict on a payment with no attempt of ours (a hosted-checkout provider's page): false when it was already settled. */
  async function settlePayment(transaction: Transaction, outcome: SettledCollectionOutcome, source: string, changes: TransitionChanges = {}): Promise<boolean> {
    const result =
      outcome.state === "completed"
        ? await ctx.transition({ transactionId: transaction.id, to: "completed", changes: { ...changes, ...(outcome.providerReference ? { providerReference: outcome.providerReference } : {}) } })
        : await ctx.transition({ transactionId: transaction.id, to: "failed", changes: { ...changes, failureCode: outcome.code, failureReason: outcome.message.slice(0, 500) || null } });
    if (result.applied) logger.info({ reference: transaction.reference, status: result.transaction.status, source }, "collection settled");
    return result.applied;
  }

  return { maxAttemptsOf, failAttempt, applyAttemptOutcome, applyCollectionCallback, queryPush, expirePushIfOutlived, pushTargetOf, nextQueryWaitMs, settlePayment };
}

export type Outcomes = ReturnType<typeof createOutcomes>;
