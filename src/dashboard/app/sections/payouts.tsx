import { useState } from "preact/hooks";
import { formatDate, formatMoney } from "../format.ts";
import { Badge, EmptyState, ErrorNote, Loading, PageHeader, TableWrap, useQuery } from "../ui.tsx";

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
type Answer = { payouts: { totalCount: number; pageInfo: { hasNextPage: boolean; endCursor: string | null }; edges: { node: Payout }[] } };

export function Payouts() {
  const [cursors, setCursors] = useState<(string | null)[]>([]);
  const { data, error, loading } = useQuery<Answer>(QUERY, { first: 20, after: cursors[cursors.length - 1] ?? null });
  const connection = data?.payouts;
  return (
    <section>
      <PageHeader title="Payouts" />
      <ErrorNote message={error} />
      {!data && loading && <Loading />}
      {connection && connection.edges.length === 0 && (
        <EmptyState title="No payouts yet">
          <p>Payouts send money to a phone through an M-Pesa channel; owners start them through the API (createPayout or POST /v1/payouts).</p>
        </EmptyState>
      )}
      {connection && connection.edges.length > 0 && (
        <TableWrap label="Payouts">
          <thead>
            <tr>
              <th scope="col">Reference</th>
              <th scope="col">Status</th>
              <th scope="col" class="num">
                Amount
              </th>
              <th scope="col">Phone</th>
              <th scope="col">Receipt</th>
              <th scope="col">Date</th>
            </tr>
          </thead>
          <tbody>
            {connection.edges.map(({ node: payout }) => (
              <tr key={payout.databaseId}>
                <th scope="row" data-label="Reference" class="mono">
                  {payout.reference}
                  {payout.description && <span class="muted block">{payout.description}</span>}
                </th>
                <td data-label="Status">
                  <Badge value={payout.status} />
                  {payout.failureReason && <span class="muted block">{payout.failureReason}</span>}
                </td>
                <td data-label="Amount" class="num">
                  {formatMoney(payout.amount, payout.currency)}
                </td>
                <td data-label="Phone">{payout.phoneNumber}</td>
                <td data-label="Receipt">{payout.providerReference ?? "—"}</td>
                <td data-label="Date">{formatDate(payout.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      )}
      {connection && (cursors.length > 0 || connection.pageInfo.hasNextPage) && (
        <nav class="pager" aria-label="Pages">
          <button type="button" class="secondary" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
            Previous
          </button>
          <span class="muted">Page {cursors.length + 1}</span>
          <button type="button" class="secondary" disabled={!connection.pageInfo.hasNextPage} onClick={() => setCursors([...cursors, connection.pageInfo.endCursor])}>
            Next
          </button>
        </nav>
      )}
    </section>
  );
}
