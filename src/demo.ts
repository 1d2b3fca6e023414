import { randomBytes } from "node:crypto";
import type { Principal } from "./auth.ts";
import { ConflictError } from "./errors.ts";
import { testProviderName } from "./providers/registry.ts";
import type { Services } from "./services.ts";

export const DEMO_MERCHANT = { name: "Demo Merchant", email: "demo@example.com", defaultCurrency: "KES" } as const;
/** The demo's one channel is named after its provider, capitalized. */
const DEMO_CHANNEL_NAME = testProviderName.charAt(0).toUpperCase() + testProviderName.slice(1);
/** The demo channel's fee: 1.5 % of each payment, no fixed part, no cap. */
export const DEMO_FEE_PERCENT_BPS = 150;

export interface DemoCredentials {
  /** The demo merchant's test API key. */
  testKey: string;
  /** The demo owner's sign-in for the dashboard. */
  user: { email: string; password: string };
}

/**
 * On the first start against an empty database: a demo merchant with a channel of the test provider (no
 * credentials, no real money; providers/registry.ts) and an owner
 * who can sign in to the dashboard, so the README quick start needs nothing else (development only: main.ts never
 * calls this with NODE_ENV=production; `cli demo remove` deletes it). Returns the test key
 * and the owner's password (each shown once), or null when the database already had merchants.
 */
export async function createDemoMerchantIfEmpty(services: Services): Promise<DemoCredentials | null> {
  if (await services.merchants.hasAnyMerchant()) return null;
  try {
    const { merchant, keys } = await services.merchants.createMerchant({ ...DEMO_MERCHANT, isDemo: true });
    const principal: Principal = { merchantId: merchant.id, mode: "test", role: "owner", userId: null, keyId: null, keyPrefix: keys.test.prefix };
    // A realistic schedule (1.5 %, as card and mobile-money providers charge about), so fees and net show from the first payment.
    await services.channels.createChannel(principal, { name: DEMO_CHANNEL_NAME, provider: testProviderName, config: {}, feePercentBps: DEMO_FEE_PERCENT_BPS });
    const user = { email: DEMO_MERCHANT.email, password: randomBytes(12).toString("base64url") };
    await services.users.createUser({ merchantId: merchant.id, ...user, role: "owner" });
    return { testKey: keys.test.plaintext, user };
  } catch (error) {
    // Another instance starting at the same moment created it first.
    if (error instanceof ConflictError) return null;
    throw error;
  }
}
