import type { PaymentChannel, Transaction } from "../../db/generated/prisma/client.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { HostedCheckoutConnector, HostedPaymentStatus } from "../../providers/types.ts";
import { asProviderError, connectorOf, savePaymentMethodOf, type FlowContext } from "./context.ts";
import type { Outcomes } from "./outcomes.ts";

/**
 * Hosted checkout (Paystack-style): the payment is opened at the provider, the payer pays on the
 * provider's page, and the gateway verifies with the provider (on the payer's return, on the provider's
 * notice, or by reconciliation) before recording it.
 */

export function createHostedFlow(ctx: FlowContext, outcomes: Outcomes) {
  const { deps, store } = ctx;
  const { channels, connectors, logger } = deps;
  /** The provider calls made about one payment, on record against it. */
  const about = <T>(t: Transaction, call: () => Promise<T>) => withProviderCallScope({ merchantId: t.merchantId, transactionId: t.id }, call);

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
    await outcomes.settlePayment(transaction, status.outcome, source, { paymentMethod: status.paymentMethod ?? "card" });
    // Saved at every verification that finds it paid (the same card is one method): a crash after the payment's commit is made good by the next.
    if (status.outcome.state === "completed") await savePaymentMethodOf(deps, transaction, transaction.channelId, status.savedCard ? { card: status.savedCard } : null);
    return true;
  }

  /** Asks the provider about a pending hosted payment and records a settled answer. Throws when the provider cannot be asked. */
  async function verifyHostedPayment(transaction: Transaction & { channel: PaymentChannel | null }, source: string): Promise<Transaction> {
    const hosted = transaction.channel ? connectorOf(connectors, transaction.channel)?.hosted : undefined;
    if (!hosted || transaction.status !== "pending") return transaction;
    const status = await about(transaction, () => hosted.verify({ config: channels.readChannelConfig(transaction.channel!), reference: transaction.reference }));
    await applyHostedStatus(transaction, status, source);
    const reread = await store.findById(transaction.id);
    if (!reread) throw new Error(`transaction ${transaction.id} does not exist`);
    return reread;
  }

  /**
   * Starts the payment at the provider and stores where its page is. A refusal fails the transaction:
   * the payer was never sent anywhere, so nothing can be paid on it.
   */
  async function openHostedPayment(transaction: Transaction, channel: PaymentChannel, hosted: HostedCheckoutConnector, failOnRefusal = true): Promise<Transaction> {
    let started;
    try {
      started = await about(transaction, () => hosted.start({
        config: channels.readChannelConfig(channel),
        reference: transaction.reference,
        amount: transaction.amount,
        currency: transaction.currency,
        email: transaction.email ?? "",
        callbackUrl: ctx.returnUrl(transaction.reference),
        metadata: { transaction_id: transaction.id, reference: transaction.reference, merchant_id: transaction.merchantId },
      }));
    } catch (error) {
      const refusal = asProviderError(error);
      logger.warn({ reference: transaction.reference, code: refusal.code, err: refusal.message }, "hosted payment not started at the provider");
      // A late start (after a crash) may race another page load's: that one's refusal must not fail the payment.
      if (failOnRefusal) await ctx.transition({ transactionId: transaction.id, to: "failed", changes: { failureCode: refusal.code, failureReason: refusal.message.slice(0, 500) } });
      throw refusal;
    }
    return store.setHostedPage(transaction.id, { accessCode: started.accessCode, checkoutUrl: started.checkoutUrl });
  }

  return {
    openHostedPayment,

    /**
     * Where the payer of a hosted-checkout payment goes to pay: the provider's page while it is pending
     * (started now if an interrupted initialize never got that far), null otherwise.
     */
    async hostedCheckoutUrl(reference: string): Promise<string | null> {
      const transaction = await store.findWithChannelByReference(reference);
      const hosted = transaction?.channel ? connectorOf(connectors, transaction.channel)?.hosted : undefined;
      if (!transaction || !hosted || transaction.status !== "pending") return null;
      if (transaction.providerCheckoutUrl) return transaction.providerCheckoutUrl;
      return (await openHostedPayment(transaction, transaction.channel!, hosted, false)).providerCheckoutUrl;
    },

    /** The payer is back from the provider's page (or the provider notified us): ask the provider, then record it. */
    async verifyHostedPaymentByReference(reference: string, source: string, channelId?: number): Promise<Transaction | null> {
      const transaction = await store.findWithChannelByReference(reference, channelId);
      if (!transaction) {
        logger.warn({ channelId, source }, "hosted payment notice for an unknown reference; not applied");
        return null;
      }
      return verifyHostedPayment(transaction, source);
    },

    /** Asks the provider about a pending hosted payment (the reconcile job): true when its answer settles the question. */
    async askHosted(transaction: Transaction & { channel: PaymentChannel }, hosted: HostedCheckoutConnector): Promise<boolean> {
      const status = await about(transaction, () => hosted.verify({ config: channels.readChannelConfig(transaction.channel), reference: transaction.reference }));
      if (status.outcome.state === "pending") return false;
      await applyHostedStatus(transaction, status, "reconciliation");
      return true; // settled, or reported with another amount (logged for a person to look at; asking again will not change it)
    },

    /** When the payer should have paid by: the provider's window (Paystack's 24 hours) from initialize. */
    abandonAt: (transaction: Transaction) => transaction.createdAt.getTime() + deps.hosted.abandonAfterMs,

    /** Fails a hosted payment still unpaid after the provider's window as abandoned; true when it is past the window. */
    async abandonIfOutlived(transaction: Transaction): Promise<boolean> {
      if (Date.now() < transaction.createdAt.getTime() + deps.hosted.abandonAfterMs) return false;
      await outcomes.settlePayment(transaction, { state: "failed", code: "abandoned", message: "The payer did not complete the payment" }, "expiry");
      return true;
    },
  };
}

export type HostedFlow = ReturnType<typeof createHostedFlow>;
