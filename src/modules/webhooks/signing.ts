import { createHmac, randomBytes } from "node:crypto";

/**
 * Outgoing webhook signatures in the Standard Webhooks format (https://www.standardwebhooks.com/), so
 * merchants can verify them with any of its libraries: HMAC-SHA256 over "<id>.<timestamp>.<body>",
 * keyed with the base64 bytes after "whsec_", sent as "v1,<base64>" in the webhook-signature header.
 */
const SECRET_PREFIX = "whsec_";
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export interface SignWebhookInput {
  /** Stable per message (retries reuse it) so receivers can deduplicate. */
  id: string;
  /** Unix seconds of this attempt; receivers reject anything more than 5 minutes away from their clock. */
  timestamp: number;
  /** The exact bytes sent: signing a re-serialised copy would not verify. */
  body: string;
  /** More than one while a secret is being rotated: each yields a signature, the receiver accepts any. */
  secrets: string[];
}

/** 32 random bytes: the spec asks for 24 to 64. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString("base64");
}

function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : "";
  // Buffer.from(..., "base64") skips bad characters silently; a malformed secret must fail loudly instead.
  if (!BASE64.test(encoded)) throw new Error("webhook secret must be whsec_ followed by base64");
  return Buffer.from(encoded, "base64");
}

export function signWebhook({ id, timestamp, body, secrets }: SignWebhookInput): string {
  if (secrets.length === 0) throw new Error("signWebhook needs at least one secret");
  if (!Number.isInteger(timestamp)) throw new Error("webhook timestamp must be whole unix seconds");
  const signedContent = `${id}.${timestamp}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac("sha256", secretKey(secret)).update(signedContent, "utf8").digest("base64")}`)
    .join(" ");
}

/** The headers every delivery sends besides its id, timestamp and signature (the deliveries list shows them too). */
export const WEBHOOK_FIXED_HEADERS = { "content-type": "application/json", "user-agent": "payment-gateway-webhooks/1" } as const;

export function webhookHeaders(input: SignWebhookInput): Record<string, string> {
  return {
    "webhook-id": input.id,
    "webhook-timestamp": String(input.timestamp),
    "webhook-signature": signWebhook(input),
    ...WEBHOOK_FIXED_HEADERS,
  };
}
