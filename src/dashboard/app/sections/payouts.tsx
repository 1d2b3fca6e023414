import { formatDate, formatMoney } from "../format.ts";
import { CursorPager, useCursors, type Connection } from "../paging.tsx";
import { Listing, Table } from "../tables.tsx";
import { Badge, EmptyState, PageHeader, useQuery } from "../ui.tsx";
import { providerCallsColumn } from "./provider-calls.tsx";

const QUERY = `query DashboardPayouts($first: Int!, $after: String) {
  payouts(first: $first, after: $after) {
    totalCount pageInfo { hasNextPage endCursor }
    edges { node { databaseId reference status amount currency phoneNumber description providerReference failureReason createdAt } }
  }
}`;

interface Payout {
  databaseId: number;
  reference: string;
  status: string;
  amount: number;
  currency: string;
  phoneNumber: string;
  description: string | null;
  providerReference: string | null;
  failureReason: string | null;
  createdAt: string;
}
type Answer = { payouts: Connection<Payout> };

export function Payouts() {
  const cursors = useCursors();
  const { data, error, loading } = useQuery<Answer>(QUERY, { first: 20, after: cursors.after });
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
              ...providerCallsColumn<Payout>("payout"),
            ]}
          />
        )}
      </Listing>
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}
