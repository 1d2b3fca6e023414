import type { CollectionOutcome, MomoConnector } from "../types.ts";
import type { DarajaClient, MpesaConfig } from "./client.ts";
import * as wire from "./wire.ts";

/** The momo contract's C2B half lives in c2b.ts; this is Lipa na M-Pesa Online (STK push and its query). */
export type MpesaCollections = Pick<MomoConnector, "currency" | "expiredPush" | "c2bDefaultRejectCode" | "checkAmount" | "stkPush" | "stkQuery" | "parseStkCallback">;

export function createMpesaCollections(client: DarajaClient): MpesaCollections {
  return {
    ...wire.MPESA_MOMO_CONSTANTS,
    checkAmount: (amount, currency) => void wire.toWholeShillings(amount, currency),
    parseStkCallback: wire.parseStkCallbackBody,

    async stkPush(request) {
      const config = request.config as MpesaConfig;
      const till = config.transaction_type === "till";
      const body = {
        ...client.lipaCredentials(config),
        TransactionType: till ? "CustomerBuyGoodsOnline" : "CustomerPayBillOnline",
        Amount: wire.toWholeShillings(request.amount, request.currency),
        PartyA: request.phoneNumber,
        PartyB: till ? config.till_number : config.shortcode,
        PhoneNumber: request.phoneNumber,
        CallBackURL: request.callbackUrl,
        AccountReference: request.accountReference.slice(0, 12),
        TransactionDesc: request.description.slice(0, 13),
      };
      const reply = await client.request(config, "/mpesa/stkpush/v1/processrequest", body, "STK push");
      return {
        checkoutRequestId: String(reply.CheckoutRequestID),
        merchantRequestId: String(reply.MerchantRequestID ?? ""),
        customerMessage: typeof reply.CustomerMessage === "string" ? reply.CustomerMessage : "Success. Request accepted for processing",
      };
    },

    async stkQuery({ config: raw, checkoutRequestId }): Promise<CollectionOutcome> {
      const config = raw as MpesaConfig;
      const response = await client.post(config, "/mpesa/stkpushquery/v1/query", { ...client.lipaCredentials(config), CheckoutRequestID: checkoutRequestId }, "STK query");
      const body = response.body;
      // While the customer has not answered, Daraja replies with this error instead of a result.
      if (body?.errorCode === "500.001.1001" && /being processed/i.test(String(body.errorMessage ?? ""))) return { state: "pending" };
      const reply = client.accepted("STK query", config, response);
      if (reply.ResultCode === undefined || reply.ResultCode === null) return { state: "pending" };
      const resultCode = String(reply.ResultCode);
      const message = typeof reply.ResultDesc === "string" ? reply.ResultDesc : "";
      return resultCode === "0" ? { state: "completed", providerReference: null, message } : { state: "failed", code: resultCode, message };
    },
  };
}
