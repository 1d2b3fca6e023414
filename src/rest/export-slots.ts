import { Readable } from "node:stream";
import type { FastifyReply } from "fastify";
import type { Principal } from "../auth.ts";
import { GatewayError } from "../errors.ts";

/** What a refused export tells the client to wait: a full export usually takes seconds. */
export const EXPORT_RETRY_AFTER_SECONDS = 5;

export interface ExportLimits {
  /** Full CSV exports one merchant (both modes) may stream at once from one instance (EXPORTS_PER_MERCHANT). */
  perMerchant: number;
  /** Full CSV exports one instance streams at once, all merchants together (EXPORTS_PER_INSTANCE). */
  perInstance: number;
}

/**
 * The CSV reports' concurrency limit, counted in this process: each export holds a slot from before its first
 * byte until its response is over (sent in full, or the client went away), so a merchant (or everyone together)
 * cannot have more full exports streaming from an instance than the limits allow; beyond them a 429 with
 * Retry-After. An export reads a batch at a time, so the limit bounds the memory and database time they take.
 */
export function createExportSlots(limits: ExportLimits) {
  let running = 0;
  const byMerchant = new Map<number, number>();

  /** Takes a slot for one of the merchant's exports, or throws the 429; the answer frees it (once, whatever calls it). */
  function acquire(merchantId: number): () => void {
    const mine = byMerchant.get(merchantId) ?? 0;
    if (mine >= limits.perMerchant) {
      throw new GatewayError("rate_limited", `At most ${limits.perMerchant} CSV exports of a merchant run at once; retry when one has finished`, {
        retryAfterSeconds: EXPORT_RETRY_AFTER_SECONDS,
      });
    }
    if (running >= limits.perInstance) {
      throw new GatewayError("rate_limited", "Too many CSV exports are running on this server; retry shortly", { retryAfterSeconds: EXPORT_RETRY_AFTER_SECONDS });
    }
    running++;
    byMerchant.set(merchantId, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      running--;
      const left = (byMerchant.get(merchantId) ?? 1) - 1;
      if (left > 0) byMerchant.set(merchantId, left);
      else byMerchant.delete(merchantId);
    };
  }

  return {
    acquire,
    /** Exports streaming now (tests and metrics). */
    running: () => running,

    /**
     * Streams an export as a CSV attachment, holding one of the caller's slots until the response closes: sent in
     * full, failed, or cut off by the client (the stream is then destroyed, so no further batch is read).
     */
    send(reply: FastifyReply, principal: Principal, exported: { filename: string; chunks: AsyncIterable<string> }): FastifyReply {
      const release = acquire(principal.merchantId);
      reply.raw.once("close", release);
      reply
        .type("text/csv; charset=utf-8")
        .header("content-disposition", `attachment; filename="${exported.filename}"`)
        .header("cache-control", "no-store");
      return reply.send(Readable.from(exported.chunks, { objectMode: false }));
    },
  };
}

export type ExportSlots = ReturnType<typeof createExportSlots>;
