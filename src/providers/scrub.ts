/**
 * What a provider call record may not keep: secrets (passwords, keys, tokens, PINs), card numbers beyond their
 * last 4 and CVVs. Each connector builds its own scrubber from this with its field names and its channel's
 * secret values; what is removed is replaced, so a record still shows that the field was sent.
 */
export type Scrubber = (text: string) => string;

export interface ScrubRules {
  /** JSON keys (any depth, any case) whose string or number values are removed. */
  secretKeys: readonly string[];
  /** Literal values removed wherever they appear (the channel's credentials, a live token); empty ones are ignored. */
  secretValues?: readonly string[];
  /** Patterns removed wherever they appear (Paystack's sk_live_... keys). */
  secretPatterns?: readonly RegExp[];
}

export const REDACTED = "[redacted]";

/** Keys every connector treats as secret, whatever the provider: card security codes, PINs, credentials. */
export const COMMON_SECRET_KEYS = ["password", "pin", "otp", "cvv", "cvv2", "cvc", "security_code", "authorization", "access_token", "secret", "secret_key"] as const;
/** Keys whose value is a card number: kept to its last 4 digits. */
const CARD_NUMBER_KEYS = new Set(["number", "card_number", "cardnumber", "pan"]);

const normalizeKey = (key: string) => key.toLowerCase();

/** 13 to 19 digits, with single spaces or dashes between them, passing the Luhn check: a card number. */
const CARD_RUN = /\b\d(?:[ -]?\d){12,18}\b/g;

function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return sum % 10 === 0;
}

const maskCard = (digits: string) => `${"*".repeat(Math.max(0, digits.length - 4))}${digits.slice(-4)}`;

/** Card numbers inside free text, kept to their last 4 digits. */
function maskCardRuns(text: string): string {
  return text.replace(CARD_RUN, (run) => {
    const digits = run.replace(/[ -]/g, "");
    return luhnValid(digits) ? maskCard(digits) : run;
  });
}

export function createScrubber(rules: ScrubRules): Scrubber {
  const secretKeys = new Set(rules.secretKeys.map(normalizeKey));
  const values = (rules.secretValues ?? []).filter((value) => value.length > 0).sort((a, b) => b.length - a.length);

  function scrubText(text: string): string {
    let out = text;
    for (const value of values) out = out.split(value).join(REDACTED);
    for (const pattern of rules.secretPatterns ?? []) out = out.replace(new RegExp(pattern.source, pattern.flags.includes("g") ? pattern.flags : `${pattern.flags}g`), REDACTED);
    return maskCardRuns(out);
  }

  function scrubValue(value: unknown, key: string | null): unknown {
    const name = key === null ? null : normalizeKey(key);
    if (typeof value === "string" || typeof value === "number") {
      if (name !== null && secretKeys.has(name)) return REDACTED;
      if (name !== null && CARD_NUMBER_KEYS.has(name) && /^\d[\d -]{11,22}$/.test(String(value))) return maskCard(String(value).replace(/[ -]/g, ""));
      return typeof value === "string" ? scrubText(value) : value;
    }
    if (Array.isArray(value)) return value.map((item) => scrubValue(item, null));
    if (value && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubValue(v, k)]));
    }
    return value;
  }

  return (text) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return scrubText(text);
    }
    // Keys are read only in JSON; a value is also blanked as text, in case a provider echoes it in a message.
    return scrubText(JSON.stringify(scrubValue(parsed, null)));
  };
}
