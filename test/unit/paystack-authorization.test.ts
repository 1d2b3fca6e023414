import { describe, expect, it } from "vitest";
import { readAuthorization } from "../../src/providers/paystack/wire.ts";

/** A paid card's `authorization` (providers.md, Recurring) read as a card Paystack can charge again. */
const AUTHORIZATION = {
  authorization_code: "AUTH_8dfhjjdt", bin: "408408", last4: "4081", exp_month: "12", exp_year: "2030", channel: "card", card_type: "visa ",
  bank: "TEST BANK", country_code: "NG", brand: "visa", reusable: true, signature: "SIG_yEXu7dLBeqG0kU7g95Ke", account_name: null,
};

describe("Paystack authorization -> saved card", () => {
  it("reads exp_month and exp_year from strings as integers, and keeps the code and signature", () => {
    expect(readAuthorization(AUTHORIZATION)).toEqual({
      token: "AUTH_8dfhjjdt", signature: "SIG_yEXu7dLBeqG0kU7g95Ke", brand: "visa", last4: "4081", expMonth: 12, expYear: 2030, bank: "TEST BANK", reusable: true,
    });
  });

  it("takes the brand from card_type, trimmed and lower-cased, when brand is missing", () => {
    const { brand: _b, ...rest } = AUTHORIZATION;
    expect(readAuthorization({ ...rest, card_type: "Mastercard " })?.brand).toBe("mastercard");
  });

  it("is reusable only when Paystack says true", () => {
    for (const reusable of [false, "true", 1, undefined]) expect(readAuthorization({ ...AUTHORIZATION, reusable })?.reusable).toBe(false);
  });

  it("is nothing without a code or a signature (an unpaid transaction's {})", () => {
    expect(readAuthorization({})).toBeNull();
    expect(readAuthorization(null)).toBeNull();
    expect(readAuthorization({ ...AUTHORIZATION, signature: undefined })).toBeNull();
  });

  it("leaves an expiry it cannot read unknown", () => {
    expect(readAuthorization({ ...AUTHORIZATION, exp_month: "ab", exp_year: null })).toMatchObject({ expMonth: null, expYear: null });
  });
});
