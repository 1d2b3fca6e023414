import { z } from "zod";

/**
 * The connectors a payment channel can use, with the credentials each needs. Config is validated
 * here on channel creation, then encrypted at rest; nothing outside a connector reads it.
 */
const nonEmpty = z.string().trim().min(1, "is required").max(500, "must be at most 500 characters");

export const connectorConfigSchemas = {
  sandbox: z
    .object({
      // Simulated card-processor latency (a real charge takes a moment): what concurrent payments overlap on.
      charge_delay_ms: z.number().int("must be a whole number").min(0, "must be 0 to 10000").max(10_000, "must be 0 to 10000").optional(),
    })
    .passthrough(),
  paystack: z.object({
    public_key: nonEmpty.regex(/^pk_(test|live)_/, "must start with pk_test_ or pk_live_"),
    secret_key: nonEmpty.regex(/^sk_(test|live)_/, "must start with sk_test_ or sk_live_"),
  }),
  mpesa: z
    .object({
      consumer_key: nonEmpty,
      consumer_secret: nonEmpty,
      shortcode: z.string().regex(/^\d{5,7}$/, "must be a 5 to 7 digit M-Pesa shortcode"),
      passkey: nonEmpty,
      environment: z.enum(["sandbox", "production"], "must be sandbox or production"),
      transaction_type: z.enum(["paybill", "till"], "must be paybill or till"),
      till_number: z.string().regex(/^\d{5,7}$/, "must be a 5 to 7 digit till number").optional(),
      // B2C payouts (optional): the initiator, and the portal's credential or the password to encrypt.
      initiator_name: nonEmpty.optional(),
      security_credential: z.string().trim().min(1, "is required").max(2000, "must be at most 2000 characters").optional(),
      initiator_password: nonEmpty.optional(),
      b2c_shortcode: z.string().regex(/^\d{5,7}$/, "must be a 5 to 7 digit M-Pesa shortcode").optional(),
      // Payers also pay the shortcode from their phone's menu (C2B): its URLs must be registered (default true).
      c2b: z.boolean("must be true or false").optional(),
    })
    .refine((c) => c.transaction_type !== "till" || c.till_number !== undefined, {
      message: "is required when transaction_type is till",
      path: ["till_number"],
    })
    .refine((c) => !c.initiator_name || c.security_credential !== undefined || c.initiator_password !== undefined, {
      message: "is required with initiator_name (or give security_credential)",
      path: ["initiator_password"],
    })
    .refine((c) => c.initiator_name || (c.security_credential === undefined && c.initiator_password === undefined), {
      message: "is required with security_credential or initiator_password",
      path: ["initiator_name"],
    }),
} as const;

export type ProviderName = keyof typeof connectorConfigSchemas;
export const providerNames = Object.keys(connectorConfigSchemas) as ProviderName[];

/** ISO 4217 currencies each connector can collect in. */
export const connectorCurrencies: Record<ProviderName, readonly string[]> = {
  sandbox: ["KES", "NGN", "GHS", "ZAR", "USD", "UGX", "TZS"],
  paystack: ["NGN", "GHS", "ZAR", "KES", "USD"],
  mpesa: ["KES"],
};

export function isProviderName(value: string): value is ProviderName {
  return Object.hasOwn(connectorConfigSchemas, value);
}

/** The entry for a provider named by a string (a channel's column): undefined when it names no provider. */
export function providerEntry<T>(byProvider: Record<ProviderName, T>, name: string): T | undefined {
  return isProviderName(name) ? byProvider[name] : undefined;
}

/**
 * Providers that only simulate payments (no money moves): the checkout page tells the payer so. A provider
 * property, so core code asks this instead of naming a provider.
 */
const testProviders: ReadonlySet<ProviderName> = new Set(["sandbox"]);

export function isTestProvider(name: string): boolean {
  return isProviderName(name) && testProviders.has(name);
}

/** The names as people read them (the OpenAPI document, error messages): test providers first, then the real ones alphabetically. */
export const listedProviderNames: readonly ProviderName[] = [...providerNames].sort(
  (a, b) => Number(isTestProvider(b)) - Number(isTestProvider(a)) || a.localeCompare(b),
);

/** A test provider needs no credentials: the demo merchant's channel, and what `cli webhooks trigger` pays through. */
export const testProviderName: ProviderName = listedProviderNames.find(isTestProvider)!;
