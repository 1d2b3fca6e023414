import type { ProviderCallSink } from "../call-record.ts";
import { connectorCurrencies } from "../registry.ts";
import type { Connector } from "../types.ts";
import { createPaystackClient } from "./client.ts";
import { createPaystackCollections } from "./collections.ts";
import { createPaystackCredentials } from "./credentials.ts";
import { createPaystackDisputes } from "./disputes.ts";
import { paystackInbound } from "./inbound.ts";
import { createPaystackPayouts } from "./payouts.ts";
import { createPaystackReconciliation } from "./reconciliation.ts";
import { createPaystackRefunds } from "./refunds.ts";
import { createPaystackSavedCards } from "./saved-cards.ts";

export type { PaystackConfig } from "./client.ts";

export interface PaystackConnectorOptions {
  /** Replaces https://api.paystack.co for every channel (a proxy, or a loopback fake in tests). */
  baseUrl?: string | undefined;
  timeoutMs?: number | undefined;
  /** How long after a refund is sent the reconciler first asks about it (PAYSTACK_REFUND_CHECK_AFTER_MS). */
  refundCheckAfterMs?: number | undefined;
  /** Where every Paystack exchange is recorded (scrubbed); none by default. */
  recordCall?: ProviderCallSink | undefined;
}

/** Paystack: one client, and each capability of the contract built on it. */
export function createPaystackConnector(options: PaystackConnectorOptions = {}): Connector {
  const client = createPaystackClient({ baseUrl: options.baseUrl, timeoutMs: options.timeoutMs, recordCall: options.recordCall });
  return {
    provider: "paystack",
    currencies: connectorCurrencies.paystack,
    hosted: createPaystackCollections(client),
    savedCards: createPaystackSavedCards(client),
    payouts: createPaystackPayouts(client),
    refunds: createPaystackRefunds({ client, checkAfterMs: options.refundCheckAfterMs ?? 60_000 }),
    disputes: createPaystackDisputes(client),
    inbound: paystackInbound,
    reconciliation: createPaystackReconciliation(client),
    credentials: createPaystackCredentials(client),
  };
}
