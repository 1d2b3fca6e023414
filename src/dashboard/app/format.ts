/** Display helpers: amounts arrive as integers in the currency's minor unit. */

const EXPONENTS: Record<string, number> = { UGX: 0, JPY: 0, KRW: 0, XOF: 0, XAF: 0, RWF: 0 };

export function formatMoney(minor: number, currency: string): string {
  const exponent = EXPONENTS[currency] ?? 2;
  const major = minor / 10 ** exponent;
  return `${currency} ${major.toLocaleString("en-US", { minimumFractionDigits: exponent, maximumFractionDigits: exponent })}`;
}

/** An amount as a form field shows it: major units, no currency or separators ("25.00"). */
export function majorUnits(minor: number, currency: string): string {
  const exponent = EXPONENTS[currency] ?? 2;
  return (minor / 10 ** exponent).toFixed(exponent);
}

/**
 * What a person typed as an amount in major units ("25", "25.5", "1,250.00"), in minor units; null when it is
 * not a plain amount or has more decimals than the currency. Parsed as text, so no float rounding.
 */
export function parseMajorUnits(text: string, currency: string): number | null {
  const exponent = EXPONENTS[currency] ?? 2;
  const match = /^(\d{1,13})(?:\.(\d*))?$/.exec(text.trim().replace(/,/g, ""));
  if (!match || (match[2] ?? "").length > exponent) return null;
  return Number(match[1]) * 10 ** exponent + Number((match[2] ?? "").padEnd(exponent, "0") || "0");
}

/**
 * The merchant's time zone (Merchant.timezone, Brand settings), set once the viewer is known: dates and times are
 * shown in it, so a payment's day here is the day the figures and the date filters count it on. Until it is
 * known, the browser's own zone.
 */
let displayTimeZone: string | undefined;
export function setDisplayTimeZone(zone: string | null | undefined): void {
  displayTimeZone = zone || undefined;
}
export const getDisplayTimeZone = () => displayTimeZone;

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return date.toLocaleString("en-GB", { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZone: displayTimeZone });
}

/** The day (YYYY-MM-DD) of an instant in the merchant's time zone (the day the date filters count it on). */
export function localDay(iso: string, zone = displayTimeZone): string {
  return new Date(iso).toLocaleDateString("en-CA", { year: "numeric", month: "2-digit", day: "2-digit", timeZone: zone });
}

export function titleCase(value: string): string {
  return value.charAt(0).toUpperCase() + value.slice(1).replace(/_/g, " ");
}
