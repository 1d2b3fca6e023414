import { describe, expect, it } from "vitest";
import { catalogues, chooseLanguage, reasonText, withLang } from "../../src/checkout/i18n.ts";
import { readableAccent } from "../../src/checkout/layout.ts";
import { renderCheckoutPage, type CheckoutView } from "../../src/checkout/page.ts";

/** The payer pages' languages (issue 25): the choice, the catalogues, and what a merchant's settings can put in the page. */
describe("checkout languages", () => {
  it("chooses by ?lang= first, then Accept-Language by q-value, else English", () => {
    const cases: [unknown, string | undefined, string][] = [
      [undefined, undefined, "en"],
      [undefined, "sw", "sw"],
      [undefined, "sw-KE,sw;q=0.9,en;q=0.8", "sw"],
      [undefined, "en-KE,en;q=0.9,sw;q=0.8", "en"],
      [undefined, "fr-FR, sw;q=0.7, en;q=0.6", "sw"],
      [undefined, "en;q=0.5, sw;q=0.9", "sw"],
      [undefined, "sw;q=0, en", "en"],
      [undefined, "SW", "sw"],
      [undefined, "fr, de", "en"],
      [undefined, "sw;q=abc", "sw"], // a weight that is not a number is ignored (q=1)
      ["en", "sw", "en"],
      ["sw", "en", "sw"],
      ["fr", "sw", "sw"],
      [["sw", "en"], undefined, "en"],
    ];
    for (const [query, header, lang] of cases) expect(chooseLanguage(query, header).lang, `${String(query)} ${header}`).toBe(lang);
    expect(chooseLanguage("sw", undefined).chosen).toBe(true);
    expect(chooseLanguage(undefined, "sw").chosen).toBe(false);
    expect(withLang("/payment/checkout/abc", "sw", true)).toBe("/payment/checkout/abc?lang=sw");
    expect(withLang("/payment/checkout/abc", "sw", false)).toBe("/payment/checkout/abc");
  });

  it("Swahili has every English string, with the same placeholders, and translated", () => {
    const en = catalogues.en.messages as Record<string, string>;
    const sw = catalogues.sw.messages as Record<string, string>;
    expect(Object.keys(sw).sort()).toEqual(Object.keys(en).sort());
    const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
    for (const key of Object.keys(en)) {
      expect(sw[key], key).not.toBe("");
      expect(placeholders(sw[key]!), key).toEqual(placeholders(en[key]!));
      // Names and codes are the same in both languages; everything else is translated.
      if (!["methodMpesa", "cvc", "languageSwitch"].includes(key)) expect(sw[key], key).not.toBe(en[key]);
    }
  });

  it("a provider's reason: Swahili words for a known code, the provider's own otherwise, without a doubled full stop", () => {
    expect(reasonText("sw", "1032", "Request cancelled by user.")).toBe("ulighairi ombi la malipo kwenye simu yako");
    expect(reasonText("sw", "weird", "Something odd.")).toBe("Something odd");
    expect(reasonText("en", "1032", "Request cancelled by user.")).toBe("Request cancelled by user");
    expect(reasonText("en", null, null)).toBeNull();
  });

  it("the brand's accent is used only as a #rrggbb that white text can be read on; markup in brand fields is inert", () => {
    expect(readableAccent("#1A56DB")).toBe("#1a56db");
    expect(readableAccent("#ffff00")).toBeNull(); // yellow under white text: unreadable
    expect(readableAccent("red; } body { display: none")).toBeNull();
    expect(readableAccent(null)).toBeNull();
    const view: CheckoutView = {
      id: 1, merchantId: 1, methods: { card: true, mpesa: false }, attemptsLeft: 3, attempt: null, reference: "ref", amount: 100n, currency: "KES",
      status: "pending", description: null, merchantName: "M", acceptsCards: true, hosted: false, mode: "live", sandbox: false,
      failureCode: null, failureReason: null, returnUrl: null, saveCard: { offered: true, requested: true },
      brand: { displayName: `<img src=x onerror=alert(1)>`, accentColor: "#000000; } *{", logoUrl: "//evil.example/logo.png", supportEmail: `a@b.c"><script>` },
    };
    const html = renderCheckoutPage(view, { nonce: "n" });
    expect(html).toContain("&lt;img src=x onerror=alert(1)&gt;");
    expect(html).not.toContain("evil.example");
    expect(html).not.toContain("*{");
    expect(html).not.toContain("mailto:");
    expect(html.match(/<script/g)).toEqual(["<script"]);
  });
});
