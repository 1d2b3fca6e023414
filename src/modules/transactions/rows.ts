import type { Transaction } from "../../db/generated/prisma/client.ts";

/**
 * The pure row <-> model mapping the store (store.ts) uses for its plain-SQL statements: no statement
 * runs here. Everything below derives from TRANSACTION_FIELDS, the one list of the table's columns.
 */

/**
 * Every column of `transactions` by Prisma model field, as the SQL that selects it under the field's
 * name. `satisfies` holds it to the model: a field added to schema.prisma and not here fails typecheck.
 * amounts travel as text (int8 parses differently per driver) and become the model's BigInt.
 */
const TRANSACTION_FIELDS = {
  id: "id",
  merchantId: "merchant_id",
  mode: "mode",
  reference: "reference",
  accessCode: "access_code",
  amount: "amount::text",
  amountRefunded: "amount_refunded::text",
  amountChargedBack: "amount_charged_back::text",
  fee: "fee::text",
  disputeStatus: "dispute_status",
  currency: "currency",
  status: "status",
  paymentMethod: "payment_method",
  description: "description",
  email: "email",
  phoneNumber: "phone_number",
  clientReference: "client_reference",
  checkoutRequestId: "checkout_request_id",
  providerReference: "provider_reference",
  failureCode: "failure_code",
  failureReason: "failure_reason",
  channelId: "channel_id",
  customerId: "customer_id",
  createdAt: "created_at",
  updatedAt: "updated_at",
  completedAt: "completed_at",
  chargeStartedAt: "charge_started_at",
  providerAccessCode: "provider_access_code",
  providerCheckoutUrl: "provider_checkout_url",
  callbackUrl: "callback_url",
  metadata: "metadata",
  savePaymentMethod: "save_payment_method",
  paymentMethodId: "payment_method_id",
  invoiceId: "invoice_id",
  invoiceAttempt: "invoice_attempt",
} as const satisfies { [K in keyof Transaction]-?: string };

type TransactionField = keyof typeof TRANSACTION_FIELDS;

/** `column AS "field"` for each field, or the bare column where the two are the same. */
const selectList = (fields: readonly TransactionField[]) =>
  fields.map((field) => (TRANSACTION_FIELDS[field] === field ? field : `${TRANSACTION_FIELDS[field]} AS "${field}"`)).join(", ");

const ALL_FIELDS = Object.keys(TRANSACTION_FIELDS) as TransactionField[];

/**
 * The transactions row as Prisma's model has it, for the statements on the hot paths that bypass
 * Prisma (src/db/sql.ts). Every column, so a row from here serves any GraphQL selection of scalars;
 * test/integration/hot-sql.test.ts checks it against Prisma's own read of the same row.
 */
export const TRANSACTION_COLUMNS = selectList(ALL_FIELDS);

/** A transactions row as TRANSACTION_COLUMNS selects it, before transactionFromRow. */
export type TransactionRow = Omit<Transaction, "amount" | "amountRefunded" | "amountChargedBack" | "fee" | "createdAt" | "updatedAt" | "completedAt" | "chargeStartedAt"> & {
  amount: string;
  amountRefunded: string;
  amountChargedBack: string;
  fee: string | null;
  createdAt: Date | string;
  updatedAt: Date | string;
  completedAt: Date | string | null;
  chargeStartedAt: Date | string | null;
};

/** A timestamp column as a Date, whichever the driver gave (pg a Date, JSON or PGlite's text a string). */
export const date = (value: Date | string) => (value instanceof Date ? value : new Date(value));
export const optionalDate = (value: Date | string | null) => (value === null ? null : date(value));
const optionalBigInt = (value: string | null) => (value === null ? null : BigInt(value));

export function transactionFromRow(row: TransactionRow): Transaction {
  return {
    ...row,
    amount: BigInt(row.amount),
    amountRefunded: BigInt(row.amountRefunded),
    amountChargedBack: BigInt(row.amountChargedBack),
    fee: optionalBigInt(row.fee),
    createdAt: date(row.createdAt),
    updatedAt: date(row.updatedAt),
    completedAt: optionalDate(row.completedAt),
    chargeStartedAt: optionalDate(row.chargeStartedAt),
  };
}

/**
 * The fields a list row or a verify usually needs (the REST list's and verify's, the dashboard table's): for a page
 * of 20, the embedded PGlite formats these in the gateway's own thread instead of all 28 columns, and the pg driver
 * parses half the columns (bench/README.md). One fixed set rather than one per GraphQL selection, so the statements
 * prepared per connection stay few.
 */
export const TRANSACTION_SUMMARY_FIELDS = [
  "id", "reference", "amount", "amountRefunded", "currency", "status", "paymentMethod", "email", "clientReference", "providerReference",
  "failureCode", "failureReason", "createdAt", "metadata", "disputeStatus", "fee",
] as const satisfies readonly TransactionField[];

export const TRANSACTION_SUMMARY_COLUMNS = selectList(TRANSACTION_SUMMARY_FIELDS);

export type TransactionSummaryRow = Pick<TransactionRow, (typeof TRANSACTION_SUMMARY_FIELDS)[number]>;

/**
 * A summary row as the model, with only the summary fields set: for a GraphQL selection that reads no
 * others (the Transaction fields SUMMARY_FIELDS in schema.ts names), as Prisma's own `select` would return.
 */
export function transactionSummaryFromRow(row: TransactionSummaryRow): Transaction {
  return { ...row, amount: BigInt(row.amount), amountRefunded: BigInt(row.amountRefunded), fee: optionalBigInt(row.fee), createdAt: date(row.createdAt) } as Transaction;
}

/** Prisma model fields of Transaction that are columns (not relations): a selection of only these needs no join. */
const SCALAR_FIELDS: ReadonlySet<string> = new Set(ALL_FIELDS);

/** Whether a Pothos-derived Prisma query asks for nothing beyond the row's own columns. */
export function selectsColumnsOnly(query: { include?: object; select?: object }): boolean {
  if (query.include && Object.keys(query.include).length > 0) return false;
  return !query.select || Object.keys(query.select).every((field) => SCALAR_FIELDS.has(field));
}
