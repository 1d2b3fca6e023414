import type { PaymentChannel, Transaction } from "../../db/generated/prisma/client.ts";
import { toMsisdn } from "../../phone.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { MomoConnector, StkPushAccepted } from "../../providers/types.ts";
import { writeThroughOutage } from "../../db/outage.ts";
import { asProviderError, type FlowContext } from "./context.ts";
import type { AttemptRef, Outcomes } from "./outcomes.ts";

/** How long a push's request waits for a database that failed over just after the provider accepted the push. */
const PUSH_RECORD_WAIT_MS = 10_000;

/**
 * The one STK push flow, for the API's pushes and the checkout page's alike: the attempt is recorded (and its
 * follow-up query queued) before the provider is asked; a refusal is the attempt's failed verdict (outcomes.ts);
 * an accepted push records the provider's request id on its attempt, which its callback and status query name (waited
 * for through a database outage: without it the push could only expire).
 */
export function createPushFlow(ctx: FlowContext, outcomes: Outcomes) {
  const { deps, attempts, store } = ctx;
  const { channels, logger } = deps;

  return {
    /** Sends the push; `showOnPayment` copies its request id onto the payment as well (an API push's answer shows it). */
    async send(
      t: Transaction,
      attempt: AttemptRef,
      target: { channel: PaymentChannel; momo: MomoConnector; phoneNumber: string },
      options: { showOnPayment?: boolean } = {},
    ): Promise<{ accepted: StkPushAccepted; transaction: Transaction }> {
      const { channel, momo } = target;
      let accepted: StkPushAccepted;
      try {
        logger.info({ reference: t.reference, attempt: attempt.id }, "STK push sent");
        accepted = await withProviderCallScope({ merchantId: t.merchantId, transactionId: t.id, attemptId: attempt.id }, () =>
          momo.stkPush({
            config: channels.readChannelConfig(channel),
            amount: t.amount,
            currency: momo.currency,
            phoneNumber: toMsisdn(target.phoneNumber)!,
            accountReference: t.clientReference ?? t.reference,
            description: t.description ?? "Payment",
            callbackUrl: deps.stkCallbackUrl(channel, momo),
            deliverCallback: async (body) => outcomes.applyCollectionCallback(channel, momo.parseStkCallback(body)),
          }),
        );
      } catch (error) {
        const refusal = asProviderError(error);
        await outcomes.applyAttemptOutcome(attempt, { state: "failed", code: refusal.code, message: refusal.message }, "refusal");
        throw refusal;
      }
      // The push is on the payer's phone now: its id must reach the attempt, through a database failover if need be.
      const record = async (): Promise<Transaction | null> => {
        if (!options.showOnPayment) {
          await attempts.setRequestId(attempt.id, accepted.checkoutRequestId);
          return null;
        }
        const [, payment] = await deps.prisma.$transaction([attempts.setRequestId(attempt.id, accepted.checkoutRequestId), store.setCollectionRequest(t.id, accepted.checkoutRequestId)]);
        return payment;
      };
      const shown = await writeThroughOutage(record, {
        waitMs: PUSH_RECORD_WAIT_MS,
        giveUpMs: deps.collection.lifetimeMs,
        onGiveUp: (error) =>
          logger.error({ reference: t.reference, attempt: attempt.id, checkoutRequestId: accepted.checkoutRequestId, err: (error as Error).message }, "an accepted STK push's request id could not be recorded; it will expire"),
      });
      return { accepted, transaction: shown ?? t };
    },
  };
}

export type PushFlow = ReturnType<typeof createPushFlow>;
