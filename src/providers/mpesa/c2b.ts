import type { MomoConnector } from "../types.ts";
import type { DarajaClient, MpesaConfig } from "./client.ts";
import * as wire from "./wire.ts";

/**
 * Daraja's C2B product: registering the gateway's validation and confirmation URLs for a shortcode,
 * simulating a payment (Daraja's sandbox only), and C2B's payload and reply formats. What the gateway does
 * with a C2B payment (relay the merchant's verdict, record it once, forward it) is modules/momo's.
 */
export type MpesaC2b = Pick<MomoConnector, "registerC2bUrls" | "canSimulateC2b" | "takesC2b" | "simulateC2b" | "parseC2bPayment" | "c2bValidationReply" | "readC2bValidationDecision">;

export function createMpesaC2b(client: DarajaClient): MpesaC2b {
  return {
    async registerC2bUrls(request) {
      const config = request.config as MpesaConfig;
      const body = {
        ShortCode: config.shortcode,
        ResponseType: request.responseType,
        ConfirmationURL: request.confirmationUrl,
        ValidationURL: request.validationUrl,
      };
      await client.request(config, "/mpesa/c2b/v1/registerurl", body, "C2B URL registration");
    },

    canSimulateC2b: (config) => (config as MpesaConfig).environment === "sandbox",

    // Any paybill or till can be paid from the M-Pesa menu; a merchant who only sends STK pushes says `c2b: false`.
    takesC2b: (config) => (config as MpesaConfig).c2b !== false,

    async simulateC2b(request) {
      const config = request.config as MpesaConfig;
      const till = config.transaction_type === "till";
      const body = {
        ShortCode: till ? config.till_number : config.shortcode,
        CommandID: till ? "CustomerBuyGoodsOnline" : "CustomerPayBillOnline",
        Amount: wire.toWholeShillings(request.amount, request.currency),
        Msisdn: request.phoneNumber,
        BillRefNumber: request.billRef,
      };
      await client.request(config, "/mpesa/c2b/v1/simulate", body, "C2B simulation");
    },

    parseC2bPayment: wire.parseC2bBody,
    c2bValidationReply: wire.c2bValidationReply,
    readC2bValidationDecision: wire.readC2bValidationDecision,
  };
}
