import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/errors.ts";
import { kenyanMobileOrNull, normalizeMsisdn, normalizePhone, toMsisdn } from "../../src/phone.ts";

/** The one phone normaliser: every way a Kenyan writes a mobile number is one stored E.164 number. */
describe("phone normaliser", () => {
  const forms = ["254712345678", "+254712345678", "0712345678", " 0712 345 678 ", "+254 712 345 678", "0712-345-678", "(0712) 345678", "+254 (712) 345-678"];

  it.each(forms)("%j is +254712345678 for M-Pesa and for payer phones", (form) => {
    expect(normalizeMsisdn(form)).toBe("+254712345678");
    expect(normalizePhone(form)).toBe("+254712345678");
    expect(toMsisdn(normalizeMsisdn(form))).toBe("254712345678");
  });

  it.each([["0110345678", "+254110345678"], ["254110345678", "+254110345678"], ["+254110345678", "+254110345678"], ["0708374149", "+254708374149"]])(
    "01... numbers (Safaricom's newer range) too: %j",
    (form, e164) => expect(normalizeMsisdn(form)).toBe(e164),
  );

  it.each([
    "",
    "   ",
    "0808374149", // not a mobile range
    "254208374149", // a Nairobi landline: M-Pesa cannot reach it
    "071234567", // a digit short
    "07123456789", // a digit long
    "25471234567",
    "2547123456789",
    "712345678", // no prefix: refused rather than guessed
    "00254712345678",
    "+255712345678", // Tanzania
    "+447911123456",
    "07123x5678",
    "0712.345.678",
    "+254712345678\u0000",
    "\ud800",
  ])("M-Pesa refuses %j with a ValidationError naming the field", (bad) => {
    const error = (() => {
      try {
        normalizeMsisdn(bad, "phone_number");
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).field).toBe("phone_number");
    expect((error as ValidationError).message).toMatch(/^phone_number: (is required|must be a Kenyan mobile number: 2547XXXXXXXX, \+2547XXXXXXXX, 07XXXXXXXX or 01XXXXXXXX)$/);
  });

  it("a payer or customer may also have any valid international number, with its +", () => {
    expect(normalizePhone("+447911123456")).toBe("+447911123456");
    expect(normalizePhone("+2348031234567")).toBe("+2348031234567");
    expect(normalizePhone("+255 712 345 678")).toBe("+255712345678");
    expect(normalizePhone("+254202222222")).toBe("+254202222222"); // a Kenyan landline is a phone, not an M-Pesa number
  });

  it.each(["447700900123", "0808374149", "+2547", "+25471234567x", "phone", "254208374149"])("a payer phone %j is refused naming the field", (bad) => {
    expect(() => normalizePhone(bad, "phone")).toThrow(/^phone: must be a Kenyan mobile number: .* or an international number with its leading \+/);
  });

  it("reads a provider's MSISDN without throwing: null when it is masked, hashed or absent", () => {
    expect(kenyanMobileOrNull("254708374149")).toBe("+254708374149");
    expect(kenyanMobileOrNull("2547 ***** 126")).toBeNull();
    expect(kenyanMobileOrNull("e3b0c44298fc1c149afbf4c8996fb924")).toBeNull();
    expect(kenyanMobileOrNull(null)).toBeNull();
    expect(toMsisdn(null)).toBeNull();
  });
});
