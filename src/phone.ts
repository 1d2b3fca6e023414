import { parsePhoneNumberFromString } from "libphonenumber-js";
import { z } from "zod";
import { parseField, refuse } from "./validation.ts";

/**
 * The one phone normaliser. One format is stored everywhere: E.164 with its + (+254712345678), which also
 * holds a payer's or customer's number from another country. Each API renders it as its resource
 * documents: customers with the +, transactions, payouts and mobile money as 254XXXXXXXXX (toMsisdn).
 *
 * A Kenyan mobile number is accepted however Kenyans write it, wherever a phone is taken:
 * 254712345678, +254712345678, 0712345678 or 0112345678 (spaces, hyphens and brackets ignored).
 */

/** What a refusal says: the forms a Kenyan mobile number may take. */
export const KENYAN_MOBILE_FORMS = "a Kenyan mobile number: 2547XXXXXXXX, +2547XXXXXXXX, 07XXXXXXXX or 01XXXXXXXX";

/** Input descriptions for the API references (OpenAPI and GraphQL). */
export const MSISDN_INPUT_DESCRIPTION = `${KENYAN_MOBILE_FORMS[0]!.toUpperCase()}${KENYAN_MOBILE_FORMS.slice(1)}; answered as 2547XXXXXXXX.`;
export const PHONE_INPUT_DESCRIPTION = `${KENYAN_MOBILE_FORMS[0]!.toUpperCase()}${KENYAN_MOBILE_FORMS.slice(1)}, or any international number with its leading +; stored as E.164 (+254...).`;

/** Kenyan mobile numbers are 7XX XXX XXX or 1XX XXX XXX after the country code (Safaricom, Airtel, Telkom). */
const KENYAN_MOBILE = /^(?:\+?254|0)([17]\d{8})$/;

/** Separators people type inside a number (spaces, hyphens, brackets); anything else (letters, dots) is not a phone. */
const compact = (value: string) => value.trim().replace(/[\s()-]/g, "");

/** A Kenyan mobile number in any accepted form -> E.164 (+254XXXXXXXXX); null when it is not one. */
export function kenyanMobileOrNull(value: string | null | undefined): string | null {
  if (typeof value !== "string") return null;
  const match = KENYAN_MOBILE.exec(compact(value));
  return match ? `+254${match[1]}` : null;
}

/**
 * A payer's or customer's phone (initialize, customers): a Kenyan mobile number in any accepted form, or
 * any valid international number with its leading + (a card payer may be from anywhere). Stored as E.164.
 */
export function normalizePhone(value: string, field = "phone"): string {
  return parseField(phoneSchema, value, field);
}

const NOT_A_PHONE = `must be ${KENYAN_MOBILE_FORMS}, or an international number with its leading +, e.g. +447911123456`;
/** normalizePhone's rule as a schema. */
export const phoneSchema = z.string({ error: NOT_A_PHONE }).transform((value, ctx) => phoneOrNull(value) ?? refuse(ctx, NOT_A_PHONE));

/** normalizePhone's answer, or null when the text is not a phone (e.g. a search term that may be one). */
export function phoneOrNull(value: string): string | null {
  const kenyan = kenyanMobileOrNull(value);
  if (kenyan) return kenyan;
  const text = compact(value);
  const phone = text.startsWith("+") ? parsePhoneNumberFromString(text) : undefined;
  return phone?.isValid() ? phone.number : null;
}

/** A phone M-Pesa is asked to collect from or pay to (STK push, C2B simulation, payouts): Kenyan mobile only, as E.164. */
export const msisdnSchema = z
  .string({ error: (issue) => (issue.input === undefined || issue.input === null ? "is required" : `must be ${KENYAN_MOBILE_FORMS}`) })
  .transform((value, ctx) => (value.trim() ? (kenyanMobileOrNull(value) ?? refuse(ctx, `must be ${KENYAN_MOBILE_FORMS}`)) : refuse(ctx, "is required")));

/** A phone M-Pesa is asked to collect from or pay to (STK push, C2B simulation, payouts): Kenyan mobile only. Stored as E.164. */
export function normalizeMsisdn(value: string | null | undefined, field = "phone_number"): string {
  return parseField(msisdnSchema, value, field);
}

/** The stored E.164 number as mobile-money APIs and providers write it: digits only. */
export function toMsisdn(e164: string): string;
export function toMsisdn(e164: string | null): string | null;
export function toMsisdn(e164: string | null): string | null {
  return e164 === null ? null : e164.replace(/^\+/, "");
}
