import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Every provider call on record (issue 36): a connector's HTTP helper hands each exchange, scrubbed by the
 * connector's own scrubber, to a sink; the core says what the call belongs to by running the connector call
 * inside a scope. Providers never import modules: the sink is injected, the scope travels with the async context.
 */

/** What a provider call belongs to, set by the core around a connector call. */
export interface ProviderCallScope {
  merchantId: number;
  transactionId?: number | null;
  /** An attempt's calls name its transaction too, so a payment's calls are found by transaction alone. */
  attemptId?: number | null;
  payoutId?: number | null;
  refundId?: number | null;
}

/** One HTTP exchange with a provider, already scrubbed of secrets, PINs, passwords and card data. */
export interface ProviderCallRecord {
  /** The connector's name: "mpesa", "paystack". */
  connector: string;
  /** What the call does, in the connector's words: "stk_push", "stk_query", "b2c", "refund", "transaction_verify" ... */
  operation: string;
  method: string;
  /** The URL's path (no host, no query string). */
  path: string;
  /** null when no answer came (timeout, connection refused). */
  statusCode: number | null;
  durationMs: number;
  requestBody: string | null;
  responseBody: string | null;
  /** Why no usable answer came ("timeout", "connection refused"), else null. */
  error: string | null;
}

export type ProviderCallSink = (record: ProviderCallRecord, scope: ProviderCallScope | undefined) => void;

const scopes = new AsyncLocalStorage<ProviderCallScope>();

/** Runs a connector call so that the provider calls it makes are recorded against `scope`. */
export function withProviderCallScope<T>(scope: ProviderCallScope, call: () => Promise<T>): Promise<T> {
  return scopes.run(scope, call);
}

export function currentProviderCallScope(): ProviderCallScope | undefined {
  return scopes.getStore();
}
