import { z } from "zod";
import { GatewayError, ValidationError } from "./errors.ts";
import { parseField } from "./validation.ts";

/**
 * Amounts are integers in the currency's minor unit everywhere (KES 10.00 is 1000), never floats.
 * A currency carries its ISO 4217 exponent so connectors can convert to their provider's unit.
 */
export const currencies = {
  KES: { exponent: 2 },
  NGN: { exponent: 2 },
  GHS: { exponent: 2 },
  ZAR: { exponent: 2 },
  USD: { exponent: 2 },
  TZS: { exponent: 2 },
  UGX: { exponent: 0 },
} as const;

export type CurrencyCode = keyof typeof currencies;

/** Upper bound on any amount, in minor units (10^12): far below 2^53, so JSON numbers stay exact. */
export const MAX_AMOUNT = 1_000_000_000_000;

export function isKnownCurrency(code: string): code is CurrencyCode {
  return Object.hasOwn(currencies, code);
}

/**
 * An amount as people read it: major units with the currency's code, "KES 1,500.00" (UGX, without minor units:
 * "UGX 1,500"). The one formatter of messages, pages and e-mails; integer arithmetic only.
 */
export function formatMoney(amount: bigint | number, currency: string): string {
  const value = BigInt(amount);
  const exponent = isKnownCurrency(currency) ? currencies[currency].exponent : 2;
  const sign = value < 0n ? "-" : "";
  const abs = value < 0n ? -value : value;
  if (exponent === 0) return `${sign}${currency} ${abs.toLocaleString("en-US")}`;
  const unit = 10n ** BigInt(exponent);
  return `${sign}${currency} ${(abs / unit).toLocaleString("en-US")}.${(abs % unit).toString().padStart(exponent, "0")}`;
}

const OUT_OF_RANGE = `must be between 1 and ${MAX_AMOUNT} (minor units)`;

/**
 * An amount: a positive integer in minor units, at most MAX_AMOUNT, as a bigint (GraphQL's BigInt gives one, JSON
 * a number); absent is "is required".
 */
export const amountSchema = z
  .custom<bigint | number>((value) => typeof value === "bigint" || Number.isInteger(value), {
    error: (issue) => (issue.input === undefined || issue.input === null ? "is required" : "must be an integer in the currency's minor unit (e.g. 1000 for KES 10.00)"),
  })
  .transform((value) => BigInt(value))
  .pipe(z.bigint().min(1n, OUT_OF_RANGE).max(BigInt(MAX_AMOUNT), OUT_OF_RANGE));

/** A positive integer in minor units, at most MAX_AMOUNT. */
export function parseAmount(value: unknown, field = "amount"): bigint {
  return parseField(amountSchema, value, field);
}

/** An ISO 4217 code the gateway knows and the channel's connector supports. */
export function parseCurrency(value: string, supported: readonly string[], provider: string, field = "currency"): CurrencyCode {
  const code = value.trim().toUpperCase();
  if (!/^[A-Z]{3}$/.test(code)) throw new ValidationError(field, "must be an ISO 4217 currency code such as KES");
  if (!isKnownCurrency(code) || !supported.includes(code)) {
    throw new GatewayError("unsupported_currency", `${field}: ${code} is not supported by the ${provider} payment channel (supported: ${supported.join(", ")})`, { field });
  }
  return code;
}
