import { GatewayError, ValidationError } from "../../errors.ts";
import { formatMoney } from "../../money.ts";
import { toMsisdn } from "../../phone.ts";
import type { PayoutConnector, RefundConnector, RefundRequest } from "../types.ts";
import type { DarajaClient, MpesaConfig } from "./client.ts";
import { askTransactionStatus } from "./payouts.ts";
import * as wire from "./wire.ts";

/**
 * M-Pesa refunds. The whole of a payment goes back by Daraja's Reversal API (method `mpesa_reversal`,
 * `POST /mpesa/reversal/v1/request`); part of one cannot be reversed, so it is paid back to the phone that
 * paid by a B2C payment (method `mpesa_b2c`) through the payouts connector's own request. Both answer later
 * on the refund's ResultURL (`/refund/result` on the channel's token); a result that never comes is asked
 * about with Transaction Status, as payouts are. Our OriginatorConversationID is the refund's
 * providerRequestId, committed before the call; Daraja's ConversationID is kept as the provider reference
 * while pending, so a result is matched by either.
 */
export const MPESA_REVERSAL_METHOD = "mpesa_reversal";
export const MPESA_B2C_REFUND_METHOD = "mpesa_b2c";

export interface MpesaRefundDeps {
  checkAfterMs: number;
  /** B2C: the partial path sends and asks through the payouts connector. */
  payouts: Pick<PayoutConnector, "canPayOut" | "send">;
  /** Reversal and Transaction Status requests go through Daraja's client. */
  client: Pick<DarajaClient, "request" | "securityCredential">;
}

/** Daraja's Remarks: 2 to 100 characters. */
function remarksOf(request: RefundRequest): string {
  const text = (request.merchantNote ?? request.customerNote ?? `Refund ${request.payment.reference}`).replace(/\s+/g, " ").trim().slice(0, 100);
  return text.length >= 2 ? text : `Refund ${request.reference}`.slice(0, 100);
}

function callbacksOf(request: RefundRequest) {
  const callbacks = request.callbacks;
  if (!callbacks?.result || !callbacks.timeout) throw new GatewayError("provider_error", "This channel has no callback URLs for M-Pesa refund results");
  return callbacks;
}

export function createMpesaRefunds(deps: MpesaRefundDeps): RefundConnector {
  const canInitiate = (config: unknown) => deps.payouts.canPayOut(config);

  return {
    checkAfterMs: deps.checkAfterMs,
    reversedOnceAdvice: "check what became of it in the M-Pesa org portal and settle it there",

    method(payment, amount, config) {
      const unit = 100n;
      if (amount % unit !== 0n) {
        throw new ValidationError("amount", `must be a whole number of shillings for an M-Pesa refund: ${formatMoney(amount, "KES")} has cents (in minor units a multiple of 100: 15000 is KES 150.00)`);
      }
      const initiator = "its config needs initiator_name and security_credential or initiator_password (an API operator with the reversal and B2C roles)";
      if (amount === payment.amount) {
        if (!payment.providerReference) {
          throw new GatewayError(
            "transaction_not_refundable",
            `Transaction ${payment.reference} has no M-Pesa receipt number recorded, so it cannot be reversed; reverse it in the M-Pesa org portal`,
          );
        }
        if (!canInitiate(config)) throw new GatewayError("transaction_not_refundable", `An M-Pesa payment is refunded by a reversal, which this channel cannot make: ${initiator}`);
        // Daraja reverses a receipt once: the gateway records it with the refund and never sends it again.
        return { method: MPESA_REVERSAL_METHOD, reverses: payment.providerReference };
      }
      if (!canInitiate(config)) {
        return { refused: `M-Pesa reverses only a whole payment; part of one is paid back by B2C, which this channel cannot make: ${initiator}` };
      }
      if (!payment.phoneNumber) return { refused: `Transaction ${payment.reference} has no payer phone number to pay a partial refund back to; refund it in full` };
      // B2C's own bounds (KES 10 to 250,000): refused before anything is reserved.
      wire.toB2cShillings(amount, payment.currency);
      return { method: MPESA_B2C_REFUND_METHOD };
    },

    async send(request) {
      const config = request.config as MpesaConfig;
      const callbacks = callbacksOf(request);
      if (request.amount !== request.payment.amount) {
        // A partial refund: B2C to the payer, exactly as a payout goes (Daraja refuses a reused OriginatorConversationID).
        if (!request.payment.phoneNumber) throw new GatewayError("partial_refund_unsupported", "The payment has no payer phone number to pay the refund back to");
        const accepted = await deps.payouts.send({
          config,
          reference: request.reference,
          providerRequestId: request.providerRequestId,
          amount: request.amount,
          currency: request.currency,
          phoneNumber: toMsisdn(request.payment.phoneNumber),
          commandId: "BusinessPayment",
          remarks: remarksOf(request),
          resultUrl: callbacks.result,
          timeoutUrl: callbacks.timeout,
        });
        return { state: "pending", providerReference: accepted.providerConversationId || null };
      }
      if (!request.payment.providerReference) throw new GatewayError("transaction_not_refundable", "The payment has no M-Pesa receipt number to reverse");
      const body = {
        OriginatorConversationID: request.providerRequestId,
        Initiator: config.initiator_name,
        CommandID: "TransactionReversal",
        TransactionID: request.payment.providerReference,
        Amount: wire.toWholeShillings(request.amount, request.currency),
        ReceiverParty: config.shortcode,
        // Safaricom's spelling; "11" is the organization receiving the reversal (older samples used "4").
        RecieverIdentifierType: "11",
        ResultURL: callbacks.result,
        QueueTimeOutURL: callbacks.timeout,
        Remarks: remarksOf(request),
        Occasion: request.reference,
      };
      const reply = await deps.client.request(config, "/mpesa/reversal/v1/request", { ...body, SecurityCredential: deps.client.securityCredential(config) }, "reversal");
      return { state: "pending", providerReference: typeof reply.ConversationID === "string" && reply.ConversationID ? reply.ConversationID : null };
    },

    /** Daraja answers later, on the status URL (refunds.applyResult); until then the refund stays pending. */
    async queryStatus(request) {
      const config = request.config as MpesaConfig;
      const callbacks = callbacksOf(request);
      const b2c = request.amount !== request.payment.amount;
      await askTransactionStatus(deps.client, config, {
        // Daraja's own ConversationID when it gave one (it surely knows it), else ours.
        originalConversationId: request.providerReference ?? request.providerRequestId,
        partyA: b2c ? (config.b2c_shortcode ?? config.shortcode) : config.shortcode,
        resultUrl: callbacks.statusResult,
        timeoutUrl: callbacks.timeout,
        remarks: b2c ? "Refund status" : "Reversal status",
        operation: b2c ? "refund status query" : "reversal status query",
      });
      return { state: "pending" };
    },
  };
}
