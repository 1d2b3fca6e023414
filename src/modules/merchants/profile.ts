import { z } from "zod";
import type { PrismaClient } from "../../db/database.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../errors.ts";
import { isKnownCurrency, currencies } from "../../money.ts";
import { isTimeZone } from "../../days.ts";
import { createUser, hashNewPassword } from "../users/service.ts";

/**
 * The merchant's own settings (name, country, time zone, default currency, language) and `cli setup`, the first
 * merchant of a production database with its first owner. Setup makes no API key and no channel: the owner
 * signs in to the dashboard and the go-live checklist leads from there.
 */

/** Any control character (C0, DEL, C1) or a bidirectional override: a name is one line of plain text. */
const FORBIDDEN = /[\p{Cc}\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;
export const MAX_MERCHANT_NAME = 200;

export function merchantNameOf(value: string, field = "name"): string {
  const text = value.trim();
  if (text === "") throw new ValidationError(field, "is required");
  if (FORBIDDEN.test(text)) throw new ValidationError(field, "must not contain control characters (such as NUL or a line break)");
  if ([...text].length > MAX_MERCHANT_NAME) throw new ValidationError(field, `must be at most ${MAX_MERCHANT_NAME} characters`);
  return text;
}

const regions = new Intl.DisplayNames(["en"], { type: "region", fallback: "none" });

/** An ISO 3166-1 alpha-2 code the runtime can name (KE, NG, ...), upper-cased. */
export function countryOf(value: string): string {
  const code = value.trim().toUpperCase();
  if (!/^[A-Z]{2}$/.test(code) || !regions.of(code)) throw new ValidationError("country", "must be a two-letter ISO 3166 country code, e.g. KE");
  return code;
}

export function timezoneOf(value: string): string {
  const zone = value.trim();
  if (!isTimeZone(zone)) throw new ValidationError("timezone", "must be an IANA time zone name, e.g. Africa/Nairobi or UTC");
  return zone;
}

export function currencyOf(value: string): string {
  const code = value.trim().toUpperCase();
  if (!isKnownCurrency(code)) throw new ValidationError("currency", `must be one of ${Object.keys(currencies).join(", ")}`);
  return code;
}

export function languageOf(value: string): string {
  if (value !== "en" && value !== "sw") throw new ValidationError("language", "must be en (English) or sw (Swahili)");
  return value;
}

/** Where the shop is tells the likely zone: East Africa Time for Kenya, UTC elsewhere until the owner says. */
export function defaultTimezone(country: string | null | undefined): string {
  return country === "KE" ? "Africa/Nairobi" : "UTC";
}

/** The currency of a country the gateway supports, else KES (the gateway's default). */
const COUNTRY_CURRENCY: Record<string, string> = { KE: "KES", NG: "NGN", GH: "GHS", ZA: "ZAR", US: "USD", TZ: "TZS", UG: "UGX" };
export function defaultCurrency(country: string | null | undefined): string {
  return (country && COUNTRY_CURRENCY[country]) ?? "KES";
}

export interface MerchantChanges {
  name?: string | undefined;
  country?: string | undefined;
  timezone?: string | undefined;
  currency?: string | undefined;
  language?: string | undefined;
}

/** Changes the fields given (each checked); the operator's `merchant rename` and `merchant set`. */
export async function updateMerchant(prisma: PrismaClient, merchantId: number, changes: MerchantChanges) {
  const data = {
    ...(changes.name !== undefined ? { name: merchantNameOf(changes.name) } : {}),
    ...(changes.country !== undefined ? { country: countryOf(changes.country) } : {}),
    ...(changes.timezone !== undefined ? { timezone: timezoneOf(changes.timezone) } : {}),
    ...(changes.currency !== undefined ? { defaultCurrency: currencyOf(changes.currency) } : {}),
    ...(changes.language !== undefined ? { language: languageOf(changes.language) } : {}),
  };
  if (Object.keys(data).length === 0) throw new ValidationError("input", "nothing to change: give --name, --country, --timezone, --currency or --language");
  if (!(await prisma.merchant.findUnique({ where: { id: merchantId }, select: { id: true } }))) throw new NotFoundError(`Merchant ${merchantId}`);
  return prisma.merchant.update({ where: { id: merchantId }, data });
}

export interface MerchantSetup {
  name: string;
  email: string;
  country?: string | undefined;
  timezone?: string | undefined;
  currency?: string | undefined;
  password: string;
  /** Another merchant on a database that has one already (without it, setup is refused there). */
  another?: boolean | undefined;
}

const email = z.string().trim().max(254, "must be at most 254 characters").pipe(z.email("must be a valid e-mail address"));

/** The merchant and its first owner (who signs in with the same e-mail), in one database transaction. */
export async function setUpMerchant(prisma: PrismaClient, input: MerchantSetup) {
  const name = merchantNameOf(input.name);
  const parsedEmail = email.safeParse(input.email);
  if (!parsedEmail.success) throw new ValidationError("email", parsedEmail.error.issues[0]!.message);
  const contact = parsedEmail.data.toLowerCase();
  const country = input.country ? countryOf(input.country) : null;
  const timezone = timezoneOf(input.timezone ?? defaultTimezone(country));
  const currency = currencyOf(input.currency ?? defaultCurrency(country));
  const passwordHash = await hashNewPassword(input.password);
  return prisma.$transaction(async (tx) => {
    const existing = await tx.merchant.count();
    if (existing > 0 && !input.another) {
      throw new ConflictError(`This database already has ${existing === 1 ? "a merchant" : `${existing} merchants`} (npm run cli -- merchant list); to add one more, run setup again with --another`);
    }
    if (await tx.merchant.findUnique({ where: { email: contact }, select: { id: true } })) throw new ConflictError(`A merchant with e-mail ${contact} already exists`, "email");
    const merchant = await tx.merchant.create({ data: { name, email: contact, country, timezone, defaultCurrency: currency } });
    const owner = await createUser(tx, { merchantId: merchant.id, email: contact, passwordHash, role: "owner" });
    return { merchant, owner };
  });
}
