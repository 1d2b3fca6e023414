import { listedProviderNames } from "../providers/registry.ts";

/**
 * JSON Schema (2020-12, as OpenAPI 3.1 uses) building blocks for the REST routes' docs. Objects list their
 * properties and which are always present; a legacy client may rely on any of them.
 */
export type Schema = Record<string, unknown>;

export const str = (description?: string, extra: Schema = {}): Schema => ({ type: "string", ...(description ? { description } : {}), ...extra });
export const int = (description?: string, extra: Schema = {}): Schema => ({ type: "integer", ...(description ? { description } : {}), ...extra });
export const bool = (description?: string): Schema => ({ type: "boolean", ...(description ? { description } : {}) });
export const dateTime = (description?: string): Schema => str(description, { format: "date-time" });
export const nullable = (schema: Schema): Schema => ({
  ...schema,
  type: [schema.type as string, "null"],
  // An enum lists every value allowed, null included.
  ...(Array.isArray(schema.enum) ? { enum: [...(schema.enum as unknown[]), null] } : {}),
});
export const list = (items: Schema, description?: string): Schema => ({ type: "array", items, ...(description ? { description } : {}) });
export const oneOfStrings = (values: readonly string[], description?: string): Schema => str(description, { enum: [...values] });

/** An object whose every listed property is present in the answer (null where the schema allows it). */
export function obj(properties: Record<string, Schema>, options: { optional?: string[]; description?: string } = {}): Schema {
  const optional = new Set(options.optional ?? []);
  return {
    type: "object",
    ...(options.description ? { description: options.description } : {}),
    properties,
    required: Object.keys(properties).filter((k) => !optional.has(k)),
  };
}

/** A request body: the listed required fields, the others optional. */
export function body(properties: Record<string, Schema>, required: string[]): Schema {
  return { type: "object", properties, required };
}

/** {"status":"success", ...fields} */
export const envelope = (fields: Record<string, Schema>, optional: string[] = []): Schema =>
  obj({ status: { type: "string", const: "success" }, ...fields }, { optional });

export function errorEnvelope(codes: string[]): Schema {
  return obj(
    {
      status: { type: "string", const: "error" },
      message: str("What went wrong, for people; names the field for validation errors"),
      code: oneOfStrings(codes, "Machine-readable: see the error-code table"),
      errors: {
        type: "array",
        description: "validation_failed only: every bad field, the one `message` names first",
        items: obj({ field: str("As the API names it (metadata.note, lines[0].amount)"), message: str("What is wrong with it") }),
      },
    },
    { description: "Every error answer", optional: ["errors"] },
  );
}

const amount = int("Integer in the currency's minor unit (KES 15.00 is 1500)", { minimum: 0 });
const transactionStatus = oneOfStrings(["pending", "completed", "failed"]);

/** The query parameters every paged list takes (transactions, payouts): page, limit, status and a UTC date range. */
export const pageQuery = {
  page: { description: "From 1", schema: int(undefined, { minimum: 1 }) },
  limit: { description: "1 to 100 (default 20)", schema: int(undefined, { minimum: 1, maximum: 100 }) },
  status: { description: "pending, completed or failed", schema: transactionStatus },
  date_from: { description: "YYYY-MM-DD (UTC), inclusive", schema: str(undefined, { format: "date" }) },
  date_to: { description: "YYYY-MM-DD (UTC), inclusive", schema: str(undefined, { format: "date" }) },
};

/** The /v1 lists' and reports' paging and filters: their days are the merchant's time zone's (the /api family's stay UTC). */
export const v1PageQuery = {
  ...pageQuery,
  date_from: { description: "YYYY-MM-DD, inclusive: from that day's midnight in the merchant's time zone", schema: str(undefined, { format: "date" }) },
  date_to: { description: "YYYY-MM-DD, inclusive: to that day's end in the merchant's time zone", schema: str(undefined, { format: "date" }) },
};

/** What has gone back to the payer of a transaction (its status stays completed). */
export const refundedFields = {
  amount_refunded: int("The sum of its completed refunds, minor units"),
  refunded: bool("True when all of it has been refunded"),
  disputed: bool("True once a payer disputed it (a chargeback); its status stays completed"),
  dispute_status: nullable(oneOfStrings(["needs_response", "under_review", "won", "lost"], "Its latest dispute's status; null when never disputed")),
};

/** The provider's fee on a payment and what it left (withOutcome in transactions/routes.ts): after the published fields. */
export const feeFields = {
  fee: nullable(int("The provider's fee, minor units: its channel's schedule when it completed (never changed by a later schedule); null until completed")),
  net: nullable(int("amount - fee, minor units; null until completed")),
};

/** How a payout's and a refund's answers end: the provider's reference, the failure, the times. */
const outcomeAndTimes = {
  provider_reference: nullable(str()),
  failure_code: nullable(str()),
  failure_reason: nullable(str()),
  created_at: dateTime(),
  updated_at: dateTime(),
  completed_at: nullable(dateTime()),
};

export const schemas = {
  amount,
  transactionStatus,
  /** The transaction as the legacy /api routes answer it (initialize and list). */
  transactionSummary: obj({ id: int(), reference: str(), amount, status: transactionStatus, created_at: dateTime() }),
  /** A list item of /api/transactions/list (and the base of verify's transaction): the published fields, then what the gateway knows beyond them. */
  transactionListItem: obj({
    id: int(),
    reference: str(),
    amount,
    status: transactionStatus,
    created_at: dateTime(),
    payment_method: nullable(str("card, momo_stk or momo_c2b; null until a payment is attempted")),
    currency: str("ISO 4217"),
    client_reference: nullable(str("Your own reference, when you sent one")),
    provider_reference: nullable(str("The provider's receipt once paid (M-Pesa receipt or TransID, Paystack's id)")),
    failure_code: nullable(str("The provider's code, when failed")),
    failure_reason: nullable(str("The provider's words, when failed")),
    ...refundedFields,
    ...feeFields,
  }),
  metadata: { type: ["object", "null"], description: "The JSON object sent with initialize; null when none was" },
  page: { total: int("Matching rows in all"), page: int(), limit: int(), pages: int() },
  /** A /v1 list's totals and the zone of its days. */
  v1Page: {
    total: int("Matching rows in all"), page: int(), limit: int(), pages: int(),
    timezone: str("The merchant's time zone (IANA name, e.g. Africa/Nairobi): date_from and date_to are its days"),
  },
  channel: obj(
    {
      id: int(),
      name: str(),
      provider: oneOfStrings(listedProviderNames),
      is_active: bool(),
      is_default: bool(),
      created_at: dateTime(),
      fee_percent_bps: int("The provider's fee in basis points of each payment's amount"),
      fee_fixed: int("The provider's fixed fee per payment, minor units"),
      fee_cap: nullable(int("The most the fee on one payment can be, minor units; null: no cap")),
      webhook_url: str("Where the provider sends its events (paystack channels only)"),
    },
    { optional: ["webhook_url"], description: "Credentials (config) are write-only and never returned" },
  ),
  customer: obj({ id: int(), email: str(), first_name: nullable(str()), last_name: nullable(str()), phone: nullable(str()), created_at: dateTime() }),
  failure: { failure_code: nullable(str("The provider's code, when failed")), failure_reason: nullable(str("The provider's words, when failed")) },
  payout: obj({
    id: int(),
    reference: str(),
    client_reference: nullable(str()),
    amount,
    currency: str(),
    phone_number: str(),
    status: transactionStatus,
    payment_channel_id: int(),
    ...outcomeAndTimes,
  }),
  refund: obj({
    id: int(),
    reference: str(),
    transaction_reference: str(),
    amount,
    currency: str(),
    status: transactionStatus,
    method: str("sandbox, paystack_refund, mpesa_reversal or mpesa_b2c"),
    reason: nullable(str()),
    merchant_note: nullable(str()),
    customer_note: nullable(str()),
    ...outcomeAndTimes,
  }),
  webhookEndpoint: obj({ id: int(), url: str(), events: list(str()), description: nullable(str()), enabled: bool(), allow_local_urls: bool(), created_at: dateTime() }),
  session: obj({
    access_token: str("JWT (HS256), 15 minutes"),
    token_type: { type: "string", const: "Bearer" },
    expires_in: int("Seconds"),
    refresh_token: str("Opaque; single use: refreshing returns a new one"),
    user: obj({ id: int(), email: str(), role: oneOfStrings(["owner", "developer", "viewer"]), merchant_id: int() }),
    mode: oneOfStrings(["test", "live"]),
  }),
};
