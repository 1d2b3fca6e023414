import type { RedisConnections } from "../infra/redis.ts";
import type { ProviderCallSink } from "./call-record.ts";
import { createMpesaConnector } from "./mpesa/index.ts";
import { createMemoryTokenStore, createRedisTokenStore } from "./mpesa/token-store.ts";
import { providerEntry, type ProviderName } from "./registry.ts";
import { createPaystackConnector } from "./paystack/index.ts";
import { createSandboxConnector } from "./sandbox/index.ts";
import type { Connector } from "./types.ts";

export type Connectors = Record<ProviderName, Connector> & {
  /**
   * The connector of a channel's own provider. `channel.provider` is a plain string column, so a row
   * naming a provider this build no longer has (or never had) gets undefined rather than a cast that
   * lies: callers already answer a missing connector or capability (a 400 or 404), never crash.
   */
  for(channel: { provider: string }): Connector | undefined;
};

export interface ConnectorOptions {
  /** Overrides the Daraja base URL of every mpesa channel. */
  mpesaBaseUrl?: string | undefined;
  sandboxStkDelayMs?: number;
  /** How long after it was made a sandbox refund settles (SANDBOX_REFUND_DELAY_MS). */
  sandboxRefundDelayMs?: number;
  /** When a sandbox dispute opens, and its verdict comes after evidence (SANDBOX_DISPUTE_DELAY_MS); its deadline (SANDBOX_DISPUTE_DUE_MS). */
  sandboxDisputeDelayMs?: number;
  sandboxDisputeDueMs?: number;
  /** Safaricom certificate override for B2C SecurityCredential encryption (MPESA_CERT_PATH). */
  mpesaCertPath?: string | undefined;
  /** Overrides https://api.paystack.co for every paystack channel (PAYSTACK_BASE_URL). */
  paystackBaseUrl?: string | undefined;
  paystackTimeoutMs?: number | undefined;
  /** How long after a Paystack refund is sent it is first asked about (PAYSTACK_REFUND_CHECK_AFTER_MS). */
  paystackRefundCheckAfterMs?: number | undefined;
  /** How long after an M-Pesa reversal or refund B2C request its result is overdue (REVERSAL_RESULT_OVERDUE_MS). */
  reversalResultOverdueMs?: number | undefined;
  /** Shares Daraja tokens across instances when set; otherwise they are cached in memory. */
  redis?: RedisConnections | undefined;
  /** Where every provider HTTP exchange is recorded, scrubbed, with the core's call scope (the provider_calls store); none by default. */
  recordCall?: ProviderCallSink | undefined;
}

/** Connectors for every provider. */
export function createConnectors(options: ConnectorOptions = {}): Connectors {
  const tokenStore = options.redis ? createRedisTokenStore(options.redis) : createMemoryTokenStore();
  const byName: Record<ProviderName, Connector> = {
    sandbox: createSandboxConnector({
      stkDelayMs: options.sandboxStkDelayMs,
      refundDelayMs: options.sandboxRefundDelayMs,
      disputeDelayMs: options.sandboxDisputeDelayMs,
      disputeDueMs: options.sandboxDisputeDueMs,
    }),
    mpesa: createMpesaConnector({ tokenStore, baseUrlOverride: options.mpesaBaseUrl, certPath: options.mpesaCertPath, reversalResultOverdueMs: options.reversalResultOverdueMs, recordCall: options.recordCall }),
    paystack: createPaystackConnector({ baseUrl: options.paystackBaseUrl, timeoutMs: options.paystackTimeoutMs, refundCheckAfterMs: options.paystackRefundCheckAfterMs, recordCall: options.recordCall }),
  };
  // Not enumerable: iterating or logging the connectors still shows only connectors.
  return Object.defineProperty(byName, "for", { value: (channel: { provider: string }) => providerEntry(byName, channel.provider) }) as Connectors;
}
