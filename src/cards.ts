/** The Luhn check digit test every card number passes (ISO/IEC 7812). */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/**
 * The card's network from its first digits (its IIN), as a payer recognises it on a receipt: Visa, Mastercard,
 * American Express, Verve (Nigeria's), Discover; null when none of these.
 */
export function cardBrand(digits: string): string | null {
  if (/^4/.test(digits)) return "Visa";
  if (/^(5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720)/.test(digits)) return "Mastercard";
  if (/^3[47]/.test(digits)) return "American Express";
  if (/^(506[01]|507[89]|6500)/.test(digits)) return "Verve";
  if (/^(6011|65|64[4-9])/.test(digits)) return "Discover";
  return null;
}
