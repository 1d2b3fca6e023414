import type { Principal } from "../../auth.ts";
import { localDay } from "../../days.ts";
import { csvLine } from "../ledger/csv.ts";
import type { TransactionFilters, TransactionStore } from "./store.ts";

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
  const range = [filters.dateFrom, filters.dateTo].filter(Boolean).join("_to_");
  const filename = `transactions-${principal.mode}${filters.status ? `-${filters.status}` : ""}${range ? `-${range}` : ""}.csv`;
  async function* chunks(): AsyncGenerator<string> {
    yield csvLine(TRANSACTION_CSV_COLUMNS);
    for await (const batch of batches) {
      let text = "";
      for (const t of batch) {
        text += csvLine([
          t.id, t.reference, t.status, t.amount, t.amountRefunded, t.currency, t.paymentMethod, t.channelId, t.email, t.phoneNumber,
          t.clientReference, t.providerReference, t.description, t.failureCode, t.failureReason, t.createdAt.toISOString(), t.completedAt?.toISOString() ?? null,
          localDay(t.createdAt, zone), zone, t.fee, t.fee === null ? null : t.amount - t.fee,
        ]);
      }
      yield text;
    }
  }
  return { filename, chunks: chunks() };
}
