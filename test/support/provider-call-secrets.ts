import { expect } from "vitest";
import { luhnValid } from "../../src/cards.ts";

/**
 * The secret scan of the provider calls on record (issue 36): called with the `provider_calls` rows after every
 * connector's contract suite, it fails on anything that lets someone move money or read a card:
 * - a Paystack secret key (sk_live_..., sk_test_...);
 * - a field whose name says it holds a secret, with a value in it: Daraja's Password, SecurityCredential, consumer
 *   secret and passkey, an initiator password, a PIN, a password, a CVV/CVC, an OAuth access token;
 * - a full card number: 13 to 19 digits (or grouped as cards are written) with a card network's prefix that pass
 *   the Luhn check;
 * - any of `known`: the test's own credentials (a channel's consumer_secret, passkey, initiator password ...), found
 *   wherever they are, in whatever field.
 * A scrubbed value ("[redacted]", "***", empty) passes: the scan asks that the secret is gone, not how it was removed.
 */

/** Field names (compared without case, "_" or "-") that hold a secret. */
const SECRET_FIELDS = new Set([
  "password",
  "initiatorpassword",
  "securitycredential",
  "consumersecret",
  "passkey",
  "secretkey",
  "pin",
  "cvv",
  "cvv2",
  "cvc",
  "cvc2",
  "securitycode",
  "accesstoken",
]);

/** What a scrubber leaves in place of a secret. */
const PLACEHOLDER = /^(|[\s*x•.#-]+|[[(<{]?\s*(redacted|scrubbed|removed|filtered|hidden|masked)\s*[\])>}]?)$/i;

const SECRET_KEY = /\bsk_(live|test)_[A-Za-z0-9]+/;
/**
 * 13 to 19 digits in a row, or a card as people group it (4-4-4-4 with an optional last group of up to 3, Amex's
 * 4-6-5) with spaces or dashes; never digits joined across other separators (Daraja's ids are dash-joined numbers),
 * nor digits inside a longer word (a hex-encoded callback token is mostly digits), as the scrubbers read them too.
 */
const CARD_SHAPES = [/(?<![0-9A-Za-z])\d{13,19}(?![0-9A-Za-z])/g, /(?<!\d[ -]?)\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{1,3})?(?!\d)/g, /(?<!\d[ -]?)\d{4}([ -])\d{6}\1\d{5}(?!\d)/g];
/** Card networks' prefixes (Visa, Mastercard, Amex, Discover, JCB, Diners, Verve, UnionPay): a timestamp or id rarely has one. */
const CARD_PREFIX = /^(4|5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720|3[47]|35|30[0-5]|36|38|6011|64[4-9]|65|506[01]|507[89]|650|62)/;

/** The card numbers in a text: one of CARD_SHAPES with a network's prefix, passing Luhn (a grouped one: whole, or its first 16). */
export function cardNumbersIn(text: string): string[] {
  const cards = new Set<string>();
  for (const shape of CARD_SHAPES) {
    for (const m of text.matchAll(shape)) {
      const digits = m[0].replace(/[ -]/g, "");
      const candidates = shape === CARD_SHAPES[1] ? [digits, digits.slice(0, 16)] : [digits];
      const card = candidates.find((candidate) => CARD_PREFIX.test(candidate) && luhnValid(candidate));
      if (card) cards.add(card);
    }
  }
  return [...cards];
}

const normalized = (key: string) => key.toLowerCase().replace(/[_-]/g, "");

function isSecretValue(value: unknown): boolean {
  if (value === null || value === undefined || typeof value === "boolean") return false;
  if (typeof value === "object") return Object.keys(value).length > 0;
  return !PLACEHOLDER.test(String(value).trim());
}

/** Secret-named fields with a value, anywhere in a JSON value. */
function secretFieldsIn(value: unknown, path: string, found: string[]): void {
  if (Array.isArray(value)) value.forEach((item, i) => secretFieldsIn(item, `${path}[${i}]`, found));
  else if (value && typeof value === "object") {
    for (const [key, child] of Object.entries(value)) {
      if (SECRET_FIELDS.has(normalized(key)) && isSecretValue(child)) found.push(`${path}.${key}`);
      else secretFieldsIn(child, `${path}.${key}`, found);
    }
  }
}

/** Secret-named fields with a value in a text that is not JSON: key=value (form bodies) or "key": "value". */
function secretPairsIn(text: string, found: string[]): void {
  for (const m of text.matchAll(/["']?([A-Za-z_-]+)["']?\s*[:=]\s*["']?([^"'&,}\s]*)/g)) {
    if (SECRET_FIELDS.has(normalized(m[1]!)) && isSecretValue(m[2])) found.push(m[1]!);
  }
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** What in one text gives a secret away, in words a failing test can show. */
export function secretsIn(text: string, known: readonly string[] = []): string[] {
  const found: string[] = [];
  const key = SECRET_KEY.exec(text);
  if (key) found.push(`a secret key (${key[0].slice(0, 8)}...)`);
  for (const card of cardNumbersIn(text)) found.push(`a card number (${card.slice(0, 6)}...${card.slice(-4)})`);
  for (const secret of known) if (secret && text.includes(secret)) found.push(`a known secret (${secret.slice(0, 3)}...)`);
  const fields: string[] = [];
  const json = parsedJson(text);
  if (json !== undefined && typeof json === "object") secretFieldsIn(json, "$", fields);
  else secretPairsIn(text, fields);
  for (const field of fields) found.push(`a secret field with a value (${field})`);
  return found;
}

/**
 * Fails (naming the row, the column and what was found, never the secret whole) when any text column of any row
 * gives a secret away. `known`: the test's credentials, which must appear nowhere.
 */
export function assertNoSecrets(rows: readonly object[], options: { known?: readonly string[] } = {}): void {
  const known = (options.known ?? []).filter((secret) => secret.length >= 6);
  const findings: string[] = [];
  rows.forEach((row, i) => {
    for (const [column, value] of Object.entries(row)) {
      if (typeof value !== "string") continue;
      for (const finding of secretsIn(value, known)) findings.push(`row ${i} (${String((row as { operation?: unknown }).operation ?? "?")}) ${column}: ${finding}`);
    }
  });
  expect(findings.length, `provider calls on record give secrets away:\n${findings.join("\n")}`).toBe(0);
}
