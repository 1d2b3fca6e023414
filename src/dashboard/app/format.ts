/** Display helpers: amounts arrive as integers in the currency's minor unit. */

const EXPONENTS: Record<string, number> = { UGX: 0, JPY: 0, KRW: 0, XOF: 0, XAF: 0, RWF: 0 };

export function formatMoney(minor: number, currency: string): string {
  const exponent = EXPONENTS[currency] ?? 2;
  const major = minor / 10 ** exponent;
  return `${currency} ${major.toLocaleString("en-US", { minimumFractionDigits: exponent, maximumFractionDigits: exponent })}`;
}

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return date.toLocaleString("en-GB", { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

export function titleCase(value: string): string {
  return value.charAt(0).toUpperCase() + value.slice(1).replace(/_/g, " ");
}
