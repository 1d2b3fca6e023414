import type { PaymentChannel } from "../../db/generated/prisma/client.ts";
import { GatewayError } from "../../errors.ts";
import { encodeCallbackToken } from "../channels/service.ts";

export { decodeCallbackToken, encodeCallbackToken } from "../channels/service.ts";

export interface MomoCallbackUrls {
  stk: string;
  validation: string;
  confirmation: string;
  /** B2C payouts: Daraja's ResultURL and QueueTimeOutURL. */
  b2cResult: string;
  b2cTimeout: string;
  /** ResultURL of a Transaction Status query about one payout (its answer names the query, not the payout). */
  b2cStatusResult(reference: string): string;
}

/** The gateway's own callback URLs for one channel; refused when PUBLIC_BASE_URL spells a forbidden word. */
export function momoCallbackUrls(publicBaseUrl: string, channel: Pick<PaymentChannel, "callbackToken">, forbiddenWords: readonly string[]): MomoCallbackUrls {
  const base = `${publicBaseUrl}/callbacks/daraja/${encodeCallbackToken(channel.callbackToken)}`;
  const urls = {
    stk: `${base}/stk`,
    validation: `${base}/c2b/validation`,
    confirmation: `${base}/c2b/confirmation`,
    b2cResult: `${base}/b2c/result`,
    b2cTimeout: `${base}/b2c/timeout`,
    b2cStatusResult: (reference: string) => `${base}/b2c/status/${reference}`,
  };
  const bad = forbiddenWords.find((word) => urls.stk.toLowerCase().includes(word));
  if (bad) {
    throw new GatewayError("validation_failed", `PUBLIC_BASE_URL contains "${bad}", which M-Pesa refuses in callback URLs; serve the gateway from another host name`);
  }
  return urls;
}
