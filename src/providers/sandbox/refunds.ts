import { randomBytes } from "node:crypto";
import type { RefundConnector } from "../types.ts";

/** Payments whose refunds always fail (documented with the test cards): the card 4000 0000 0000 5126 and the STK number 254700005126. */
export const SANDBOX_REFUND_FAILS_CARD = "4000000000005126";
export const SANDBOX_REFUND_FAILS_PHONE = "+254700005126";
/** The sandbox marks a charge of the refund-failing card in its provider reference, as a real processor keeps the card. */
export const REFUND_FAILS_MARK = "sbx_norefund_";

/**
 * The sandbox's refunds: accepted at once, settled `delayMs` after they were created, as the
 * reconciler finds when it asks. Nothing is kept in memory: the answer follows from the refund itself.
 */
export function createSandboxRefunds(options: { delayMs: number }): RefundConnector {
  return {
    checkAfterMs: options.delayMs,
    method: () => ({ method: "sandbox" }),
    async send() {
      return { state: "pending", providerReference: `sbx_re_${randomBytes(8).toString("hex")}` };
    },
    async queryStatus(request) {
      if (Date.now() - request.createdAt.getTime() < options.delayMs) return { state: "pending" };
      const fails = request.payment.providerReference?.startsWith(REFUND_FAILS_MARK) || request.payment.phoneNumber === SANDBOX_REFUND_FAILS_PHONE;
      return fails
        ? { state: "failed", code: "refund_failed", message: "The sandbox fails every refund of this test payment" }
        : { state: "completed", providerReference: request.providerReference };
    },
  };
}
