import { GatewayError } from "../../errors.ts";
import type { SavedCardConnector, SavedCardOutcome } from "../types.ts";
import { paystackMessage, type PaystackClient, type PaystackConfig } from "./client.ts";
import { readVerifyResponse, text } from "./wire.ts";

/**
 * Charges without the payer: POST /transaction/charge_authorization with a saved card's authorization_code, under the
 * gateway's reference (fixed before the call), and GET /transaction/verify/:reference to learn what became of a
 * charge whose answer was lost, before any new one.
 */
export function createPaystackSavedCards(client: PaystackClient): SavedCardConnector {
  async function status({ config: raw, reference }: { config: unknown; reference: string }): Promise<SavedCardOutcome | { outcome: "unknown" }> {
    const config = raw as PaystackConfig;
    const response = await client.call(config, "GET", `/transaction/verify/${encodeURIComponent(reference)}`, "saved card charge verification");
    // A reference Paystack does not know: the charge never reached it.
    if (response.status === 400 || response.status === 404) return { outcome: "unknown" };
    const { outcome } = readVerifyResponse(response, config.secret_key);
    if (outcome.state === "completed") return { outcome: "succeeded", providerReference: outcome.providerReference ?? reference };
    if (outcome.state === "failed") return { outcome: "declined", code: outcome.code, reason: outcome.message };
    return { outcome: "pending", redirectUrl: null };
  }

  return {
    async charge({ config: raw, token, email, reference, amount, currency }) {
      const config = raw as PaystackConfig;
      let data: Record<string, any>;
      try {
        data = await client.data(config, "POST", "/transaction/charge_authorization", "saved card charge", {
          authorization_code: token,
          email,
          amount: Number(amount),
          currency,
          reference,
        });
      } catch (error) {
        if (!(error instanceof GatewayError && /duplicate_reference/.test(error.message))) throw error;
        // Paystack already holds a charge under this reference: ours (a request of a process that died before its
        // answer came, or a run of this attempt that overlapped this one). Its outcome is this charge's, never a
        // refusal: a card charged under the reference must not be recorded as failed and charged again.
        const known = await status({ config: raw, reference });
        return known.outcome === "unknown" ? { outcome: "pending", redirectUrl: null } : known;
      }
      return readChargeData(data, config.secret_key);
    },
    status,
  };
}

/** charge_authorization's data: success, failed, or a charge waiting for the payer (`paused` with an authorization_url, send_otp, ...). */
function readChargeData(data: Record<string, any>, secretKey: string): SavedCardOutcome {
  const status = text(data.status);
  if (status === "success") return { outcome: "succeeded", providerReference: data.id != null ? String(data.id) : text(data.reference) ?? "" };
  if (status === "failed" || status === "reversed") {
    return { outcome: "declined", code: "card_declined", reason: paystackMessage(data.gateway_response, secretKey) || "The card was declined" };
  }
  return { outcome: "pending", redirectUrl: text(data.authorization_url) };
}
