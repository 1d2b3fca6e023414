import type { ProviderCallSink } from "../call-record.ts";
import { connectorCurrencies } from "../registry.ts";
import type { Connector, MomoConnector } from "../types.ts";
import { createMpesaC2b } from "./c2b.ts";
import { createDarajaClient } from "./client.ts";
import { createMpesaCollections } from "./collections.ts";
import { createMpesaCredentials } from "./credentials.ts";
import { createDarajaInbound } from "./inbound.ts";
import { createMpesaPayouts } from "./payouts.ts";
import { createMpesaReconciliation } from "./reconciliation.ts";
import { createMpesaRefunds } from "./refunds.ts";
import type { TokenStore } from "./token-store.ts";
import * as wire from "./wire.ts";

export type { MpesaConfig } from "./client.ts";

export interface MpesaConnectorOptions {
  tokenStore: TokenStore;
  /** Replaces the environment's base URL for every channel (a proxy, or a loopback fake in tests). */
  baseUrlOverride?: string | undefined;
  requestTimeoutMs?: number;
  /** A certificate (or public key) PEM replacing Safaricom's for SecurityCredential encryption (tests). */
  certPath?: string | undefined;
  /** How long after a reversal or refund B2C request its result is overdue and Transaction Status is asked (REVERSAL_RESULT_OVERDUE_MS). */
  reversalResultOverdueMs?: number | undefined;
  /** Where every Daraja exchange is recorded (scrubbed); none by default. */
  recordCall?: ProviderCallSink | undefined;
}

/** M-Pesa (Daraja): one client, and each capability of the contract built on it. */
export function createMpesaConnector(options: MpesaConnectorOptions): Connector {
  const client = createDarajaClient({
    tokenStore: options.tokenStore,
    baseUrlOverride: options.baseUrlOverride,
    requestTimeoutMs: options.requestTimeoutMs,
    certPath: options.certPath,
    recordCall: options.recordCall,
  });
  const momo: MomoConnector = { ...createMpesaCollections(client), ...createMpesaC2b(client) };
  const payouts = createMpesaPayouts(client);
  return {
    provider: "mpesa",
    currencies: connectorCurrencies.mpesa,
    momo,
    payouts,
    refunds: createMpesaRefunds({ checkAfterMs: options.reversalResultOverdueMs ?? 60_000, payouts, client }),
    // Handed out as /callbacks/daraja/...: Daraja refuses "mpesa" anywhere in a callback URL, so the registry
    // name is accepted in paths but never given to Safaricom.
    inbound: createDarajaInbound({ segment: "daraja", aliases: ["daraja"], forbiddenUrlWords: wire.darajaForbiddenUrlWords, momo, payouts }),
    reconciliation: createMpesaReconciliation(client),
    credentials: createMpesaCredentials(client),
  };
}

