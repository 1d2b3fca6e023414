import { GatewayError } from "../../errors.ts";
import type { ProviderPaymentRecord, ProviderSettlementSummary, ReconciliationConnector } from "../types.ts";
import { paystackFailure, type PaystackClient, type PaystackConfig } from "./client.ts";
import { bigintOf, dateOf, LIST_PAGE_SIZE, readTransactionStatus, text } from "./wire.ts";

/** A day is read page by page, at most this many. */
const MAX_LIST_PAGES = 500;

/** Paystack lists a day's transactions and settlements: the reconciliation compares them with the gateway's. */
export function createPaystackReconciliation(client: PaystackClient): ReconciliationConnector {
  /** Every page of a list endpoint for [from, to) (page, perPage; meta.pageCount says when to stop), at most MAX_LIST_PAGES. */
  async function listAll(config: PaystackConfig, path: string, operation: string, from: Date, to: Date): Promise<Record<string, any>[]> {
    const rows: Record<string, any>[] = [];
    for (let page = 1; page <= MAX_LIST_PAGES; page++) {
      const query = new URLSearchParams({ from: from.toISOString(), to: new Date(to.getTime() - 1).toISOString(), perPage: String(LIST_PAGE_SIZE), page: String(page) });
      const response = await client.call(config, "GET", `${path}?${query}`, operation);
      if (response.status !== 200 || response.body?.status !== true || !Array.isArray(response.body.data)) throw paystackFailure(operation, response, config.secret_key);
      rows.push(...(response.body.data as Record<string, any>[]));
      const pageCount = Number(response.body.meta?.pageCount ?? 1);
      // meta.pageCount decides, not the page's length: Paystack may serve fewer per page than asked.
      if (response.body.data.length === 0 || !(page < pageCount)) return rows;
    }
    throw new GatewayError("provider_error", `Paystack's ${operation} has more than ${MAX_LIST_PAGES * LIST_PAGE_SIZE} records for one day`);
  }

  return {
    listsAll: true,
    async payments({ config, from, to }) {
      const rows = await listAll(config as PaystackConfig, "/transaction", "transaction list", from, to);
      return rows.map((row): ProviderPaymentRecord => {
        const status = readTransactionStatus(row);
        return {
          providerReference: row.id != null ? String(row.id) : null,
          reference: text(row.reference),
          amount: bigintOf(row.amount) ?? 0n,
          currency: text(row.currency) ?? "",
          // Verify reads a reversed payment as failed (nothing to settle); the reconciliation tells the two apart.
          status: status.outcome.state === "failed" && status.outcome.code === "reversed" ? "reversed" : status.outcome.state,
          createdAt: dateOf(row.created_at ?? row.createdAt),
          paidAt: dateOf(row.paid_at ?? row.paidAt),
        };
      });
    },

    async settlements({ config, from, to }) {
      const rows = await listAll(config as PaystackConfig, "/settlement", "settlement list", from, to);
      const summary: ProviderSettlementSummary = { count: rows.length, totals: {}, statuses: {} };
      for (const row of rows) {
        const currency = text(row.currency) ?? "";
        const totals = (summary.totals[currency] ??= { total: 0n, fees: 0n, settled: 0n });
        totals.total += bigintOf(row.total_amount) ?? 0n;
        totals.fees += bigintOf(row.total_fees) ?? 0n;
        totals.settled += bigintOf(row.effective_amount) ?? 0n;
        const status = text(row.status) ?? "unknown";
        summary.statuses[status] = (summary.statuses[status] ?? 0) + 1;
      }
      return summary;
    },
  };
}
