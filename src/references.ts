import { randomBytes } from "node:crypto";

const BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz";

/**
 * `prefix` + 20 random characters of [0-9a-z] (~103 bits): URL-safe and unguessable. Lowercase, because
 * such a reference may be sent to providers that key requests by the caller's reference (Paystack:
 * lowercase, digits, `-`, `_`). Bytes of 252 and above are skipped so every character is equally likely.
 */
export function randomReference(prefix: string): string {
  let out = prefix;
  const length = prefix.length + 20;
  while (out.length < length) for (const byte of randomBytes(40)) if (byte < 252 && out.length < length) out += BASE36[byte % 36];
  return out;
}
