import { useEffect, useState } from "preact/hooks";
import { graphql } from "../gql/index.ts";
import type { TransactionStatus } from "../gql/graphql.ts";
import { formatDate, formatMoney, titleCase } from "../format.ts";
import { onLiveStatus, onRefundEvent } from "../live.ts";
import { CursorPager, useCursors } from "../paging.tsx";
import { BASE, onLinkClick } from "../router.ts";
import { DateRangeFields, Listing, Table } from "../tables.tsx";
import { Badge, EmptyState, PageHeader, useQuery } from "../ui.tsx";

/**
 * Every refund of the merchant in this mode (GraphQL `refunds`, newest first), filtered by status and by day (days
 * of the merchant's time zone, as the API counts them). A refund's status follows refundEvents without a reload; a
 * refund made elsewhere (API, another tab) appears with the next event's reload.
 */
const REFUNDS = graphql(`
  query DashboardRefunds($first: Int!, $after: String, $status: TransactionStatus, $dateFrom: String, $dateTo: String) {
    refunds(first: $first, after: $after, status: $status, dateFrom: $dateFrom, dateTo: $dateTo) {
      totalCount pageInfo { ...DashboardPageInfo }
      edges { node { databaseId reference transactionReference amount currency status reason method failureReason createdAt completedAt } }
    }
  }
`);
const STATUSES = ["pending", "completed", "failed"] as const;
const PAGE_SIZE = 20;

interface Filters {
  status: TransactionStatus | "";
  dateFrom: string;
  dateTo: string;
}
const NO_FILTERS: Filters = { status: "", dateFrom: "", dateTo: "" };

export function RefundsPage() {
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const cursors = useCursors();
  const variables = { first: PAGE_SIZE, after: cursors.after, status: filters.status || null, dateFrom: filters.dateFrom || null, dateTo: filters.dateTo || null };
  const { data, error, loading, reload, setData } = useQuery(REFUNDS, variables);
  useEffect(() => {
    const stops = [
      onRefundEvent(({ refund }) => {
        // The row shown changes in place at once; the reload then applies the filters (a refund that is no longer
        // "pending" leaves a pending-only list) and brings refunds made elsewhere.
        setData((current) => ({
          ...current,
          refunds: { ...current.refunds, edges: current.refunds.edges.map((edge) => (edge.node.reference === refund.reference ? { ...edge, node: { ...edge.node, status: refund.status, failureReason: refund.failureReason ?? null } } : edge)) },
        }));
        void reload();
      }),
      onLiveStatus((_status, reconnected) => reconnected && void reload()),
    ];
    return () => stops.forEach((stop) => stop());
  }, [reload, setData]);
  const setFilter = (name: keyof Filters, value: string) => {
    setFilters({ ...filters, [name]: value });
    cursors.reset();
  };
  const filtered = Object.values(filters).some(Boolean);
  const connection = data?.refunds;
  return (
    <section>
      <PageHeader title="Refunds" />
      <p class="muted hint">Refunds are made from a payment's page. Their status here updates by itself as providers answer.</p>
      <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label="Filter refunds">
        <div class="field status-field">
          <label for="refunds-status">Status</label>
          <select id="refunds-status" value={filters.status} onChange={(e) => setFilter("status", e.currentTarget.value)}>
            <option value="">All</option>
            {STATUSES.map((status) => (
              <option value={status} key={status}>
                {titleCase(status)}
              </option>
            ))}
          </select>
        </div>
        <DateRangeFields ids="refunds" from={filters.dateFrom} to={filters.dateTo} onChange={setFilter} filtered={filtered} onClear={() => (setFilters(NO_FILTERS), cursors.reset())} />
      </form>
      <Listing
        items={connection?.edges.map((edge) => edge.node)}
        loading={loading && !connection}
        error={error}
        empty={
          <EmptyState title={filtered ? "No refunds match these filters" : "No refunds yet"}>
            {!filtered && <p>Open a completed payment and choose Refund: the refund shows here with its status.</p>}
          </EmptyState>
        }
      >
        {(refunds) => (
          <>
            <p class="muted count" id="refunds-count">
              {connection!.totalCount} refund{connection!.totalCount === 1 ? "" : "s"}
            </p>
            <Table
              label="Refunds"
              bodyId="refund-rows"
              rows={refunds}
              rowKey="reference"
              rowProps={(refund) => ({ "data-reference": refund.reference, "data-status": refund.status })}
              columns={[
                { label: "Reference", class: "mono", cell: (refund) => refund.reference },
                { label: "Status", cell: (refund) => <Badge value={refund.status} />, note: (refund) => refund.failureReason },
                { label: "Amount", num: true, cell: (refund) => formatMoney(refund.amount, refund.currency) },
                {
                  label: "Payment",
                  class: "mono",
                  cell: (refund) => (
                    <a href={`${BASE}/transactions/${encodeURIComponent(refund.transactionReference)}`} onClick={(e) => onLinkClick(e, `/transactions/${encodeURIComponent(refund.transactionReference)}`)}>
                      {refund.transactionReference}
                    </a>
                  ),
                  note: (refund) => titleCase(refund.method),
                },
                { label: "Reason", cell: (refund) => (refund.reason ? titleCase(refund.reason) : "—") },
                { label: "Created", cell: (refund) => formatDate(refund.createdAt) },
                { label: "Completed", cell: (refund) => formatDate(refund.completedAt) },
              ]}
            />
          </>
        )}
      </Listing>
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}
