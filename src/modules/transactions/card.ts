import { luhnValid } from "../../cards.ts";
import type { Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { CardDetails, CardOutcome } from "../../providers/types.ts";
import { maskCard, type AttemptFlow } from "./attempts.ts";
import { cardBrand } from "../../cards.ts";
import { alreadySettled, asProviderError, connectorOf, savePaymentMethodOf, type FlowContext } from "./context.ts";
import type { Outcomes } from "./outcomes.ts";

/** A payer's card payment on the gateway's own checkout page, and the claim that admits one charge at a time. */

export const PAYMENT_IN_PROGRESS = "A payment for this transaction is in progress";

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

export function createCardFlow(ctx: FlowContext, attempts: AttemptFlow, outcomes: Outcomes) {
  const { deps, store } = ctx;
  const { channels, connectors, logger } = deps;

  return {
    /**
     * A payer's card payment from the hosted checkout: validate -> claim the transaction -> charge ->
     * record. The claim (one conditional UPDATE of `charge_started_at`) admits one charge call per
     * transaction at a time, across instances; a concurrent submission is a 409, never a second charge.
     * Each caller gets its own outcome: a declined card is a failed attempt (the transaction fails at
     * CHECKOUT_MAX_ATTEMPTS failed attempts, attempts.ts) and is reported as declined, whatever another attempt did. A charge that throws without an outcome
     * (provider unavailable) releases the claim so the payer can retry; a claim older than the lease
     * (its instance crashed mid-charge) may be taken over.
     */
    async payWithCard(reference: string, cardInput: CardDetails, consent?: { savePaymentMethod?: boolean | undefined; language?: string | undefined }): Promise<{ transaction: Transaction; outcome: CardOutcome }> {
      // The payer's path: plain SQL throughout (src/db/sql.ts), four statements with the status change.
      const transaction = await store.findForPayer(reference);
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

      // The claim's timestamp is its token: only the attempt that wrote it releases it. The claim and the
      // attempt's row are one statement (attempts.ts): an STK push in flight holds the claim as a card does.
      const claimedAt = new Date();
      const claim = await attempts.claim(transaction.id, claimedAt, { method: "card", detail: maskCard(card.number), language: consent?.language, cardBrand: cardBrand(card.number) });
      if (!claim.claimed) throw attempts.refused(claim);
      const attemptId = claim.attemptId!;

      let outcome: CardOutcome;
      try {
        logger.info({ reference }, "card charge sent");
        const chargeCard = connector.chargeCard.bind(connector);
        outcome = await withProviderCallScope({ merchantId: transaction.merchantId, transactionId: transaction.id, attemptId }, () =>
          chargeCard({ reference, amount: transaction.amount, currency: transaction.currency, card, config }),
        );
      } catch (error) {
        // No outcome: as if the attempt was never made (its row goes, the claim is released), so the payer can retry.
        await ctx.attempts.forgetAndRelease(attemptId, transaction.id, claimedAt).catch(
          (releaseError: unknown) => logger.warn({ reference, err: (releaseError as Error).message }, "card charge claim not released; it lapses with its lease"),
        );
        logger.warn({ reference, err: (error as Error).message }, "card charge failed without an outcome; claim released");
        throw asProviderError(error);
      }
      if (outcome.outcome !== "succeeded") {
        // A decline is this attempt's outcome; the transaction fails only at the attempts limit.
        const { transition: failed } = await outcomes.failAttempt(transaction, attemptId, "card", outcome.code, outcome.reason);
        if (failed && !failed.applied) throw alreadySettled(failed.transaction.status);
        return { transaction: failed?.transaction ?? transaction, outcome };
      }
      const jobs = ctx.deps.jobsOnCardPaid?.(channel, { reference, amount: transaction.amount, currency: transaction.currency, providerReference: outcome.providerReference }) ?? [];
      const result = await ctx.transition({
        transactionId: transaction.id,
        to: "completed",
        changes: { paymentMethod: "card", providerReference: outcome.providerReference },
        ...(jobs.length ? { jobs } : {}),
        // In the same statement: /status never shows a succeeded attempt on a payment still pending.
        settlesAttempt: { attemptId, status: "succeeded", providerReference: outcome.providerReference },
      });
      if (!result.applied) {
        // Only possible when this charge outlived its lease and another attempt took over and settled:
        // this attempt's outcome is not the recorded one, so it is not reported as if it were.
        logger.error(
          { reference, outcome: outcome.outcome, providerReference: outcome.providerReference },
          "card charge finished after the transaction was settled by another attempt; not recorded",
        );
        throw alreadySettled(result.transaction.status);
      }
      // The payer's choice on the page, when sent, is theirs to make over the merchant's request.
      const paid = consent?.savePaymentMethod === undefined ? result.transaction : { ...result.transaction, savePaymentMethod: consent.savePaymentMethod };
      await savePaymentMethodOf(ctx.deps, paid, channel.id, outcome.saved ? { card: outcome.saved } : null);
      return { transaction: result.transaction, outcome };
    },
  };
}
