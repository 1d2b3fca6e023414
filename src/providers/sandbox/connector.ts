import { randomBytes } from "node:crypto";
import { connectorCurrencies } from "../registry.ts";
import type { Connector } from "../types.ts";
import { simulateCardCharge } from "./cards.ts";
import { createSandboxMomo } from "./momo.ts";
import { createSandboxPayouts } from "./payouts.ts";
import { createSandboxRefunds } from "./refunds.ts";

/** The built-in simulator: everything a real provider does, with no network. */
export function createSandboxConnector(options: { stkDelayMs?: number; payoutDelayMs?: number; refundDelayMs?: number } = {}): Connector {
  return {
    provider: "sandbox",
    currencies: connectorCurrencies.sandbox,
    momo: createSandboxMomo({ stkDelayMs: options.stkDelayMs ?? 2000 }),
    payouts: createSandboxPayouts({ delayMs: options.payoutDelayMs ?? options.stkDelayMs ?? 2000 }),
    refunds: createSandboxRefunds({ delayMs: options.refundDelayMs ?? 1000 }),
    async chargeCard({ card, config }) {
      const delayMs = (config as { charge_delay_ms?: number } | null)?.charge_delay_ms ?? 0;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      return simulateCardCharge(card.number, `sbx_${randomBytes(8).toString("hex")}`);
    },
  };
}
