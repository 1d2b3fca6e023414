import { createHmac, timingSafeEqual } from "node:crypto";
import { GatewayError } from "../../errors.ts";
import { jsonNestedDeeperThan } from "../../rest/json-depth.ts";
import type { InboundConnector, ProviderNotification } from "../types.ts";
import { idOf } from "./wire.ts";

/** Paystack's webhooks are small; anything larger is not one. */
const WEBHOOK_BODY_LIMIT_BYTES = 256 * 1024;

const text = (value: unknown) => (typeof value === "string" ? value : null);

/** Constant-time check of `x-paystack-signature`: hex HMAC-SHA512 of the raw body keyed with the secret key. */
export function paystackSignatureValid(rawBody: Buffer, header: unknown, secretKey: string): boolean {
  if (typeof header !== "string" || !/^[0-9a-fA-F]{128}$/.test(header)) return false;
  const expected = createHmac("sha512", secretKey).update(rawBody).digest();
  return timingSafeEqual(expected, Buffer.from(header, "hex"));
}

/** A webhook whose signature verifies, as the event it names; null when the signature does not verify. */
export function readPaystackNotification(rawBody: Buffer, signature: unknown, secretKey: string): ProviderNotification | null {
  if (!paystackSignatureValid(rawBody, signature, secretKey)) return null;
  const raw = rawBody.toString("utf8");
  // Nested deeper than any webhook: unreadable, before it is parsed (src/rest/json-depth.ts).
  if (jsonNestedDeeperThan(raw)) return { kind: "other", event: "unreadable" };
  let body: any;
  try {
    body = JSON.parse(raw);
  } catch {
    return { kind: "other", event: "unreadable" };
  }
  const event = text(body?.event) ?? "unknown";
  if (event.startsWith("charge.dispute.")) {
    // A dispute's data has no top-level reference: it is named by Paystack's numeric dispute id.
    const providerReference = idOf(body?.data?.id);
    if (providerReference && /^[1-9]/.test(providerReference)) return { kind: "dispute", event, providerReference };
  }
  const reference = text(body?.data?.reference);
  if (reference && event.startsWith("charge.")) return { kind: "collection", reference, event };
  if (reference && event.startsWith("transfer.")) return { kind: "payout", reference, event };
  if (event.startsWith("refund.")) {
    // Paystack's samples: {status, transaction_reference, refund_reference (the processor's), amount, ...}; `id` only on some.
    const paymentReference = text(body?.data?.transaction_reference);
    const id = body?.data?.id;
    const providerReference = typeof id === "number" && Number.isSafeInteger(id) ? String(id) : typeof id === "string" && /^\d{1,20}$/.test(id) ? id : null;
    if (paymentReference || providerReference) return { kind: "refund", event, paymentReference, providerReference };
  }
  return { kind: "other", event };
}

/**
 * Paystack's webhooks for one channel, at the URL its create response shows (`webhook_url`): one per
 * account and mode, pasted by the merchant into Paystack's dashboard. `x-paystack-signature` (HMAC-SHA512
 * of the exact bytes, keyed with the channel's secret key) is checked before anything is read. A signed
 * event only says what to look at: the gateway takes the outcome from Paystack's verify endpoint.
 */
export const paystackInbound: InboundConnector = {
  aliases: [],
  paths: [""],
  maxBodyBytes: WEBHOOK_BODY_LIMIT_BYTES,

  read({ rawBody, headers, config }) {
    const notification = readPaystackNotification(rawBody, headers["x-paystack-signature"], (config() as { secret_key: string }).secret_key);
    if (!notification) throw new GatewayError("invalid_signature");
    return { kind: "notification", notification };
  },

  acknowledge: () => ({ status: "success" }),
  // Paystack only reads the status code: refusals keep the gateway's error envelope.
  refuse: () => null,
  // Transfer outcomes arrive as webhooks too: nothing is posted to a per-request URL.
  callbackUrls: () => ({}),
  webhookUrl: (at) => at("paystack", ""),
};
