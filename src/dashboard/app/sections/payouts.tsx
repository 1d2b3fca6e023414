import { formatDate, formatMoney } from "../format.ts";
import { graphql } from "../gql/index.ts";
import { CursorPager, useCursors } from "../paging.tsx";
import { Listing, Table } from "../tables.tsx";
import { Badge, EmptyState, PageHeader, useQuery } from "../ui.tsx";
import { providerCallsColumn } from "./provider-calls.tsx";

const QUERY = graphql(`
  query DashboardPayouts($first: Int!, $after: String) {
    payouts(first: $first, after: $after) {
      totalCount pageInfo { ...DashboardPageInfo }
      edges { node { databaseId reference status amount currency phoneNumber description providerReference failureReason createdAt } }
    }
  }
`);

export function Payouts() {
  const cursors = useCursors();
  const { data, error, loading } = useQuery(QUERY, { first: 20, after: cursors.after });
  const connection = data?.payouts;
  return (
    <section>
      <PageHeader title="Payouts" />
      <Listing
        items={connection?.edges.map((edge) => edge.node)}
        loading={loading}
        error={error}
        empty={
          <EmptyState title="No payouts yet">
            <p>Payouts send money to a phone through an M-Pesa channel; owners start them through the API (createPayout or POST /v1/payouts).</p>
          </EmptyState>
        }
      >
        {(payouts) => (
          <Table
            label="Payouts"
            rows={payouts}
            rowKey="databaseId"
            columns={[
              { label: "Reference", class: "mono", cell: (payout) => payout.reference, note: (payout) => payout.description },
              { label: "Status", cell: (payout) => <Badge value={payout.status} />, note: (payout) => payout.failureReason },
              { label: "Amount", num: true, cell: (payout) => formatMoney(payout.amount, payout.currency) },
              { label: "Phone", cell: (payout) => payout.phoneNumber },
              { label: "Receipt", cell: (payout) => payout.providerReference ?? "—" },
              { label: "Date", cell: (payout) => formatDate(payout.createdAt) },
              ...providerCallsColumn("payout"),
            ]}
          />
        )}
      </Listing>
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}
