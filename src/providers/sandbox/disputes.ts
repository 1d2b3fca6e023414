import { randomBytes } from "node:crypto";
import type { DisputeConnector, DisputeQuery, DisputedPayment, ProviderDispute } from "../types.ts";

/** The test card whose payments are disputed (documented with the test cards): it pays, then the payer's bank disputes it. */
export const SANDBOX_DISPUTE_CARD = "4000000000000259";
/** The sandbox marks a charge of the disputing card in its provider reference, as a real processor keeps the card. */
export const DISPUTE_MARK = "sbx_dispute_";
/** Evidence whose service details contain this wins; any other evidence loses. */
export const WINNING_EVIDENCE = "winning_evidence";

/**
 * The sandbox's chargebacks. Nothing is kept in memory: like its refunds, every answer follows from what the gateway
 * recorded and the time. A payment of the disputing card is disputed `delayMs` after it completed, for its whole
 * amount, due `dueMs` later; evidence is decided `delayMs` after it was submitted (won when its service details say
 * `winning_evidence`); an accepted dispute is lost at once, and one left unanswered past its deadline is lost.
 */
export function createSandboxDisputes(options: { delayMs: number; dueMs: number }): DisputeConnector {
  const disputed = (payment: DisputedPayment) => payment.providerReference?.startsWith(DISPUTE_MARK) === true && payment.completedAt !== null;
  const openedAt = (payment: DisputedPayment) => new Date(payment.completedAt!.getTime() + options.delayMs);

  function record(providerReference: string, payment: DisputedPayment, query: Pick<DisputeQuery, "submitted" | "acceptedAt"> | null): ProviderDispute {
    const opened = openedAt(payment);
    const dueBy = new Date(opened.getTime() + options.dueMs);
    const now = Date.now();
    let state: ProviderDispute["state"] = "needs_response";
    let resolvedAt: Date | null = null;
    const messages: ProviderDispute["messages"] = [{ sender: "bank", body: "The cardholder does not recognise this payment.", createdAt: opened.toISOString() }];
    if (query?.acceptedAt) {
      state = "lost";
      resolvedAt = query.acceptedAt;
    } else if (query?.submitted) {
      const decidedAt = query.submitted.at.getTime() + options.delayMs;
      if (now < decidedAt) state = "under_review";
      else {
        state = query.submitted.serviceDetails.includes(WINNING_EVIDENCE) ? "won" : "lost";
        resolvedAt = new Date(decidedAt);
        messages.push({ sender: "bank", body: state === "won" ? "The evidence shows the payment was authorised." : "The evidence does not answer the cardholder's claim.", createdAt: resolvedAt.toISOString() });
      }
    } else if (now >= dueBy.getTime()) {
      state = "lost";
      resolvedAt = dueBy;
      messages.push({ sender: "bank", body: "No answer by the deadline: the dispute was accepted on the merchant's behalf.", createdAt: dueBy.toISOString() });
    }
    return {
      providerReference,
      paymentReference: payment.reference,
      amount: payment.amount,
      currency: payment.currency,
      reason: "fraudulent",
      state,
      dueBy,
      resolvedAt,
      messages,
      fee: 0n,
    };
  }

  return {
    opensAfterMs: (payment) => (disputed(payment) ? options.delayMs : null),
    async ofPayment({ payment }) {
      if (!disputed(payment) || Date.now() < openedAt(payment).getTime()) return null;
      return record(`sbx_dp_${payment.providerReference!.slice(DISPUTE_MARK.length)}`, payment, null);
    },
    decidesAfterMs: options.delayMs,
    async fetch(query) {
      // The sandbox sends no notices: the gateway always knows the payment of a sandbox dispute it asks about.
      if (!query.payment) throw new Error("a sandbox dispute is asked about with its payment");
      return record(query.providerReference, query.payment, query);
    },
    async uploadFile({ fileName }) {
      return { providerFileName: `sbx_file_${randomBytes(6).toString("hex")}_${fileName}` };
    },
    async contest() {},
    async accept() {},
  };
}
