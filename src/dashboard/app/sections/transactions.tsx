import { useEffect, useState } from "preact/hooks";
import { ExportCsv, reportUrl } from "../export.tsx";
import { formatDate, formatMoney, localDay } from "../format.ts";
import { onDisputeEvent, onLiveStatus, onRefundEvent, onTransactionEvent } from "../live.ts";
import { BASE, navigate, onLinkClick } from "../router.ts";
import type { Mode } from "../session.ts";
import { CursorPager, useCursors } from "../paging.tsx";
import { graphql } from "../gql/index.ts";
import type { DashboardPaymentDetailFragment, DashboardTransactionsQuery } from "../gql/graphql.ts";
import { DateRangeFields, Table } from "../tables.tsx";
import { Badge, EmptyState, ErrorNote, Loading, PageHeader, useQuery } from "../ui.tsx";
import { DisputedBadge } from "./disputes.tsx";
import { RefundedBadge } from "./refunds.tsx";
import type { Status, Transaction } from "./transaction-fields.ts";

const PAGE_SIZE = 20;
const QUERY = graphql(`
  query DashboardTransactions($first: Int!, $after: String, $status: TransactionStatus, $dateFrom: String, $dateTo: String, $search: String) {
    transactions(first: $first, after: $after, status: $status, dateFrom: $dateFrom, dateTo: $dateTo, search: $search) {
      totalCount pageInfo { ...DashboardPageInfo } edges { node { ...DashboardTransaction amountRefunded refunded disputeStatus clientReference phoneNumber paymentDetail { ...DashboardPaymentDetail } } }
    }
  }
`);

graphql(`fragment DashboardPaymentDetail on PaymentDetail { method cardBrand cardLast4 receipt }`);

/**
 * A row: live events carry the transaction as of the event, without what was refunded or disputed since, nor who
 * paid how (kept from the load, or shown from what the event has).
 */
type Row = Transaction & {
  amountRefunded?: number;
  refunded?: boolean;
  disputeStatus?: string | null;
  clientReference?: string | null;
  phoneNumber?: string | null;
  paymentDetail?: DashboardPaymentDetailFragment | null;
};
type Answer = { transactions: Omit<DashboardTransactionsQuery["transactions"], "edges"> & { edges: { node: Row }[] } };
interface Filters {
  status: Status | "";
  dateFrom: string;
  dateTo: string;
  /** Exact reference, client reference, receipt, e-mail or phone (the API's `search`). */
  search: string;
}

const METHODS: Record<string, string> = { card: "Card", momo_stk: "M-Pesa STK", momo_c2b: "M-Pesa C2B" };
export const methodLabel = (method: string | null) => (method ? (METHODS[method] ?? method) : "—");

/** How it was paid as the shop tells payments apart: "Visa •••• 4242", "M-Pesa SBX0A2186F"; the method's name otherwise. */
export function paidWith(t: { paymentMethod: string | null; paymentDetail?: DashboardPaymentDetailFragment | null }): string {
  const detail = t.paymentDetail;
  if (detail?.method === "card") return [detail.cardBrand ?? "Card", detail.cardLast4 ? `•••• ${detail.cardLast4}` : ""].filter(Boolean).join(" ");
  if (detail?.method === "mpesa") return detail.receipt ? `M-Pesa ${detail.receipt}` : "M-Pesa";
  return methodLabel(t.paymentMethod);
}

/** Who paid: the phone (254...) or the e-mail the payment carries, else its customer's. */
export const payerOf = (t: { email: string | null; phoneNumber?: string | null; customer?: { email: string } | null }) => t.phoneNumber ?? t.email ?? t.customer?.email ?? "—";

/** Whether a transaction arriving live belongs in the table as currently filtered. */
function matches(transaction: Transaction, filters: Filters): boolean {
  // The merchant's day, as the server's date filter counts it.
  const day = localDay(transaction.createdAt);
  // A search is answered by the server; a new arrival is left to the next load rather than guessed at here.
  if (filters.search.trim()) return false;
  return (!filters.status || transaction.status === filters.status) && (!filters.dateFrom || day >= filters.dateFrom) && (!filters.dateTo || day <= filters.dateTo);
}

export function Transactions({ mode }: { mode: Mode }) {
  const [filters, setFilters] = useState<Filters>({ status: "", dateFrom: "", dateTo: "", search: "" });
  // What is typed in the search box, searched on Enter or leaving the box. Kept in state so a page that renders
  // meanwhile (an answer or a live event arriving) leaves the typing as it is.
  const [searchDraft, setSearchDraft] = useState("");
  const cursors = useCursors();
  const variables = { first: PAGE_SIZE, after: cursors.after, status: filters.status || null, dateFrom: filters.dateFrom || null, dateTo: filters.dateTo || null, search: filters.search.trim() || null };
  // Rows may be live events' transactions (without the refunded figures): the answer, widened to them.
  const { data, error, loading, reload, setData } = useQuery<Answer, typeof variables>(QUERY, variables);
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  const firstPage = cursors.page === 1;

  useEffect(
    () =>
      onTransactionEvent(({ transaction }) => {
        setData((current) => {
          const edges = current.transactions.edges;
          const index = edges.findIndex((edge) => edge.node.reference === transaction.reference);
          if (index >= 0) {
            const updated = edges.slice();
            updated[index] = { node: { ...edges[index]!.node, ...transaction } };
            return { transactions: { ...current.transactions, edges: updated } };
          }
          if (!firstPage || !matches(transaction, filters)) return current;
          return { transactions: { ...current.transactions, totalCount: current.transactions.totalCount + 1, edges: [{ node: transaction }, ...edges] } };
        });
        setFresh((previous) => new Set(previous).add(transaction.reference));
      }),
    [setData, firstPage, filters],
  );
  // A refund of a row settled, or a row was disputed: load the page again, for its badges.
  const shown = data?.transactions.edges.map((edge) => edge.node.reference).join(",") ?? "";
  useEffect(() => onRefundEvent(({ refund }) => shown.split(",").includes(refund.transactionReference) && void reload()), [shown, reload]);
  useEffect(() => onDisputeEvent(({ dispute }) => shown.split(",").includes(dispute.transactionReference) && void reload()), [shown, reload]);
  // After a dropped connection, events may have been missed: load the page again.
  useEffect(() => onLiveStatus((_status, reconnected) => reconnected && void reload()), [reload]);

  const setFilter = (name: keyof Filters, value: string) => {
    setFilters({ ...filters, [name]: value });
    cursors.reset();
  };
  const filtered = Boolean(filters.status || filters.dateFrom || filters.dateTo || filters.search.trim());
  const connection = data?.transactions;
  const rows = connection?.edges.map((edge) => edge.node) ?? [];
  const noPaymentsYet = connection !== undefined && rows.length === 0 && !filtered && firstPage;

  return (
    <section>
      <PageHeader title="Transactions">
        {!noPaymentsYet && (
          <ExportCsv
            id="transactions-export"
            fallbackName="transactions.csv"
            href={reportUrl("/v1/reports/transactions.csv", { status: filters.status, date_from: filters.dateFrom, date_to: filters.dateTo, search: filters.search.trim() })}
          />
        )}
      </PageHeader>
      {!noPaymentsYet && (
        <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label="Filter transactions">
          <div class="field grow">
            <label for="filter-search">Search</label>
            <input
              id="filter-search"
              type="search"
              maxLength={100}
              placeholder="Reference, your order number, M-Pesa receipt, phone or e-mail"
              aria-describedby="filter-search-hint"
              value={searchDraft}
              onInput={(e) => setSearchDraft(e.currentTarget.value)}
              onChange={(e) => setFilter("search", e.currentTarget.value)}
            />
            <small id="filter-search-hint" class="muted">
              Exact: a phone in any form (0712…, 254712…, +254712…), an e-mail in any case.
            </small>
          </div>
          <div class="field status-field">
            <label for="filter-status">Status</label>
            <select id="filter-status" value={filters.status} onChange={(e) => setFilter("status", e.currentTarget.value)}>
              <option value="">All</option>
              <option value="pending">Pending</option>
              <option value="completed">Completed</option>
              <option value="failed">Failed</option>
            </select>
          </div>
          <DateRangeFields
            ids="filter"
            from={filters.dateFrom}
            to={filters.dateTo}
            onChange={setFilter}
            filtered={filtered}
            onClear={() => (setFilters({ status: "", dateFrom: "", dateTo: "", search: "" }), setSearchDraft(""), cursors.reset())}
          />
        </form>
      )}
      <ErrorNote message={error} />
      {!connection && loading && <Loading />}
      {noPaymentsYet && <NoPaymentsYet mode={mode} />}
      {connection && rows.length === 0 && (filtered || !firstPage) && <EmptyState title="No transactions match these filters" />}
      {rows.length > 0 && (
        <>
          <p class="muted count" id="transactions-count">
            {connection!.totalCount} transaction{connection!.totalCount === 1 ? "" : "s"}
          </p>
          <Table
            label="Transactions"
            bodyId="transactions-rows"
            rows={rows}
            rowKey="reference"
            rowProps={(t) => ({ "data-reference": t.reference, class: `clickable${fresh.has(t.reference) ? " fresh" : ""}`, onClick: () => navigate(`/transactions/${t.reference}`) })}
            columns={[
              {
                label: "Reference",
                cell: (t) => (
                  <a href={`${BASE}/transactions/${t.reference}`} onClick={(e) => (e.stopPropagation(), onLinkClick(e, `/transactions/${t.reference}`))} class="mono">
                    {t.reference}
                  </a>
                ),
              },
              {
                label: "Status",
                cell: (t) => (
                  <>
                    <Badge value={t.status} />
                    {t.amountRefunded ? <> <RefundedBadge payment={t} /></> : null}
                    {t.disputeStatus ? <> <DisputedBadge payment={t} /></> : null}
                  </>
                ),
              },
              { label: "Amount", num: true, cell: (t) => formatMoney(t.amount, t.currency) },
              { label: "Your reference", class: "break", cell: (t) => t.clientReference ?? "—" },
              { label: "Method", cell: (t) => paidWith(t), note: (t) => t.channel?.name },
              { label: "Payer", class: "break", cell: (t) => payerOf(t) },
              { label: "Date", cell: (t) => formatDate(t.createdAt) },
            ]}
          />
        </>
      )}
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}

function NoPaymentsYet({ mode }: { mode: Mode }) {
  const example = `curl -X POST ${location.origin}/api/transactions/initialize \\
  -H "X-API-Key: sk_${mode}_..." -H "Content-Type: application/json" \\
  -d '{"email": "payer@example.com", "amount": 1000}'`;
  return (
    <EmptyState title="No payments yet">
      {mode === "test" ? (
        <>
          <p>Make a test payment to see it arrive here live:</p>
          <ol>
            <li>
              Add a <strong>sandbox</strong> channel under{" "}
              <a href={`${BASE}/channels`} onClick={(e) => onLinkClick(e, "/channels")}>
                Payment channels
              </a>{" "}
              and create a test key under{" "}
              <a href={`${BASE}/api-keys`} onClick={(e) => onLinkClick(e, "/api-keys")}>
                API keys
              </a>
              .
            </li>
            <li>Start a payment of KES 10.00 with your test key:</li>
          </ol>
          <pre class="code">{example}</pre>
          <p>Open the authorization_url it answers and pay with the test card 4084 0840 8408 4081.</p>
        </>
      ) : (
        <p>
          Live payments appear here as soon as your customers pay through a live channel (M-Pesa or Paystack with your production credentials, under{" "}
          <a href={`${BASE}/channels`} onClick={(e) => onLinkClick(e, "/channels")}>
            Payment channels
          </a>
          ); the Overview lists what is left before you go live. Switch to test mode to try the gateway without real money.
        </p>
      )}
    </EmptyState>
  );
}
