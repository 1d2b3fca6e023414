import { GatewayError } from "../../errors.ts";
import type { CredentialsConnector } from "../types.ts";
import type { DarajaClient, MpesaConfig } from "./client.ts";

/**
 * Daraja accepts an app's consumer key and secret when its OAuth call issues a token. The client's cached token
 * counts: Daraja issued it for these exact credentials (the cache is keyed by them) and it is still valid, and
 * asking for a fresh one would invalidate the token payments are using (a new token replaces the previous one).
 */
export function createMpesaCredentials(client: DarajaClient): CredentialsConnector {
  return {
    async verify({ config, live }) {
      const mpesa = config as MpesaConfig;
      if (live && mpesa.environment !== "production") {
        return { ok: false, message: "The channel points at Daraja's sandbox: a live channel needs the production app's consumer key and secret with environment production" };
      }
      try {
        await client.accessToken(mpesa);
        return { ok: true, message: `M-Pesa accepted the consumer key and secret (${mpesa.environment} app, shortcode ${mpesa.shortcode})` };
      } catch (error) {
        if (error instanceof GatewayError) return { ok: false, message: error.message };
        throw error;
      }
    },
  };
}
