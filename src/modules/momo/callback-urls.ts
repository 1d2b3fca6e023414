import type { PaymentChannel } from "../../db/generated/prisma/client.ts";
import { GatewayError } from "../../errors.ts";

/**
 * Daraja calls the gateway back on paths that carry the channel's token hex-encoded: base64url text
 * could by chance spell a word Daraja refuses in URLs ("exe", "sql", ...); hex cannot.
 */
export const encodeCallbackToken = (token: string) => Buffer.from(token, "utf8").toString("hex");

export function decodeCallbackToken(segment: string): string | null {
  if (!/^(?:[0-9a-f]{2}){1,128}$/.test(segment)) return null;
  const token = Buffer.from(segment, "hex").toString("latin1");
  return /^[A-Za-z0-9_-]+$/.test(token) ? token : null;
}

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
