import type { PayoutConnector } from "../types.ts";
import type { DarajaClient, MpesaConfig } from "./client.ts";
import * as wire from "./wire.ts";

export interface TransactionStatusQuery {
  originalConversationId: string;
  partyA: string;
  resultUrl: string;
  timeoutUrl: string;
  remarks: string;
  operation: string;
}

/**
 * Daraja's Transaction Status query about one request of ours (a payout, a reversal, a refund's B2C
 * payment), named by its conversation id; the answer is posted later to resultUrl.
 */
export async function askTransactionStatus(client: Pick<DarajaClient, "request" | "securityCredential">, config: MpesaConfig, query: TransactionStatusQuery): Promise<void> {
  const body = {
    Initiator: config.initiator_name,
    SecurityCredential: client.securityCredential(config),
    CommandID: "TransactionStatusQuery",
    OriginalConversationID: query.originalConversationId,
    PartyA: query.partyA,
    IdentifierType: "4",
    ResultURL: query.resultUrl,
    QueueTimeOutURL: query.timeoutUrl,
    Remarks: query.remarks,
    Occasion: "",
  };
  await client.request(config, "/mpesa/transactionstatus/v1/query", body, query.operation);
}

/** B2C needs an API operator (the initiator) with its credential. */
export const canInitiate = (raw: unknown) => {
  const config = raw as MpesaConfig;
  return Boolean(config.initiator_name && (config.security_credential || config.initiator_password));
};

/** M-Pesa B2C payouts: sent with our OriginatorConversationID, answered later on the ResultURL. */
export function createMpesaPayouts(client: DarajaClient): PayoutConnector {
  return {
    payOutNeeds: "initiator_name and security_credential or initiator_password",
    canPayOut: canInitiate,

    checkAmount: (amount, currency) => void wire.toB2cShillings(amount, currency),

    async send(request) {
      const config = request.config as MpesaConfig;
      const remarks = request.remarks.trim().slice(0, 100);
      const body = {
        OriginatorConversationID: request.providerRequestId,
        InitiatorName: config.initiator_name,
        SecurityCredential: client.securityCredential(config),
        CommandID: request.commandId,
        Amount: wire.toB2cShillings(request.amount, request.currency),
        PartyA: config.b2c_shortcode ?? config.shortcode,
        PartyB: request.phoneNumber,
        Remarks: remarks.length >= 2 ? remarks : "Payout",
        QueueTimeOutURL: request.timeoutUrl,
        ResultURL: request.resultUrl,
        Occassion: "",
      };
      const reply = await client.request(config, "/mpesa/b2c/v3/paymentrequest", body, "payout");
      return { providerConversationId: String(reply.ConversationID ?? "") };
    },

    async queryStatus(request) {
      const config = request.config as MpesaConfig;
      await askTransactionStatus(client, config, {
        originalConversationId: request.providerRequestId,
        partyA: config.b2c_shortcode ?? config.shortcode,
        resultUrl: request.resultUrl,
        timeoutUrl: request.timeoutUrl,
        remarks: "Payout status",
        operation: "payout status query",
      });
    },

    parseResult: wire.parseB2cResultBody,
    parseStatusResult: wire.parseTransactionStatusBody,
  };
}
