import { ConflictError } from "./errors.ts";
import type { Services } from "./services.ts";

export const DEMO_MERCHANT = { name: "Demo Merchant", email: "demo@example.com", defaultCurrency: "KES" } as const;

/**
 * On the first start against an empty database: a demo merchant with a sandbox channel, so the
 * README quick start needs nothing else. Returns its test key (shown once) or null when the database
 * already had merchants.
 */
export async function createDemoMerchantIfEmpty(services: Services): Promise<string | null> {
  if (await services.merchants.hasAnyMerchant()) return null;
  try {
    const { merchant, keys } = await services.merchants.createMerchant(DEMO_MERCHANT);
    const principal = { merchantId: merchant.id, mode: "test" as const, keyId: 0, keyPrefix: keys.test.prefix };
    await services.channels.createChannel(principal, { name: "Sandbox", provider: "sandbox", config: {} });
    return keys.test.plaintext;
  } catch (error) {
    // Another instance starting at the same moment created it first.
    if (error instanceof ConflictError) return null;
    throw error;
  }
}
