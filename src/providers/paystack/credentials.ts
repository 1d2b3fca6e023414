import type { CredentialsConnector } from "../types.ts";
import { paystackMessage, type PaystackClient, type PaystackConfig } from "./client.ts";

/** Paystack accepts a secret key when a read that needs it answers: GET /balance (it changes nothing). */
export function createPaystackCredentials(client: PaystackClient): CredentialsConnector {
  return {
    async verify({ config, live }) {
      const keys = config as PaystackConfig;
      if (live && (!keys.secret_key.startsWith("sk_live_") || !keys.public_key.startsWith("pk_live_"))) {
        return { ok: false, message: "The channel has Paystack test keys: a live channel needs the live keys (sk_live_… and pk_live_…) from Paystack's Settings, API keys & webhooks" };
      }
      let response;
      try {
        response = await client.call(keys, "GET", "/balance", "balance check");
      } catch (error) {
        return { ok: false, message: (error as Error).message };
      }
      const said = paystackMessage(response.body?.message, keys.secret_key);
      if (response.status >= 200 && response.status < 300 && response.body?.status === true) {
        return { ok: true, message: "Paystack accepted the secret key" };
      }
      if (response.status === 401 || response.status === 403) {
        return { ok: false, message: `Paystack refused the secret key (HTTP ${response.status}${said ? `: ${said}` : ""}); copy it again from Paystack's Settings, API keys & webhooks` };
      }
      return { ok: false, message: `Paystack did not accept the balance check (HTTP ${response.status}${said ? `: ${said}` : ""}); try again shortly` };
    },
  };
}
