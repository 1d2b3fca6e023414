import { GatewayError, ValidationError } from "../../errors.ts";
import type { HostedCheckoutConnector } from "../types.ts";
import type { PaystackClient, PaystackConfig } from "./client.ts";
import { readAuthorization, readVerifyResponse, text } from "./wire.ts";

/** Paystack collects on its own page: the gateway initializes the payment, then verifies every outcome by asking. */
export function createPaystackCollections(client: PaystackClient): HostedCheckoutConnector {
  return {
    checkPayment({ amount }) {
      // Paystack takes amounts as JSON numbers in the currency's subunit, which is the gateway's minor unit.
      if (amount > BigInt(Number.MAX_SAFE_INTEGER)) throw new ValidationError("amount", "is larger than Paystack accepts");
    },

    async start(request) {
      const config = request.config as PaystackConfig;
      const started = await client.data(config, "POST", "/transaction/initialize", "payment initialization", {
        email: request.email,
        amount: Number(request.amount),
        currency: request.currency,
        reference: request.reference,
        callback_url: request.callbackUrl,
        metadata: request.metadata,
      });
      const accessCode = text(started.access_code);
      const checkoutUrl = text(started.authorization_url);
      if (!accessCode || !checkoutUrl) throw new GatewayError("provider_unavailable", "Paystack's answer to the payment initialization could not be read");
      return { accessCode, checkoutUrl };
    },

    async verify({ config: raw, reference }) {
      const config = raw as PaystackConfig;
      const response = await client.call(config, "GET", `/transaction/verify/${encodeURIComponent(reference)}`, "payment verification");
      const status = readVerifyResponse(response, config.secret_key);
      // A card payment leaves an authorization Paystack can charge again (saved with the payer's consent).
      const data = response.body?.data as Record<string, any> | undefined;
      const savedCard = status.outcome.state === "completed" && data?.channel === "card" ? readAuthorization(data.authorization) : null;
      return savedCard ? { ...status, savedCard } : status;
    },
  };
}
