import type { ReconciliationConnector } from "../types.ts";
import type { DarajaClient, MpesaConfig } from "./client.ts";
import { canInitiate } from "./payouts.ts";

/**
 * Daraja lists no payments: the reconciliation asks about pending ones one by one (the STK query) and reads
 * the shortcode's balance (Account Balance, answered later on the ResultURL), which needs the B2C initiator.
 */
export function createMpesaReconciliation(client: DarajaClient): ReconciliationConnector {
  return {
    balanceUnavailable: (raw) => (canInitiate(raw) ? undefined : "the channel has no initiator_name with security_credential or initiator_password"),
    async requestBalance({ config: raw, resultUrl, timeoutUrl }) {
      const config = raw as MpesaConfig;
      const body = {
        Initiator: config.initiator_name,
        SecurityCredential: client.securityCredential(config),
        CommandID: "AccountBalance",
        PartyA: config.shortcode,
        IdentifierType: "4",
        Remarks: "Reconciliation",
        QueueTimeOutURL: timeoutUrl,
        ResultURL: resultUrl,
      };
      await client.request(config, "/mpesa/accountbalance/v1/query", body, "account balance request");
    },
  };
}
