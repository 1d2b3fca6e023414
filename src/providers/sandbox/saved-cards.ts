import { randomBytes } from "node:crypto";
import type { CardDetails, SavedCard, SavedCardConnector, SavedCardOutcome } from "../types.ts";
import { simulateCardCharge } from "./cards.ts";
import type { SandboxRecord } from "./record.ts";

/**
 * The sandbox's saved cards: its token names the test card it was (sbx_auth_<number>_<random>), so a later charge
 * decides as that card does (the decline cards decline). The card 4000 0000 0000 0341 saves on its first payment
 * but every later charge of it is declined, as a card the payer's bank stopped would be.
 */
export const SANDBOX_SAVED_DECLINES_CARD = "4000000000000341";
const TOKEN = /^sbx_auth_(\d{12,19})_[0-9a-f]+$/;

/** The card a successful sandbox payment leaves behind, chargeable again. */
export function sandboxSavedCard(card: CardDetails, brand: string): SavedCard {
  return {
    token: `sbx_auth_${card.number}_${randomBytes(8).toString("hex")}`,
    // One test card is one card, whoever pays with it: saved twice for one customer, it is one method.
    signature: `sbx_sig_${card.number}`,
    brand,
    last4: card.number.slice(-4),
    expMonth: card.expMonth,
    expYear: card.expYear,
    bank: "Sandbox Bank",
    reusable: true,
  };
}

export function createSandboxSavedCards(record: SandboxRecord): SavedCardConnector {
  /** Each charge's outcome by its reference, so a retry asks before charging again (the process's memory, like the record). */
  const charged = new Map<string, SavedCardOutcome>();
  return {
    async charge({ token, reference, amount, currency }) {
      const number = TOKEN.exec(token)?.[1];
      let outcome: SavedCardOutcome;
      if (!number) outcome = { outcome: "declined", code: "invalid_payment_method", reason: "The sandbox does not know this saved card" };
      else if (number === SANDBOX_SAVED_DECLINES_CARD) outcome = { outcome: "declined", code: "card_declined", reason: "Card declined by the issuer" };
      else {
        const simulated = simulateCardCharge(number, `sbx_${randomBytes(8).toString("hex")}`);
        outcome = simulated.outcome === "succeeded" ? { outcome: "succeeded", providerReference: simulated.providerReference } : { outcome: simulated.outcome, code: simulated.code, reason: simulated.reason };
      }
      if (outcome.outcome === "succeeded") record.approve({ providerReference: outcome.providerReference, reference, amount, currency });
      charged.set(reference, outcome);
      return outcome;
    },
    async status({ reference }) {
      return charged.get(reference) ?? { outcome: "unknown" };
    },
  };
}
