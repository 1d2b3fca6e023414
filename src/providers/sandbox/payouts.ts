import { randomBytes } from "node:crypto";
import type { PayoutConnector } from "../types.ts";
import * as wire from "../mpesa/wire.ts";
import { createLater } from "./later.ts";

/**
 * The sandbox's B2C simulator: no network. A payout is answered after a short delay with a
 * Daraja-format result, delivered through the same service code path a real result takes. The
 * outcome is chosen by magic phone numbers (documented in docs/mpesa.md); any other number is paid.
 */
export const sandboxPayoutOutcomes: Record<string, { resultCode: number; resultDesc: string } | "no-answer"> = {
  "254708374149": { resultCode: 0, resultDesc: "The service request is processed successfully." },
  "254700000001": { resultCode: 1, resultDesc: "The balance is insufficient for the transaction." },
  "254700002040": { resultCode: 2040, resultDesc: "Credit Party customer type (Unregistered or Registered Customer) can't be supported by the service." },
  // No result ever: the status query settles it (as expired, 1019).
  "254700001019": "no-answer",
};

const EXPIRED = { resultCode: 1019, resultDesc: "The payout expired without being processed." };

export function createSandboxPayouts(options: { delayMs: number }): PayoutConnector & { close(): void } {
  const { later, close } = createLater();
  /** What a status query reports, by our request id. Lost on restart, like any simulator state: then it reports expiry. */
  const sent = new Map<string, { body: ReturnType<typeof wire.buildB2cResultBody> | null; shillings: number; conversationId: string }>();

  return {
    canPayOut: () => true,
    checkAmount: (amount, currency) => void wire.toB2cShillings(amount, currency),

    async send(request) {
      const shillings = wire.toB2cShillings(request.amount, request.currency);
      const conversationId = `AG_SBX_${randomBytes(8).toString("hex")}`;
      const rule = sandboxPayoutOutcomes[request.phoneNumber] ?? sandboxPayoutOutcomes["254708374149"]!;
      const body =
        rule === "no-answer"
          ? null
          : wire.buildB2cResultBody({
              originatorConversationId: request.providerRequestId,
              conversationId,
              transactionId: `SBX${randomBytes(4).toString("hex").toUpperCase()}`.slice(0, 10),
              resultCode: rule.resultCode,
              resultDesc: rule.resultDesc,
              shillings,
            });
      sent.set(request.providerRequestId, { body, shillings, conversationId });
      if (body) later(options.delayMs, async () => request.deliverResult?.(body));
      return { providerConversationId: conversationId };
    },

    async queryStatus(request) {
      const known = sent.get(request.providerRequestId);
      const body =
        known?.body ??
        wire.buildB2cResultBody({
          originatorConversationId: request.providerRequestId,
          conversationId: known?.conversationId ?? "",
          transactionId: "",
          ...EXPIRED,
          shillings: known?.shillings ?? 0,
        });
      later(options.delayMs, async () => request.deliverResult?.(body));
    },

    parseResult: wire.parseB2cResultBody,
    // The simulator answers a status query with the payout's own result.
    parseStatusResult: wire.parseB2cResultBody,

    close,
  };
}
