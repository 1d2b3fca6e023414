/**
 * The sandbox connector's card simulator: no network, outcomes decided by documented test cards
 * (listed in docs/card-payments.md), so the checkout page and the tests can complete or fail transactions.
 */
import { GatewayError } from "../../errors.ts";
import type { CardOutcome } from "../types.ts";
import { DISPUTE_MARK, SANDBOX_DISPUTE_CARD } from "./disputes.ts";
import { REFUND_FAILS_MARK, SANDBOX_REFUND_FAILS_CARD } from "./refunds.ts";

export const sandboxTestCards: Record<
  string,
  { outcome: "succeeded" } | { outcome: "unavailable" } | { outcome: "declined" | "failed"; code: string; reason: string }
> = {
  "4084084084084081": { outcome: "succeeded" },
  "4242424242424242": { outcome: "succeeded" },
  "5555555555554444": { outcome: "succeeded" },
  // Pays, but every refund of the payment fails (refunds.ts).
  [SANDBOX_REFUND_FAILS_CARD]: { outcome: "succeeded" },
  // Pays, then the payer disputes it (disputes.ts).
  [SANDBOX_DISPUTE_CARD]: { outcome: "succeeded" },
  // Pays and saves; every later charge of the saved card is declined (saved-cards.ts).
  "4000000000000341": { outcome: "succeeded" },
  "4000000000000002": { outcome: "declined", code: "card_declined", reason: "Card declined by the issuer" },
  "4000000000009995": { outcome: "declined", code: "insufficient_funds", reason: "Insufficient funds" },
  "4000000000000069": { outcome: "declined", code: "expired_card", reason: "Card expired" },
  "4000000000000119": { outcome: "failed", code: "processing_error", reason: "The card could not be processed" },
  // No outcome at all, as when the card provider cannot be reached: the charge throws.
  "4000000000005035": { outcome: "unavailable" },
};

function brandOf(number: string): string {
  if (number.startsWith("4")) return "visa";
  if (/^5[1-5]/.test(number)) return "mastercard";
  return "card";
}

/** Decides a sandbox charge. The number must already be validated (digits, Luhn). Throws for the "unavailable" card. */
export function simulateCardCharge(number: string, providerReference: string): CardOutcome {
  const last4 = number.slice(-4);
  const brand = brandOf(number);
  const known = sandboxTestCards[number];
  if (!known) {
    return { outcome: "declined", code: "test_card_unknown", reason: "The sandbox accepts only the documented test cards", last4, brand };
  }
  if (known.outcome === "unavailable") throw new GatewayError("provider_unavailable", "The sandbox card processor is unavailable (test card)");
  if (known.outcome !== "succeeded") return { ...known, last4, brand };
  const mark = number === SANDBOX_REFUND_FAILS_CARD ? REFUND_FAILS_MARK : number === SANDBOX_DISPUTE_CARD ? DISPUTE_MARK : null;
  const reference = mark ? providerReference.replace(/^sbx_/, mark) : providerReference;
  return { outcome: "succeeded", providerReference: reference, last4, brand };
}
