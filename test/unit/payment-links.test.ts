import { describe, expect, it } from "vitest";
import { parseMajorAmount } from "../../src/checkout/payment-link.ts";
import { newSlug, SLUG_LENGTH } from "../../src/modules/payment-links/service.ts";

describe("payment link slugs", () => {
  it("are 24 base62 characters, different every time, with every character in use", () => {
    const slugs = Array.from({ length: 2000 }, newSlug);
    for (const slug of slugs) expect(slug).toMatch(new RegExp(`^[0-9A-Za-z]{${SLUG_LENGTH}}$`));
    expect(new Set(slugs).size).toBe(slugs.length);
    expect(new Set(slugs.join("")).size).toBe(62);
  });
});

describe("the amount a payer types on an open link", () => {
  it("is read exactly in the currency's minor unit", () => {
    expect(parseMajorAmount("1500", "KES")).toBe(150000n);
    expect(parseMajorAmount(" 1,500.5 ", "KES")).toBe(150050n);
    expect(parseMajorAmount("0.07", "KES")).toBe(7n);
    expect(parseMajorAmount("999999999999.99", "KES")).toBe(99999999999999n);
    expect(parseMajorAmount("2500", "UGX")).toBe(2500n);
  });

  it("refuses what is not a plain amount, naming the field", () => {
    for (const [text, currency] of [["", "KES"], ["abc", "KES"], ["1.234", "KES"], ["-5", "KES"], ["1e3", "KES"], ["10.5", "UGX"], [undefined, "KES"], ["1 500", "KES"], ["1,500.", "KES"], [".5", "KES"]] as const) {
      expect(() => parseMajorAmount(text, currency), String(text)).toThrow(/^amount: /);
    }
  });

  it("reads a comma only as a thousands separator, as the pages write amounts in English and Swahili", () => {
    expect(parseMajorAmount("1,500", "KES")).toBe(150000n);
    expect(parseMajorAmount("1,500.50", "KES")).toBe(150050n);
    expect(parseMajorAmount("12,345,678.90", "KES")).toBe(1234567890n);
    expect(parseMajorAmount("999,999,999,999.99", "KES")).toBe(99999999999999n);
    expect(parseMajorAmount("2,500", "UGX")).toBe(2500n);
    // A decimal comma (or a comma between anything but groups of three) is refused, never read as thousands: 1,50 is not 150.00.
    for (const [text, currency] of [["1,50", "KES"], ["1,5", "KES"], ["1.500,50", "KES"], ["12,34.5", "KES"], [",500", "KES"], ["1,500,", "KES"], ["1,,500", "KES"], ["1,5000", "KES"], ["10,5", "UGX"]] as const) {
      expect(() => parseMajorAmount(text, currency), text).toThrow("amount: use a point for decimals and commas only between groups of three digits, e.g. ");
    }
    expect(() => parseMajorAmount("1,50", "KES")).toThrow("e.g. 1,500.50");
    expect(() => parseMajorAmount("1,000,000,000,000", "KES")).toThrow("amount: enter a number such as 150.00");
  });
});
