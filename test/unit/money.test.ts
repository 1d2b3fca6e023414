import { describe, expect, it } from "vitest";
import { formatAmount } from "../../src/checkout/page.ts";
import { ValidationError } from "../../src/errors.ts";
import { currencies, formatMoney, isKnownCurrency, MAX_AMOUNT, parseAmount, parseCurrency } from "../../src/money.ts";
import { MAX_B2C_SHILLINGS, MAX_STK_SHILLINGS, MIN_B2C_SHILLINGS, shillingsToMinor, toB2cShillings, toWholeShillings } from "../../src/providers/mpesa/wire.ts";
import { createPaystackConnector } from "../../src/providers/paystack/index.ts";
import { connectorCurrencies } from "../../src/providers/registry.ts";
import { refusal } from "../support/refusal.ts";

/** Amounts are integers in the currency's minor unit; each connector converts and refuses what it cannot send. */


describe("currencies", () => {
  it("carry their ISO 4217 exponent: shillings, naira, cedis, rand, dollars have cents; the Uganda shilling has none", () => {
    expect(currencies.KES.exponent).toBe(2);
    expect(currencies.NGN.exponent).toBe(2);
    expect(currencies.GHS.exponent).toBe(2);
    expect(currencies.ZAR.exponent).toBe(2);
    expect(currencies.USD.exponent).toBe(2);
    expect(currencies.TZS.exponent).toBe(2);
    expect(currencies.UGX.exponent).toBe(0);
  });

  it.each(["KES", "UGX"])("%s is known", (code) => expect(isKnownCurrency(code)).toBe(true));

  it.each(["kes", "EUR", "", "toString", "constructor", "__proto__", "hasOwnProperty"])("%j is not (no prototype keys)", (code) => {
    expect(isKnownCurrency(code)).toBe(false);
  });

  it("every currency a connector offers is one the gateway knows", () => {
    for (const list of Object.values(connectorCurrencies)) for (const code of list) expect(isKnownCurrency(code), code).toBe(true);
  });
});

describe("parseAmount (minor units)", () => {
  it.each([
    [1, 1n],
    [1000, 1000n],
    [150_000, 150_000n],
    [MAX_AMOUNT, 1_000_000_000_000n],
    [1n, 1n],
    [10n ** 12n, 1_000_000_000_000n],
  ])("%s is %s", (input, expected) => {
    expect(parseAmount(input)).toBe(expected);
  });

  it("MAX_AMOUNT is 10^12 and stays exact as a JSON number", () => {
    expect(MAX_AMOUNT).toBe(10 ** 12);
    expect(Number.isSafeInteger(MAX_AMOUNT * 10)).toBe(true);
  });

  it.each([undefined, null])("%s is refused as required", (input) => {
    const error = refusal(() => parseAmount(input));
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.field).toBe("amount");
    expect(error.message).toBe("amount: is required");
  });

  it.each([0, -1, MAX_AMOUNT + 1, 0n, -5n, 10n ** 12n + 1n])("%s is out of bounds", (input) => {
    const error = refusal(() => parseAmount(input));
    expect(error.code).toBe("validation_failed");
    expect(error.field).toBe("amount");
    expect(error.message).toBe(`amount: must be between 1 and ${MAX_AMOUNT} (minor units)`);
  });

  it.each([10.5, 0.01, Number.NaN, Number.POSITIVE_INFINITY, "1000", "10.00", true, {}, [1000]])("%j is not an integer of minor units", (input) => {
    const error = refusal(() => parseAmount(input));
    expect(error.field).toBe("amount");
    expect(error.message).toMatch(/^amount: must be an integer in the currency's minor unit/);
  });

  it("names the field it was given", () => {
    const error = refusal(() => parseAmount(0, "items[2].amount"));
    expect(error.field).toBe("items[2].amount");
    expect(error.message).toMatch(/^items\[2\]\.amount: /);
  });
});

describe("parseCurrency", () => {
  it.each([
    ["KES", "KES"],
    [" kes ", "KES"],
    ["Ngn", "NGN"],
  ])("%j is %s", (input, code) => {
    expect(parseCurrency(input, connectorCurrencies.paystack, "paystack")).toBe(code);
  });

  it.each(["KE", "KESS", "K3S", "", "   ", "K-S"])("%j is not an ISO 4217 code", (input) => {
    const error = refusal(() => parseCurrency(input, ["KES"], "mpesa"));
    expect(error.code).toBe("validation_failed");
    expect(error.field).toBe("currency");
    expect(error.message).toBe("currency: must be an ISO 4217 currency code such as KES");
  });

  it("refuses a known currency the channel's connector does not support, naming both and listing what it does", () => {
    const error = refusal(() => parseCurrency("ngn", connectorCurrencies.mpesa, "mpesa"));
    expect(error.code).toBe("unsupported_currency");
    expect(error.status).toBe(400);
    expect(error.field).toBe("currency");
    expect(error.message).toBe("currency: NGN is not supported by the mpesa payment channel (supported: KES)");
  });

  it("refuses a currency the gateway does not know even when a list names it", () => {
    const error = refusal(() => parseCurrency("EUR", ["EUR", "KES"], "sandbox"));
    expect(error.code).toBe("unsupported_currency");
    expect(error.message).toMatch(/^currency: EUR is not supported/);
  });
});

describe("formatAmount (checkout page)", () => {
  it.each([
    [150_000n, "KES", "KES 1,500.00"],
    [5n, "KES", "KES 0.05"],
    [1n, "USD", "USD 0.01"],
    [100n, "NGN", "NGN 1.00"],
    [15_000n, "UGX", "UGX 15,000"],
    [999_999_999_999n, "KES", "KES 9,999,999,999.99"],
    [1_000_000_000_000n, "ZAR", "ZAR 10,000,000,000.00"],
    [250n, "XYZ", "XYZ 2.50"], // unknown currency: two decimals
  ])("%s %s shows as %j", (amount, currency, shown) => {
    expect(formatAmount(amount, currency)).toBe(shown);
  });
});

describe("M-Pesa collections: minor units -> whole shillings (KES 1 to 250,000)", () => {
  it.each([
    [100n, 1],
    [1000n, 10],
    [150_000n, 1500],
    [25_000_000n, 250_000],
  ])("%s minor units are %s shillings", (amount, shillings) => {
    expect(toWholeShillings(amount, "KES")).toBe(shillings);
  });

  it("bounds are KES 1 and KES 250,000", () => {
    expect(MAX_STK_SHILLINGS).toBe(250_000);
  });

  it.each([150n, 99n, 1n, 100_050n, 25_000_001n])("%s minor units (a fraction of a shilling) are refused, not rounded", (amount) => {
    const error = refusal(() => toWholeShillings(amount, "KES"));
    expect(error.code).toBe("validation_failed");
    expect(error.field).toBe("amount");
    expect(error.message).toBe(`amount: must be a whole number of shillings for M-Pesa: ${formatMoney(amount, "KES")} has cents (in minor units a multiple of 100: 150000 is KES 1,500.00)`);
  });

  it.each([0n, -100n, 25_000_100n, 100_000_000n])("%s minor units are outside KES 1..250,000", (amount) => {
    const error = refusal(() => toWholeShillings(amount, "KES"));
    expect(error.field).toBe("amount");
    expect(error.message).toBe(`amount: must be between KES 1.00 and KES 250,000.00 for M-Pesa, not ${formatMoney(amount, "KES")}`);
  });

  it.each(["USD", "UGX", "kes", ""])("currency %j is refused before the amount is looked at", (currency) => {
    const error = refusal(() => toWholeShillings(150n, currency));
    expect(error.field).toBe("currency");
    expect(error.message).toBe("currency: M-Pesa collects only KES");
  });

  it("names the field it was given", () => {
    expect(refusal(() => toWholeShillings(50n, "KES", "lines[0].amount")).field).toBe("lines[0].amount");
  });
});

describe("M-Pesa payouts (B2C): KES 10 to 250,000, whole shillings", () => {
  it("bounds are KES 10 and KES 250,000", () => {
    expect([MIN_B2C_SHILLINGS, MAX_B2C_SHILLINGS]).toEqual([10, 250_000]);
  });

  it.each([
    [1000n, 10],
    [25_000_000n, 250_000],
    [123_400n, 1234],
  ])("%s minor units are %s shillings", (amount, shillings) => {
    expect(toB2cShillings(amount, "KES")).toBe(shillings);
  });

  it.each([100n, 900n, 0n, 25_000_100n])("%s minor units are outside KES 10..250,000", (amount) => {
    const error = refusal(() => toB2cShillings(amount, "KES"));
    expect(error.field).toBe("amount");
    expect(error.message).toBe(`amount: must be between KES 10.00 and KES 250,000.00 for an M-Pesa payout, not ${formatMoney(amount, "KES")}`);
  });

  it("a fraction of a shilling is refused", () => {
    expect(refusal(() => toB2cShillings(1050n, "KES")).message).toMatch(/^amount: must be a whole number of shillings/);
  });

  it("pays out only KES", () => {
    const error = refusal(() => toB2cShillings(1000n, "NGN"));
    expect(error.field).toBe("currency");
    expect(error.message).toBe("currency: M-Pesa pays out only KES");
  });
});

describe("Daraja's shilling amounts -> minor units", () => {
  it.each([
    [1, 100n],
    [1.0, 100n],
    [10.55, 1055n],
    [0.1 + 0.2, 30n], // binary floating noise below a cent is not a fraction of a cent
    [250_000, 25_000_000n],
    [0, 0n],
    ["5.00", 500n],
    ["5", 500n],
    ["5.5", 550n],
    ["0.01", 1n],
    [" 7.25 ", 725n],
    ["123456789012", 12_345_678_901_200n],
  ])("%j is %s", (value, minor) => {
    expect(shillingsToMinor(value)).toBe(minor);
  });

  it.each([10.555, "10.555", -1, "-1", "1e3", "1,000.00", ".50", "5.", "1234567890123", "", "abc", Number.NaN, Number.POSITIVE_INFINITY, null, undefined, true, {}, ["5.00"]])(
    "%j is not an amount",
    (value) => {
      expect(shillingsToMinor(value)).toBeNull();
    },
  );
});

describe("Paystack amounts (subunits, as JSON numbers)", () => {
  const paystack = createPaystackConnector();

  it("takes any amount a JSON number holds exactly, in any currency it supports", () => {
    expect(paystack.hosted!.checkPayment({ amount: BigInt(Number.MAX_SAFE_INTEGER), currency: "NGN" })).toBeUndefined();
  });

  it("refuses an amount beyond 2^53 - 1", () => {
    const error = refusal(() => paystack.hosted!.checkPayment({ amount: BigInt(Number.MAX_SAFE_INTEGER) + 1n, currency: "NGN" }));
    expect(error.field).toBe("amount");
    expect(error.message).toBe("amount: is larger than Paystack accepts");
  });

  it("transfers (to M-Pesa numbers) take whole shillings in KES", () => {
    expect(paystack.payouts!.checkAmount(150_000n, "KES")).toBeUndefined();
    const fraction = refusal(() => paystack.payouts!.checkAmount(150_050n, "KES"));
    expect(fraction.field).toBe("amount");
    expect(fraction.message).toBe("amount: must be whole shillings (a multiple of 100) for an M-Pesa transfer");
    const currency = refusal(() => paystack.payouts!.checkAmount(150_000n, "NGN"));
    expect(currency.field).toBe("currency");
    expect(currency.message).toBe("currency: must be KES: Paystack payouts go to M-Pesa numbers");
  });
});

describe("formatMoney: major units with the code", () => {
  it.each([
    [30_000n, "KES", "KES 300.00"],
    [150_050n, "KES", "KES 1,500.50"],
    [5n, "KES", "KES 0.05"],
    [-250n, "KES", "-KES 2.50"],
    [1500n, "UGX", "UGX 1,500"],
    [0n, "USD", "USD 0.00"],
  ])("%s %s is %s", (amount, currency, shown) => {
    expect(formatMoney(amount, currency)).toBe(shown);
  });
});
