import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { guardedLookup, isPublicAddress } from "../../security/url-guard.ts";

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
}

/** How much of a receiver's answer is read (and thrown away): enough to keep the connection healthy. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * POSTs one signed webhook. A 2xx within the timeout is success; anything else (3xx included:
 * redirects are not followed) is a failure to retry. Unless private addresses are allowed, the
 * address actually connected to is checked, so a name that re-resolves to an internal host after
 * the URL was accepted (DNS rebinding) is refused too.
 */
export function sendWebhook(url: string, headers: Record<string, string>, body: string, options: { timeoutMs: number; allowPrivate: boolean }): Promise<SendResult> {
  const started = performance.now();
  const done = (ok: boolean, statusCode: number | null, error: string | null): SendResult => ({
    ok,
    statusCode,
    error,
    latencyMs: Math.round(performance.now() - started),
  });
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
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
        headers: { ...headers, "content-length": Buffer.byteLength(body) },
        lookup: guardedLookup(options.allowPrivate),
        timeout: options.timeoutMs,
      },
      (res) => {
        let read = 0;
        res.on("data", (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) res.destroy();
        });
        const status = res.statusCode ?? 0;
        const finish = () => resolve(done(status >= 200 && status < 300, status, status >= 200 && status < 300 ? null : `HTTP ${status}`));
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
    req.end(body);
  });
}
