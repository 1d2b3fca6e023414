import type { PaymentChannel, Transaction } from "../../db/generated/prisma/client.ts";
import { toMsisdn } from "../../phone.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { MomoConnector, StkPushAccepted } from "../../providers/types.ts";
import { asProviderError, type FlowContext } from "./context.ts";
import type { AttemptRef, Outcomes } from "./outcomes.ts";

/**
 * The one STK push flow, for the API's pushes and the checkout page's alike: the attempt is recorded (and its
 * follow-up query queued) before the provider is asked; a refusal is the attempt's failed verdict (outcomes.ts);
 * an accepted push records the provider's request id on its attempt, which its callback and status query name.
 */
export function createPushFlow(ctx: FlowContext, outcomes: Outcomes) {
  const { deps, attempts } = ctx;
  const { channels, logger } = deps;

  return {
    async send(t: Transaction, attempt: AttemptRef, target: { channel: PaymentChannel; momo: MomoConnector; phoneNumber: string }): Promise<StkPushAccepted> {
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
      await attempts.setRequestId(attempt.id, accepted.checkoutRequestId);
      return accepted;
    },
  };
}

export type PushFlow = ReturnType<typeof createPushFlow>;
