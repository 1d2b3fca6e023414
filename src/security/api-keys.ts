import { createHash, randomBytes } from "node:crypto";

export type KeyMode = "test" | "live";

/** Characters of the random part kept in the visible prefix (sk_test_ + 8). */
const PREFIX_RANDOM_CHARS = 8;

export interface GeneratedApiKey {
  /** The whole key: shown once, never stored. */
  plaintext: string;
  /** What operators see and revoke by, e.g. sk_test_Ab12Cd34. */
  prefix: string;
  hash: string;
}

export function generateApiKey(mode: KeyMode): GeneratedApiKey {
  const secret = randomBytes(24).toString("base64url"); // 32 URL-safe characters, 192 bits
  const plaintext = `sk_${mode}_${secret}`;
  return { plaintext, prefix: `sk_${mode}_${secret.slice(0, PREFIX_RANDOM_CHARS)}`, hash: hashApiKey(plaintext) };
}

/** Keys are high-entropy, so a plain SHA-256 is enough: no brute force over 192 bits. */
export function hashApiKey(plaintext: string): string {
  return createHash("sha256").update(plaintext, "utf8").digest("hex");
}

export function looksLikeApiKey(value: string): boolean {
  return /^sk_(test|live)_[A-Za-z0-9_-]{16,64}$/.test(value);
}
