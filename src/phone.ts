import { parsePhoneNumberFromString } from "libphonenumber-js";
import { ValidationError } from "./errors.ts";

/**
 * One phone format is stored everywhere: E.164 with its + (+254712345678). Each API renders it as its
 * resource documents: customers with the +, transactions and mobile money as 254XXXXXXXXX.
 */

/** E.164 input (+254712345678); a number without its country code is ambiguous, so the + is required. */
export function normalizePhone(value: string, field = "phone"): string {
  const trimmed = value.trim();
  const phone = trimmed.startsWith("+") ? parsePhoneNumberFromString(trimmed) : undefined;
  if (!phone?.isValid()) {
    throw new ValidationError(field, "must be an international phone number with a leading +, e.g. +254712345678");
  }
  return phone.number;
}

/** Mobile-money input as the interface documents it, 254XXXXXXXXX, stored as E.164. */
export function normalizeMsisdn(value: string | null | undefined, field = "phone_number"): string {
  if (!value) throw new ValidationError(field, "is required");
  const digits = value.trim();
  if (!/^254\d{9}$/.test(digits)) throw new ValidationError(field, "must be in the format 254XXXXXXXXX (12 digits)");
  return `+${digits}`;
}

/** The stored E.164 number as mobile-money APIs and providers write it: digits only. */
export function toMsisdn(e164: string): string;
export function toMsisdn(e164: string | null): string | null;
export function toMsisdn(e164: string | null): string | null {
  return e164 === null ? null : e164.replace(/^\+/, "");
}
