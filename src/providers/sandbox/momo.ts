import { randomBytes } from "node:crypto";
import type { CollectionOutcome, MomoConnector } from "../types.ts";
import * as wire from "../mpesa/wire.ts";
import { createLater } from "./later.ts";
import type { SandboxRecord } from "./record.ts";

/**
 * The sandbox's M-Pesa simulator: no network. An STK push is answered after a short delay with a
 * Daraja-format callback, delivered through the same service code path a real callback takes.
 * The outcome is chosen by magic phone numbers (documented in docs/mpesa.md); any other number pays.
 */
export const sandboxStkOutcomes: Record<string, { resultCode: number; resultDesc: string } | "no-answer"> = {
  "254708374149": { resultCode: 0, resultDesc: "The service request is processed successfully." },
  "254700000001": { resultCode: 1, resultDesc: "The balance is insufficient for the transaction." },
  "254700001032": { resultCode: 1032, resultDesc: "Request cancelled by user." },
  "254700001037": { resultCode: 1037, resultDesc: "DS timeout user cannot be reached." },
  "254700002001": { resultCode: 2001, resultDesc: "The initiator information is invalid." },
  // No callback ever: the reconciler's queries stay pending until the push expires (1019).
  "254700001019": "no-answer",
};

const SANDBOX_SHORTCODE = "174379";
const receipt = () => `SBX${randomBytes(4).toString("hex").toUpperCase()}`.slice(0, 10);

export function createSandboxMomo(options: { stkDelayMs: number; record?: SandboxRecord }): MomoConnector {
  const { later, close } = createLater();
  /** What a query answers: pending until the simulated customer has acted. */
  const outcomes = new Map<string, CollectionOutcome>();

  return {
    simulated: true,
    ...wire.MPESA_MOMO_CONSTANTS,
    checkAmount: (amount, currency) => void wire.toWholeShillings(amount, currency),

    async stkPush(request) {
      const shillings = wire.toWholeShillings(request.amount, request.currency);
      const checkoutRequestId = `ws_CO_SBX${randomBytes(10).toString("hex")}`;
      const merchantRequestId = `sbx-${randomBytes(6).toString("hex")}`;
      const rule = sandboxStkOutcomes[request.phoneNumber] ?? sandboxStkOutcomes["254708374149"]!;
      outcomes.set(checkoutRequestId, { state: "pending" });
      if (rule !== "no-answer") {
        const paidReceipt = receipt();
        const body = wire.buildStkCallbackBody({
          merchantRequestId,
          checkoutRequestId,
          resultCode: rule.resultCode,
          resultDesc: rule.resultDesc,
          shillings,
          receipt: paidReceipt,
          phoneNumber: request.phoneNumber,
        });
        // The gateway records the push's CheckoutRequestID after this returns; a callback that finds no match yet is retried.
        const deliver = async (attempt: number) => {
          const outcome = wire.parseStkCallbackBody(body).outcome;
          if (attempt === 1 && outcome.state === "completed") options.record?.approve({ providerReference: paidReceipt, reference: null, amount: BigInt(shillings) * 100n, currency: wire.MPESA_CURRENCY });
          outcomes.set(checkoutRequestId, outcome);
          const found = (await request.deliverCallback?.(body)) ?? true;
          if (!found && attempt < 5) later(options.stkDelayMs, () => deliver(attempt + 1));
        };
        later(options.stkDelayMs, () => deliver(1));
      }
      return { checkoutRequestId, merchantRequestId, customerMessage: "Success. Request accepted for processing" };
    },

    async stkQuery({ checkoutRequestId }) {
      return outcomes.get(checkoutRequestId) ?? { state: "pending" };
    },

    parseStkCallback: wire.parseStkCallbackBody,
    async registerC2bUrls() {},
    canSimulateC2b: () => true,
    // A simulator: nobody pays it from a phone's menu.
    takesC2b: () => false,

    async simulateC2b(request) {
      const transId = `SBX${randomBytes(4).toString("hex").toUpperCase()}`.slice(0, 10);
      const body = wire.buildC2bBody({
        transId,
        shillings: wire.toWholeShillings(request.amount, request.currency),
        shortcode: SANDBOX_SHORTCODE,
        billRef: request.billRef,
        phoneNumber: request.phoneNumber,
      });
      // As Daraja does with validation enabled: ask first, and confirm only what was accepted.
      if (request.deliverValidation) {
        const verdict = wire.readC2bValidationDecision(await request.deliverValidation(body));
        if (!verdict?.accept) return { rejected: true };
      }
      options.record?.approve({ providerReference: transId, reference: null, amount: BigInt(wire.toWholeShillings(request.amount, request.currency)) * 100n, currency: wire.MPESA_CURRENCY });
      await request.deliverConfirmation?.(body);
      return { rejected: false };
    },

    parseC2bPayment: wire.parseC2bBody,
    c2bValidationReply: wire.c2bValidationReply,
    readC2bValidationDecision: wire.readC2bValidationDecision,

    close,
  };
}
