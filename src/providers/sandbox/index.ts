import { randomBytes } from "node:crypto";
import { connectorCurrencies } from "../registry.ts";
import type { Connector } from "../types.ts";
import { createDarajaInbound } from "../mpesa/inbound.ts";
import { simulateCardCharge } from "./cards.ts";
import { createSandboxMomo } from "./momo.ts";
import { createSandboxPayouts } from "./payouts.ts";
import { createSandboxRecord } from "./record.ts";
import { createSandboxDisputes } from "./disputes.ts";
import { createSandboxRefunds } from "./refunds.ts";
import { createSandboxSavedCards, sandboxSavedCard } from "./saved-cards.ts";

/** The built-in simulator: everything a real provider does, with no network. */
export function createSandboxConnector(
  options: { stkDelayMs?: number; payoutDelayMs?: number; refundDelayMs?: number; disputeDelayMs?: number; disputeDueMs?: number } = {},
): Connector {
  const record = createSandboxRecord();
  const momo = createSandboxMomo({ stkDelayMs: options.stkDelayMs ?? 2000, record });
  const payouts = createSandboxPayouts({ delayMs: options.payoutDelayMs ?? options.stkDelayMs ?? 2000 });
  return {
    provider: "sandbox",
    currencies: connectorCurrencies.sandbox,
    momo,
    payouts,
    refunds: createSandboxRefunds({ delayMs: options.refundDelayMs ?? 1000 }),
    disputes: createSandboxDisputes({ delayMs: options.disputeDelayMs ?? 2000, dueMs: options.disputeDueMs ?? 48 * 3_600_000 }),
    // The simulator speaks Daraja's callback format; its own results are delivered in process, but a
    // callback posted over HTTP (at /callbacks/sandbox/..., or /callbacks/daraja/... as before) is read the same way.
    inbound: createDarajaInbound({ segment: "sandbox", aliases: ["daraja"], forbiddenUrlWords: [], momo, payouts }),
    reconciliation: record.reconciliation,
    savedCards: createSandboxSavedCards(record),
    async chargeCard({ card, config, reference, amount, currency }) {
      const delayMs = (config as { charge_delay_ms?: number } | null)?.charge_delay_ms ?? 0;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      const outcome = simulateCardCharge(card.number, `sbx_${randomBytes(8).toString("hex")}`);
      if (outcome.outcome !== "succeeded") return outcome;
      record.approve({ providerReference: outcome.providerReference, reference, amount, currency });
      return { ...outcome, saved: sandboxSavedCard(card, outcome.brand) };
    },
  };
}
