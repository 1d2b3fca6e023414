import { createHash, randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";

/**
 * Headers every response carries unless its route set its own: no MIME sniffing (a JSON answer is never
 * run as a script or page), no Referer to other sites (checkout URLs carry the payment's reference), and
 * for anything that is not one of the gateway's pages a policy that loads nothing and cannot be framed.
 */
const DEFAULTS: Record<string, string> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
};

export function registerSecurityHeaders(app: FastifyInstance): void {
  app.addHook("onSend", async (_request, reply, payload) => {
    for (const [name, value] of Object.entries(DEFAULTS)) if (!reply.hasHeader(name)) reply.header(name, value);
    return payload;
  });
}

/** A fresh CSP nonce for one response's inline script and style. */
export function cspNonce(): string {
  return randomBytes(18).toString("base64");
}

/**
 * GraphiQL's page (yoga's renderGraphiQL) is one large static document of inline scripts: they are allowed
 * by their hashes, computed once per distinct page. Its editors add style elements at run time, so styles
 * stay inline-allowed; its language workers start from blob: URLs.
 */
export function graphiqlCsp(html: string): string {
  if (cached?.html !== html) cached = { html, policy: policyFor(html) };
  return cached.policy;
}

let cached: { html: string; policy: string } | undefined;

function policyFor(html: string): string {
  const hashes = [...html.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/gi)].map(
    (match) => `'sha256-${createHash("sha256").update(match[1]!, "utf8").digest("base64")}'`,
  );
  return [
    "default-src 'self'",
    `script-src 'self' ${[...new Set(hashes)].join(" ")}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "worker-src 'self' blob:",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "form-action 'none'",
  ].join("; ");
}
