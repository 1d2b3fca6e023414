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
    for (const [text, currency] of [["", "KES"], ["abc", "KES"], ["1.234", "KES"], ["-5", "KES"], ["1e3", "KES"], ["10.5", "UGX"], [undefined, "KES"]] as const) {
      expect(() => parseMajorAmount(text, currency), String(text)).toThrow(/^amount: /);
    }
  });
});
