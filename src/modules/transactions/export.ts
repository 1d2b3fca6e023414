import type { Principal } from "../../auth.ts";
import { localDayReader } from "../../days.ts";
import { csvChunks } from "../ledger/csv.ts";
import type { TransactionExportRow, TransactionFilters, TransactionStore } from "./store.ts";

/**
 * GET /v1/reports/transactions.csv: the caller's transactions matching the list's filters (status, date_from,
 * date_to, search), newest first, as CSV (ledger/csv.ts: RFC 4180, formulas neutralised), written batch by
 * batch as the client reads it. created_at and completed_at are instants (UTC); `date` is created_at's day in
 * `timezone`, the merchant's zone, whose days date_from and date_to name. fee and net (amount - fee) are empty until
 * the payment completes.
 */
export const TRANSACTION_CSV_COLUMNS = [
  "id", "reference", "status", "amount", "amount_refunded", "currency", "payment_method", "payment_channel_id", "email", "phone_number",
  "client_reference", "provider_reference", "description", "failure_code", "failure_reason", "created_at", "completed_at",
  "date", "timezone", "fee", "net",
] as const;

export function exportTransactionsCsv(store: TransactionStore, principal: Principal, filters: TransactionFilters & { timeZone: string }): { filename: string; chunks: AsyncIterable<string> } {
  // Asked for now, so a bad filter is refused (a 400) before the first byte is sent.
  const batches = store.exportBatches(principal, filters);
  const zone = filters.timeZone;
  const dayOf = localDayReader(zone);
  const range = [filters.dateFrom, filters.dateTo].filter(Boolean).join("_to_");
  const filename = `transactions-${principal.mode}${filters.status ? `-${filters.status}` : ""}${range ? `-${range}` : ""}.csv`;
  const chunks = csvChunks(TRANSACTION_CSV_COLUMNS, batches, (t: TransactionExportRow) => {
    const createdAt = asDate(t.createdAt);
    const amount = BigInt(t.amount);
    const fee = t.fee === null ? null : BigInt(t.fee);
    return [
      t.id, t.reference, t.status, amount, BigInt(t.amountRefunded), t.currency, t.paymentMethod, t.channelId, t.email, t.phoneNumber,
      t.clientReference, t.providerReference, t.description, t.failureCode, t.failureReason, createdAt.toISOString(), t.completedAt === null ? null : asDate(t.completedAt).toISOString(),
      dayOf(createdAt), zone, fee, fee === null ? null : amount - fee,
    ];
  });
  return { filename, chunks };
}

const asDate = (value: Date | string) => (value instanceof Date ? value : new Date(value));
