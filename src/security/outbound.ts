import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { checkOutboundUrl, guardedLookup, isPublicAddress } from "./url-guard.ts";

/**
 * Every HTTP call the gateway makes to a URL a merchant gave it (webhook endpoints, M-Pesa C2B
 * confirmation and validation URLs) goes through here: checked by the URL guard when saved, and
 * again at connect time, with redirects never followed.
 */

export interface OutboundResult {
  /** A 2xx answer arrived within the timeout. */
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  /** The answer's body as text (at most MAX_RESPONSE_BYTES of it, or the caller's smaller bound); "" when there was none. */
  body: string;
  /** The answer's headers (lower-case names, repeated ones joined with ", "); empty when there was no answer. */
  headers: Record<string, string>;
}

/** How much of a receiver's answer is read: enough for a validation verdict and to keep the connection healthy. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * POSTs one body. A 2xx within the timeout is success; anything else (3xx included: a redirect is
 * not followed, so it cannot lead the gateway to an address the guard never saw) is a failure.
 * Unless private addresses are allowed, the address actually connected to is checked, so a name
 * that re-resolves to an internal host after the URL was accepted (DNS rebinding) is refused too.
 */
export function postOutbound(
  url: string,
  options: { headers: Record<string, string>; body: string; timeoutMs: number; allowPrivate: boolean; maxResponseBytes?: number },
): Promise<OutboundResult> {
  const started = performance.now();
  const maxBytes = Math.min(options.maxResponseBytes ?? MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES);
  const done = (ok: boolean, statusCode: number | null, error: string | null, body = "", headers: Record<string, string> = {}): OutboundResult => ({
    ok,
    statusCode,
    error,
    latencyMs: Math.round(performance.now() - started),
    body,
    headers,
  });
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      resolve(done(false, null, "invalid URL"));
      return;
    }
    if (target.protocol !== "http:" && target.protocol !== "https:") {
      resolve(done(false, null, "invalid URL"));
      return;
    }
    const host = target.hostname.replace(/^\[|\]$/g, "");
    // Node skips `lookup` for IP literals, so those are checked here.
    if (!options.allowPrivate && isIP(host) && !isPublicAddress(host)) {
      resolve(done(false, null, "address not allowed"));
      return;
    }
    const send = target.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(
      target,
      {
        method: "POST",
        headers: { ...options.headers, "content-length": Buffer.byteLength(options.body) },
        lookup: guardedLookup(options.allowPrivate),
        timeout: options.timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let read = 0;
        res.on("data", (chunk: Buffer) => {
          // Keep up to the bound, then stop reading: the status already decided the outcome.
          if (read < maxBytes) chunks.push(chunk.subarray(0, maxBytes - read));
          read += chunk.length;
          if (read >= maxBytes) res.destroy();
        });
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
        const finish = () => resolve(done(ok, status, ok ? null : `HTTP ${status}`, Buffer.concat(chunks).toString("utf8"), headers));
        res.on("end", finish);
        res.on("close", finish);
        res.on("error", finish);
      },
    );
    // One deadline for the whole exchange, not just idle sockets.
    const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)), options.timeoutMs);
    req.on("close", () => clearTimeout(deadline));
    req.on("timeout", () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)));
    req.on("error", (error: NodeJS.ErrnoException) => resolve(done(false, null, error.code === "EADDRNOTALLOWED" ? "address not allowed" : error.message)));
    req.end(options.body);
  });
}

/**
 * The one rule for merchant URLs, by mode: https in live mode; loopback and private networks only in
 * test mode, with ALLOW_PRIVATE_URLS (or its older name WEBHOOK_ALLOW_PRIVATE_URLS) for every URL, or for one
 * URL whose owner allowed it (`allowLocal`: a webhook endpoint's "Allow local URLs", checked again at each send).
 */
export function createMerchantUrls(options: { allowPrivateUrls: boolean }) {
  const allowPrivate = (mode: "test" | "live", allowLocal = false) => mode === "test" && (options.allowPrivateUrls || allowLocal);
  return {
    allowPrivate,
    /** Validates a URL when it is saved; answers it normalised. Refusals name `field`. */
    async check(mode: "test" | "live", raw: string, field = "url", local: { allowed: boolean; hint?: string } = { allowed: false }): Promise<string> {
      const url = await checkOutboundUrl(raw, {
        requireHttps: mode === "live",
        allowPrivate: allowPrivate(mode, local.allowed),
        field,
        suggestSetting: mode === "test",
        ...(local.hint ? { hint: local.hint } : {}),
      });
      return url.toString();
    },
    /** POSTs a body (already serialised: webhooks sign these exact bytes) to a saved URL, re-checking the address at connect time. */
    post(mode: "test" | "live", url: string, body: string, timeoutMs: number, headers: Record<string, string>, allowLocal = false, maxResponseBytes?: number): Promise<OutboundResult> {
      // A live URL saved over http before https was required for it is not called in clear text either.
      if (mode === "live" && !url.startsWith("https:")) return Promise.resolve({ ok: false, statusCode: null, error: "https is required in live mode", latencyMs: 0, body: "", headers: {} });
      return postOutbound(url, { headers, body, timeoutMs, allowPrivate: allowPrivate(mode, allowLocal), maxResponseBytes });
    },
    /** POSTs JSON to a saved URL (C2B forwards and validations). */
    postJson(mode: "test" | "live", url: string, body: unknown, timeoutMs: number): Promise<OutboundResult> {
      return this.post(mode, url, JSON.stringify(body), timeoutMs, { "content-type": "application/json" });
    },
  };
}

export type MerchantUrls = ReturnType<typeof createMerchantUrls>;
