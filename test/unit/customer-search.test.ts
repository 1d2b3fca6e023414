import { describe, expect, it } from "vitest";
import { indexedPart, likeTrigramSpans, likeTrigrams } from "../../src/modules/customers/search.ts";

/** The customer search's index part (src/modules/customers/search.ts), against pg_trgm's rules for ILIKE '%...%'. */
describe("the part of a search term the trigram indexes are asked for", () => {
  it("takes pg_trgm's trigrams of a wildcard pattern: words padded only where they end inside the term", () => {
    expect([...likeTrigrams("customer42000@")]).toEqual(["cus", "ust", "sto", "tom", "ome", "mer", "er4", "r42", "420", "200", "000", "00 "]);
    expect([...likeTrigrams("@Ex")]).toEqual(["  e", " ex"]);
    expect([...likeTrigrams("ab")]).toEqual([]);
    expect([...likeTrigrams("a.b")]).toEqual(["  b"]);
  });

  it("a part of the term yields exactly the trigrams whose spans lie within it", () => {
    for (const term of ["customer42000@example.test", "Wanjiru Kamau", "+254708374149", "a_b%c.d@e", "ünï.cödé@x"]) {
      const spans = likeTrigramSpans(term);
      for (let from = 0; from < term.length; from++) {
        for (let to = from + 1; to <= term.length; to++) {
          const within = new Set(spans.filter((s) => s.from >= from && s.to <= to).map((s) => s.trigram));
          expect(likeTrigrams(term.slice(from, to)), `${term}[${from}, ${to})`).toEqual(within);
        }
      }
    }
  });

  it("leaves out the common trigrams: the longest part with the most uncommon ones, else the whole term", () => {
    const common = new Set(["cus", "ust", "sto", "tom", "ome", "mer", "er4", "  e", " ex", "exa", "xam", "amp", "mpl", "ple", "le "]);
    expect(indexedPart("customer42000@", common)).toBe("r42000@");
    expect(indexedPart("customer42000@example.test", common)).toBe("r42000@");
    // Nothing common in it, or nothing but common trigrams: the term as it is.
    expect(indexedPart("wanjiru", common)).toBe("wanjiru");
    expect(indexedPart("customer", common)).toBe("customer");
    expect(indexedPart("customer42000@", new Set())).toBe("customer42000@");
    for (const term of ["customer42000@", "xcustomer9@example", "42customer"]) {
      const part = indexedPart(term, common);
      expect(term.includes(part)).toBe(true);
      if (part !== term) expect([...likeTrigrams(part)].filter((t) => common.has(t))).toEqual([]);
    }
  });
});
