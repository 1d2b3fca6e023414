import { useState } from "preact/hooks";
import { formatDate } from "../format.ts";
import type { Column } from "../tables.tsx";
import { getSession, type Session } from "../session.ts";
import { graphql } from "../gql/index.ts";
import { ErrorNote, Loading, TableWrap, useQuery } from "../ui.tsx";

/**
 * What the gateway sent a payment's, refund's or payout's provider and what came back (scrubbed), for support.
 * Owners and developers only, as the API decides (a viewer's page shows nothing of it).
 */
type Owner = "transaction" | "refund" | "payout";

graphql(`fragment DashboardProviderCall on ProviderCall { connector operation method path statusCode durationMs requestBody responseBody error createdAt }`);

/** One static document per owner (what codegen can type). */
const QUERIES = {
  transaction: graphql(`
    query DashboardTransactionProviderCalls($reference: String!) {
      transaction(reference: $reference) { __typename ...DashboardError ... on Transaction { providerCalls { ...DashboardProviderCall } } }
    }
  `),
  refund: graphql(`
    query DashboardRefundProviderCalls($reference: String!) {
      refund(reference: $reference) { __typename ...DashboardError ... on Refund { providerCalls { ...DashboardProviderCall } } }
    }
  `),
  payout: graphql(`
    query DashboardPayoutProviderCalls($reference: String!) {
      payout(reference: $reference) { __typename ...DashboardError ... on Payout { providerCalls { ...DashboardProviderCall } } }
    }
  `),
};

export function canReadProviderCalls(session: Session | null): boolean {
  return session !== null && (session.user.role === "owner" || session.user.role === "developer");
}

/** Pretty JSON when the body is JSON, else as it came. */
function readable(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function CallsTable({ owner, reference }: { owner: Owner; reference: string }) {
  const { data, error, loading } = useQuery(QUERIES[owner] as typeof QUERIES.transaction, { reference });
  const answer = (data as Record<Owner, NonNullable<typeof data>["transaction"]> | null)?.[owner];
  const calls = answer && "providerCalls" in answer ? answer.providerCalls : null;
  if (!calls) return loading ? <Loading /> : <ErrorNote message={error ?? (answer && "message" in answer ? answer.message : null)} />;
  if (calls.length === 0) return <p class="muted">No provider calls on record (they are kept 30 days).</p>;
  return (
    <TableWrap label="Provider calls">
      <thead>
        <tr>
          <th scope="col">Call</th>
          <th scope="col">Answer</th>
          <th scope="col" class="num">Took</th>
          <th scope="col">When</th>
          <th scope="col">Bodies</th>
        </tr>
      </thead>
      <tbody id={`${owner}-provider-calls`}>
        {calls.map((call, i) => (
          <tr key={i} data-operation={call.operation}>
            <th scope="row">
              {call.connector} {call.operation}
              <span class="muted block mono">
                {call.method} {call.path}
              </span>
            </th>
            <td>{call.statusCode ?? call.error ?? "—"}</td>
            <td class="num">{call.durationMs} ms</td>
            <td>{formatDate(call.createdAt)}</td>
            <td>
              <details>
                <summary>Show</summary>
                <p class="muted">Sent</p>
                <pre class="code">{call.requestBody ? readable(call.requestBody) : "—"}</pre>
                <p class="muted">Received</p>
                <pre class="code">{call.responseBody ? readable(call.responseBody) : "—"}</pre>
              </details>
            </td>
          </tr>
        ))}
      </tbody>
    </TableWrap>
  );
}

/** The transaction page's section: a heading and its calls (its checkout attempts' included). */
export function ProviderCallsSection({ owner, reference }: { owner: Owner; reference: string }) {
  if (!canReadProviderCalls(getSession())) return null;
  return (
    <>
      <h2>Provider calls</h2>
      <CallsTable owner={owner} reference={reference} />
    </>
  );
}

/** A row's calls (a refund's, a payout's), loaded when opened. */
function ProviderCallsDisclosure({ owner, reference }: { owner: Owner; reference: string }) {
  const [open, setOpen] = useState(false);
  return (
    <details onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Show</summary>
      {open && <CallsTable owner={owner} reference={reference} />}
    </details>
  );
}

/** A "Provider calls" column for a table of refunds or payouts, or none for a viewer. */
export function providerCallsColumn<T extends { reference: string }>(owner: Owner): Column<T>[] {
  if (!canReadProviderCalls(getSession())) return [];
  return [{ label: "Provider calls", cell: (row) => <ProviderCallsDisclosure owner={owner} reference={row.reference} /> }];
}
