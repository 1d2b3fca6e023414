import { GatewayError, ValidationError } from "../../errors.ts";
import type { PayoutConnector } from "../types.ts";
import { paystackFailure, type PaystackClient, type PaystackConfig } from "./client.ts";
import { localKenyanNumber, MPESA_BANK_CODE, PAYOUT_CURRENCY, readTransferResult, text } from "./wire.ts";

/** Paystack transfers to M-Pesa numbers: a recipient, then a transfer keyed by the payout's reference. */
export function createPaystackPayouts(client: PaystackClient): PayoutConnector {
  return {
    canPayOut: () => true,

    checkAmount(amount, currency) {
      if (currency !== PAYOUT_CURRENCY) throw new ValidationError("currency", `must be ${PAYOUT_CURRENCY}: Paystack payouts go to M-Pesa numbers`);
      // M-Pesa moves whole shillings.
      if (amount % 100n !== 0n) throw new ValidationError("amount", "must be whole shillings (a multiple of 100) for an M-Pesa transfer");
      if (amount > BigInt(Number.MAX_SAFE_INTEGER)) throw new ValidationError("amount", "is larger than Paystack accepts");
    },

    /**
     * A recipient, then the transfer keyed by the payout's reference: Paystack refuses a second transfer
     * with the same reference, so no retry can pay twice.
     */
    async send(request) {
      const config = request.config as PaystackConfig;
      const recipient = await client.data(config, "POST", "/transferrecipient", "payout recipient", {
        type: "mobile_money",
        name: request.phoneNumber,
        account_number: localKenyanNumber(request.phoneNumber),
        bank_code: MPESA_BANK_CODE,
        currency: PAYOUT_CURRENCY,
      });
      const recipientCode = text(recipient.recipient_code);
      if (!recipientCode) throw new GatewayError("provider_unavailable", "Paystack's answer to the payout recipient could not be read");
      let transfer: Record<string, any>;
      try {
        transfer = await client.data(config, "POST", "/transfer", "payout", {
          source: "balance",
          amount: Number(request.amount),
          currency: request.currency,
          recipient: recipientCode,
          reference: request.reference,
          reason: request.remarks.slice(0, 100),
        });
      } catch (error) {
        // A transfer with this reference exists already: it was sent, so this is not a refusal. Its outcome is asked for.
        if (error instanceof GatewayError && /duplicate_reference/.test(error.message)) return { providerConversationId: "" };
        throw error;
      }
      return { providerConversationId: text(transfer.transfer_code) ?? "" };
    },

    async queryStatus({ config: raw, reference, deliverResult }) {
      const config = raw as PaystackConfig;
      const response = await client.call(config, "GET", `/transfer/verify/${encodeURIComponent(reference)}`, "payout status query");
      if (response.status === 200 && response.body?.status === true) {
        await deliverResult?.(response.body.data);
        return;
      }
      // Not found: the transfer request never reached Paystack (yet); asked again later.
      if (response.status === 400 || response.status === 404) return;
      throw paystackFailure("payout status query", response, config.secret_key);
    },

    // Paystack's transfer webhooks only name the transfer: the gateway asks /transfer/verify (queryStatus) before applying anything.
    parseResult: () => {
      throw new GatewayError("validation_failed", "Paystack transfer outcomes are read through verification, not from a posted result");
    },
    parseStatusResult: (body) => readTransferResult((body as Record<string, any>) ?? null),
  };
}
