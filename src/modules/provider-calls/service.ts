import type { PrismaClient, Reader } from "../../db/database.ts";
import type { Logger } from "../../logger.ts";
import type { ProviderCallRecord, ProviderCallScope, ProviderCallSink } from "../../providers/call-record.ts";
import * as store from "./store.ts";

/** A body is kept up to this many bytes of UTF-8: enough for any provider's JSON answer, bounded for a noisy one. */
export const BODY_LIMIT_BYTES = 16 * 1024;
const TRUNCATED = "…[truncated]";
/** Rows per insert statement, and the longest a record waits for its batch. */
const BATCH_SIZE = 100;
const FLUSH_AFTER_MS = 250;
/**
 * Records waiting beyond this (the database is down or far behind) are dropped and counted, never allowed to grow
 * the heap: the record is for support, the payment does not wait on it.
 */
const MAX_WAITING = 10_000;

const encoder = new TextEncoder();

/**
 * At most BODY_LIMIT_BYTES of UTF-8, cut at a character boundary, marked when cut; without NUL characters, which
 * PostgreSQL's text refuses (one in a provider's answer would otherwise lose its whole batch).
 */
export function boundedBody(body: string | null): string | null {
  if (body === null) return null;
  const text = withoutNul(body);
  // Three bytes per UTF-16 unit at most: a body this short is within the limit without encoding it.
  if (text.length * 3 <= BODY_LIMIT_BYTES || Buffer.byteLength(text) <= BODY_LIMIT_BYTES) return text;
  const room = new Uint8Array(BODY_LIMIT_BYTES - Buffer.byteLength(TRUNCATED));
  const { read } = encoder.encodeInto(text, room);
  return read === text.length ? text : text.slice(0, read) + TRUNCATED;
}

const withoutNul = (text: string) => (text.includes("\0") ? text.replaceAll("\0", "") : text);
/** An INTEGER column's range, so an odd number cannot fail the batch it is in. */
const int32 = (n: number) => Math.min(2_147_483_647, Math.max(0, Math.round(n)));

export interface ProviderCallSinkDeps {
  prisma: PrismaClient;
  logger: Logger;
}

/**
 * The far end of the connectors' HTTP helper: `record` only appends to a buffer (the provider call's caller never
 * waits on the database), and batches are written one at a time, when BATCH_SIZE records are waiting or
 * FLUSH_AFTER_MS after the first one. A failed write is logged and its batch dropped; nothing is thrown back.
 *
 * A record without a scope is dropped: it names no merchant, and every reader (a transaction's, refund's or
 * payout's page) reads by merchant and object, so nobody could ever be shown it.
 */
export function createProviderCallSink(deps: ProviderCallSinkDeps) {
  const { prisma, logger } = deps;
  let waiting: store.ProviderCallRow[] = [];
  let timer: NodeJS.Timeout | undefined;
  let dropped = 0;
  /** The write in progress (batches are written in order, one at a time). */
  let writing: Promise<void> = Promise.resolve();

  const record: ProviderCallSink = (call: ProviderCallRecord, scope: ProviderCallScope | undefined) => {
    if (!scope) return;
    if (waiting.length >= MAX_WAITING) {
      dropped++;
      return;
    }
    waiting.push(rowOf(call, scope));
    if (waiting.length >= BATCH_SIZE) void flush();
    else timer ??= setTimeout(() => void flush(), FLUSH_AFTER_MS).unref();
  };

  /** Writes what is waiting; resolves once everything recorded before the call is written (or its failure logged). */
  function flush(): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    if (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      const lost = dropped;
      dropped = 0;
      writing = writing.then(async () => {
        if (lost > 0) logger.warn({ dropped: lost }, "provider calls not recorded: too many were waiting to be written");
        try {
          await store.insertProviderCalls(prisma, batch);
        } catch (error) {
          logger.warn({ err: error, records: batch.length }, "provider calls not recorded: the write failed");
        }
      });
    }
    return writing;
  }

  return { record, flush };
}

export type ProviderCallRecorder = ReturnType<typeof createProviderCallSink>;

function rowOf(call: ProviderCallRecord, scope: ProviderCallScope): store.ProviderCallRow {
  return {
    merchantId: scope.merchantId,
    connector: withoutNul(call.connector),
    operation: withoutNul(call.operation),
    method: withoutNul(call.method),
    path: boundedBody(call.path)!,
    statusCode: call.statusCode === null ? null : int32(call.statusCode),
    durationMs: int32(call.durationMs),
    requestBody: boundedBody(call.requestBody),
    responseBody: boundedBody(call.responseBody),
    error: call.error === null ? null : boundedBody(call.error),
    transactionId: scope.transactionId ?? null,
    attemptId: scope.attemptId ?? null,
    payoutId: scope.payoutId ?? null,
    refundId: scope.refundId ?? null,
    createdAt: new Date(),
  };
}

export interface ProviderCallServiceDeps extends ProviderCallSinkDeps {
  /** Where the pages read (a replica when there is one). */
  read: Reader;
}

/** The sink, and the reads of the transaction, refund and payout pages (given an object the caller may see). */
export function createProviderCallService(deps: ProviderCallServiceDeps) {
  const sink = createProviderCallSink(deps);
  const db = deps.read.prisma;
  return {
    record: sink.record,
    flush: sink.flush,
    ofTransaction: (merchantId: number, transactionId: number) => store.transactionCalls(db, merchantId, transactionId),
    ofRefund: (merchantId: number, refundId: number) => store.refundCalls(db, merchantId, refundId),
    ofPayout: (merchantId: number, payoutId: number) => store.payoutCalls(db, merchantId, payoutId),
  };
}

export type ProviderCallService = ReturnType<typeof createProviderCallService>;
