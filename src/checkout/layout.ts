import type { FastifyReply } from "fastify";
import { cspNonce } from "../security/headers.ts";
import type { Language, Messages } from "./i18n.ts";
import { format } from "./i18n.ts";

/** What the payer's two pages (checkout, payment link) share: headers, the merchant's brand, the language switch, the look. */

export const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** The merchant's look, as the page needs it (the brand service's CheckoutBrand, or just the merchant's name). */
export interface PageBrand {
  displayName: string;
  accentColor: string | null;
  logoUrl: string | null;
  supportEmail: string | null;
}

/**
 * Sends one of the payer's pages with its headers. Its inline script and style run by a nonce fresh to this
 * response (injected markup cannot run); images only from the gateway (the merchant's logo); the page cannot be
 * framed (clickjacking a payment form) and sends no Referer (its URL names the payment).
 */
export function sendPayerPage(reply: FastifyReply, status: number, render: (nonce: string) => string) {
  const nonce = cspNonce();
  reply
    .header("cache-control", "no-store")
    .header("vary", "accept-language")
    .header("x-frame-options", "DENY")
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header(
      "content-security-policy",
      `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
    );
  return reply.code(status).type("text/html; charset=utf-8").send(render(nonce));
}

/** WCAG relative luminance of `#rrggbb`. */
function luminance(hex: string): number {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/**
 * The accent colour if it is a plain `#rrggbb` that white button text (and accent links on the white page) can
 * be read on (WCAG AA, 4.5:1); otherwise the page's default. The brand settings check this too: this keeps a
 * colour from anywhere else out of the stylesheet.
 */
export function readableAccent(color: string | null | undefined): string | null {
  if (!color || !/^#[0-9a-fA-F]{6}$/.test(color)) return null;
  return 1.05 / (luminance(color) + 0.05) >= 4.5 ? color.toLowerCase() : null;
}

/** A logo path served by the gateway itself (`/...`, never `//host` or a scheme): anything else is not shown. */
const sameOriginPath = (url: string | null | undefined): url is string => !!url && /^\/(?!\/)[^\s\\]*$/.test(url);

/** The merchant's name and logo, and the switch to the other language (its link text in that language). */
export function brandHeader(brand: PageBrand, t: Messages, lang: Language, switchHref: string): string {
  const other: Language = lang === "en" ? "sw" : "en";
  const logo = sameOriginPath(brand.logoUrl)
    ? `<img class="logo" src="${escapeHtml(brand.logoUrl)}" alt="${escapeHtml(format(t.logoAlt, { name: brand.displayName }))}">`
    : "";
  return `<header class="brand">${logo}<p class="merchant">${escapeHtml(brand.displayName)}</p><a class="lang" id="lang-switch" href="${escapeHtml(switchHref)}" hreflang="${other}" lang="${other}">${escapeHtml(t.languageSwitch)}</a></header>`;
}

export function supportFooter(brand: PageBrand, t: Messages): string {
  if (!brand.supportEmail || !/^[^\s@<>"']+@[^\s@<>"']+$/.test(brand.supportEmail)) return "";
  const email = escapeHtml(brand.supportEmail);
  return `<footer class="support"><p>${escapeHtml(t.support)} <a id="support" href="mailto:${email}">${email}</a></p></footer>`;
}

/** The shared stylesheet; `accent` is already checked by readableAccent. Narrow screens first (360 px). */
export function baseCss(accent: string | null): string {
  return `:root { --accent: ${accent ?? "#047857"}; }
  * { box-sizing: border-box; }
  body { font-family: system-ui, sans-serif; max-width: 26rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; color: #1a1a1a; line-height: 1.4; overflow-wrap: anywhere; }
  .brand { display: flex; align-items: center; gap: .75rem; flex-wrap: wrap; margin-bottom: .25rem; }
  .logo { height: 48px; width: auto; max-width: 160px; object-fit: contain; }
  .merchant { color: #444; margin: 0; font-weight: 600; flex: 1 1 auto; }
  .lang { font-size: .9rem; padding: .25rem 0; }
  a { color: var(--accent); }
  h1 { font-size: 2rem; margin: .25rem 0 .5rem; } h2 { font-size: 1.25rem; margin: 1rem 0 .25rem; }
  .description { margin: 0 0 1rem; }
  label { display: block; margin: .75rem 0 .25rem; font-weight: 600; }
  input:not([type="radio"]):not([type="checkbox"]) { display: block; width: 100%; min-width: 0; padding: .6rem; font-size: 1rem; border: 1px solid #767676; border-radius: 4px; }
  input[aria-invalid="true"] { border-color: #b91c1c; }
  .row { display: flex; gap: .5rem; } .row > * { flex: 1 1 0; min-width: 0; }
  button { margin-top: 1rem; width: 100%; padding: .8rem; font-size: 1rem; background: var(--accent); color: #fff; border: 2px solid var(--accent); border-radius: 4px; cursor: pointer; }
  button.secondary { background: #fff; color: #1a1a1a; border-color: #767676; }
  button:disabled { opacity: .6; cursor: wait; }
  a:focus-visible, input:focus-visible, button:focus-visible, [tabindex="-1"]:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
  input[type="radio"]:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
  .hint { color: #555; font-size: .85rem; margin: .25rem 0 0; }
  .completed, .paid { color: #047857; } .failed { color: #b91c1c; }
  .test-ribbon { background: #c2410c; color: #fff; font-weight: 600; text-align: center; padding: .4rem; margin: -1.5rem -1rem 1rem; letter-spacing: .02em; }
  .support { margin-top: 2rem; font-size: .9rem; color: #444; }
  [hidden] { display: none !important; }`;
}
