import { describe, expect, it } from "vitest";
import { cardBrand } from "../../src/cards.ts";

/** A receipt names the card's network from its first digits (issue 38): the ranges the networks publish. */
describe("cardBrand", () => {
  it.each([
    ["4084084084084081", "Visa"],
    ["5105105105105100", "Mastercard"],
    ["2221000000000009", "Mastercard"],
    ["2720990000000007", "Mastercard"],
    ["378282246310005", "American Express"],
    ["5061020000000000094", "Verve"],
    ["6011111111111117", "Discover"],
  ])("%s is %s", (number, brand) => expect(cardBrand(number)).toBe(brand));

  it("is null for ranges it does not know, and for what is not a Mastercard range", () => {
    expect(cardBrand("2721000000000004")).toBeNull();
    expect(cardBrand("5600000000000000")).toBeNull();
    expect(cardBrand("9999999999999995")).toBeNull();
    expect(cardBrand("")).toBeNull();
  });
});
