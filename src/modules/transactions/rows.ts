import type { Transaction } from "../../db/generated/prisma/client.ts";
import type { Sql } from "../../db/sql.ts";

/**
 * The transactions row as Prisma's model has it, for the statements on the hot paths that bypass
 * Prisma (src/db/sql.ts). Every column, so a row from here serves any GraphQL selection of scalars;
 * test/integration/hot-sql.test.ts checks it against Prisma's own read of the same row.
 */
export const TRANSACTION_COLUMNS = `id, merchant_id AS "merchantId", mode, reference, access_code AS "accessCode", amount::text AS amount,
  amount_refunded::text AS "amountRefunded",
  currency, status, payment_method AS "paymentMethod", description, email, phone_number AS "phoneNumber",
  client_reference AS "clientReference", checkout_request_id AS "checkoutRequestId", provider_reference AS "providerReference",
  failure_code AS "failureCode", failure_reason AS "failureReason", channel_id AS "channelId", customer_id AS "customerId",
  created_at AS "createdAt", updated_at AS "updatedAt", completed_at AS "completedAt", charge_started_at AS "chargeStartedAt",
  provider_access_code AS "providerAccessCode", provider_checkout_url AS "providerCheckoutUrl", callback_url AS "callbackUrl", metadata`;

/** A transactions row as TRANSACTION_COLUMNS selects it, before transactionFromRow. */
export type TransactionRow = Omit<Transaction, "amount" | "amountRefunded" | "createdAt" | "updatedAt" | "completedAt" | "chargeStartedAt"> & {
  amount: string;
  amountRefunded: string;
  createdAt: Date | string;
  updatedAt: Date | string;
  completedAt: Date | string | null;
  chargeStartedAt: Date | string | null;
};

const date = (value: Date | string) => (value instanceof Date ? value : new Date(value));
const optionalDate = (value: Date | string | null) => (value === null ? null : date(value));

/** amount travels as text (int8 parses differently per driver) and becomes the model's BigInt. */
export function transactionFromRow(row: TransactionRow): Transaction {
  return {
    ...row,
    amount: BigInt(row.amount),
    amountRefunded: BigInt(row.amountRefunded),
    createdAt: date(row.createdAt),
    updatedAt: date(row.updatedAt),
    completedAt: optionalDate(row.completedAt),
    chargeStartedAt: optionalDate(row.chargeStartedAt),
  };
}

/**
 * The columns a list row usually needs (the REST list's and the dashboard table's): for a page of 20, the
 * embedded PGlite formats these in the gateway's own thread instead of all 26 columns (bench/README.md).
 * One fixed set rather than one per GraphQL selection, so the statements prepared per connection stay few.
 */
export const TRANSACTION_SUMMARY_COLUMNS = `id, reference, amount::text AS amount, amount_refunded::text AS "amountRefunded", currency, status, payment_method AS "paymentMethod",
  email, client_reference AS "clientReference", provider_reference AS "providerReference", failure_code AS "failureCode",
  failure_reason AS "failureReason", created_at AS "createdAt"`;

export type TransactionSummaryRow = Pick<
  TransactionRow,
  "id" | "reference" | "amount" | "amountRefunded" | "currency" | "status" | "paymentMethod" | "email" | "clientReference" | "providerReference" | "failureCode" | "failureReason" | "createdAt"
>;

/**
 * A summary row as the model, with only the summary fields set: for a GraphQL selection that reads no
 * others (the Transaction fields SUMMARY_FIELDS in schema.ts names), as Prisma's own `select` would return.
 */
export function transactionSummaryFromRow(row: TransactionSummaryRow): Transaction {
  return { ...row, amount: BigInt(row.amount), amountRefunded: BigInt(row.amountRefunded), createdAt: date(row.createdAt) } as Transaction;
}

/** The one transaction a condition on transactions names (`where` uses $1, $2 ... for params), or null. */
export async function findTransaction(sql: Sql, where: string, params: readonly unknown[]): Promise<Transaction | null> {
  const [row] = await sql.query<TransactionRow>(`SELECT ${TRANSACTION_COLUMNS} FROM transactions WHERE ${where}`, params);
  return row ? transactionFromRow(row) : null;
}

/** Prisma model fields of Transaction that are columns (not relations): a selection of only these needs no join. */
const SCALAR_FIELDS = new Set([
  "id", "merchantId", "mode", "reference", "accessCode", "amount", "amountRefunded", "currency", "status", "paymentMethod", "description", "email",
  "phoneNumber", "clientReference", "checkoutRequestId", "providerReference", "failureCode", "failureReason", "channelId",
  "customerId", "createdAt", "updatedAt", "completedAt", "chargeStartedAt", "providerAccessCode", "providerCheckoutUrl", "callbackUrl",
  "metadata",
]);

/** Whether a Pothos-derived Prisma query asks for nothing beyond the row's own columns. */
export function selectsColumnsOnly(query: { include?: object; select?: object }): boolean {
  if (query.include && Object.keys(query.include).length > 0) return false;
  return !query.select || Object.keys(query.select).every((field) => SCALAR_FIELDS.has(field));
}
