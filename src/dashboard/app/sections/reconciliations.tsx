import { useState } from "preact/hooks";
import { expectOk, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardReconciliationFragment, DashboardReconciliationQuery, ReconciliationItemKind } from "../gql/graphql.ts";
import { CardForm } from "../forms.tsx";
import { formatDate, formatMoney, titleCase } from "../format.ts";
import { CursorPager, useCursors } from "../paging.tsx";
import { BASE, navigate, onLinkClick } from "../router.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, EmptyState, ErrorNote, Loading, PageHeader, announce, useQuery } from "../ui.tsx";

/**
 * Reconciliation reports: each compares one channel's UTC day in the gateway with the provider's own record
 * (GraphQL `reconciliations` / `reconciliation(id)`); the detail lists every difference. An owner can run one.
 */

/** What the summary JSON holds that the page shows (every part optional: older reports may lack one). */
interface Side {
  count?: number;
  completed_totals?: Record<string, number>;
  by_status?: Record<string, number>;
}
interface Summary {
  provider?: string;
  gateway?: Side | null;
  provider_record?: Side | null;
  differences?: number;
  settled_via_verify?: number;
  items?: Partial<Record<ReconciliationItemKind, number>>;
}
/** The summary is JSON in the schema: what the page reads of it. */
const summaryOf = (report: Report) => report.summary as Summary | null;

graphql(`fragment DashboardReconciliation on Reconciliation { databaseId paymentChannelId date status summary error createdAt completedAt }`);
type Report = DashboardReconciliationFragment;
graphql(`fragment DashboardChannelName on PaymentChannel { databaseId name provider }`);
const LIST = graphql(`
  query DashboardReconciliations($first: Int!, $after: String) {
    reconciliations(first: $first, after: $after) { totalCount pageInfo { ...DashboardPageInfo } edges { node { ...DashboardReconciliation } } }
    paymentChannels { ...DashboardChannelName }
  }
`);
const DETAIL = graphql(`
  query DashboardReconciliation($id: Int!) {
    reconciliation(id: $id) {
      __typename
      ...DashboardError
      ... on Reconciliation {
        ...DashboardReconciliation
        items { databaseId kind reference providerReference gatewayStatus providerStatus gatewayAmount providerAmount currency resolution }
      }
    }
    paymentChannels { ...DashboardChannelName }
  }
`);
type Channel = DashboardReconciliationQuery["paymentChannels"][number];
type Item = Extract<DashboardReconciliationQuery["reconciliation"], { __typename: "Reconciliation" }>["items"][number];
const RUN = graphql(`
  mutation DashboardRunReconciliation($input: RunReconciliationInput!) {
    runReconciliation(input: $input) { __typename ...DashboardError ... on Reconciliation { databaseId } }
  }
`);

const KIND_WORDS: Record<ReconciliationItemKind, string> = {
  missing_here: "Missing here",
  missing_there: "Missing at the provider",
  status_mismatch: "Status differs",
  amount_mismatch: "Amount differs",
  reversed_not_disputed: "Reversed at the provider",
};

const channelName = (channels: Channel[] | undefined, id: number) => channels?.find((c) => c.databaseId === id)?.name ?? `Channel ${id}`;
const differences = (report: Report) => summaryOf(report)?.differences ?? Object.values(summaryOf(report)?.items ?? {}).reduce((sum, n) => sum + (n ?? 0), 0);
const reportKind = (report: Report) => (report.status === "completed" ? (differences(report) === 0 ? "completed" : "pending") : report.status === "failed" ? "failed" : "info");
const reportWords = (report: Report) => (report.status === "completed" ? (differences(report) === 0 ? "matched" : "differences") : report.status);

export function Reconciliations({ route, session }: { route: string; session: Session }) {
  const detail = /^\/reconciliations\/(\d+)$/.exec(route);
  return detail ? <ReconciliationDetail id={Number(detail[1])} /> : <ReconciliationList session={session} />;
}

function ReconciliationList({ session }: { session: Session }) {
  const cursors = useCursors();
  const { data, error, loading, reload } = useQuery(LIST, { first: 20, after: cursors.after });
  const [running, setRunning] = useState(false);
  const connection = data?.reconciliations;
  const owner = session.user.role === "owner" && canWrite(session);
  return (
    <section>
      <PageHeader title="Reconciliation">
        {owner && !running && (
          <button type="button" onClick={() => setRunning(true)}>
            Run a reconciliation
          </button>
        )}
      </PageHeader>
      <p class="muted hint">Each report compares one channel's payments of one UTC day with the provider's own record, and lists every difference.</p>
      {running && data && (
        <RunForm
          channels={data.paymentChannels}
          onDone={(id) => {
            setRunning(false);
            if (id !== null) navigate(`/reconciliations/${id}`);
            else void reload();
          }}
        />
      )}
      <Listing
        items={connection?.edges.map((edge) => edge.node)}
        loading={loading}
        error={error}
        empty={
          <EmptyState title="No reconciliation reports yet">
            <p>The daily job reconciles each channel's previous day; an owner can also run one for any channel and day.</p>
          </EmptyState>
        }
      >
        {(reports) => (
          <Table
            label="Reconciliation reports"
            bodyId="reconciliation-rows"
            rows={reports}
            rowKey="databaseId"
            rowProps={(r) => ({ "data-id": String(r.databaseId), "data-status": r.status, class: "clickable", onClick: () => navigate(`/reconciliations/${r.databaseId}`) })}
            columns={[
              {
                label: "Day",
                cell: (r) => (
                  <a href={`${BASE}/reconciliations/${r.databaseId}`} onClick={(e) => (e.stopPropagation(), onLinkClick(e, `/reconciliations/${r.databaseId}`))}>
                    {r.date}
                  </a>
                ),
              },
              { label: "Channel", cell: (r) => channelName(data?.paymentChannels, r.paymentChannelId), note: (r) => (summaryOf(r)?.provider ? titleCase(summaryOf(r)!.provider!) : null) },
              { label: "Result", cell: (r) => <Badge value={reportWords(r)} kind={reportKind(r)} />, note: (r) => r.error },
              { label: "Differences", num: true, cell: (r) => (r.status === "completed" ? String(differences(r)) : "—") },
              { label: "Run", cell: (r) => formatDate(r.createdAt) },
            ]}
          />
        )}
      </Listing>
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}

function RunForm({ channels, onDone }: { channels: Channel[]; onDone: (id: number | null) => void }) {
  const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
  const [channel, setChannel] = useState(String(channels[0]?.databaseId ?? ""));
  const [date, setDate] = useState(yesterday);
  const submit = async () => {
    const report = await mutate(RUN, "runReconciliation", { input: { paymentChannelId: Number(channel), date } });
    announce("Reconciliation finished");
    onDone(report.databaseId);
  };
  return (
    <CardForm id="reconcile-form" title="Run a reconciliation" titleId="reconcile-title" submit="Run" onSubmit={submit} onCancel={() => onDone(null)}>
      <div class="grid">
        <div class="field">
          <label for="reconcile-channel">Channel</label>
          <select id="reconcile-channel" value={channel} onChange={(e) => setChannel(e.currentTarget.value)} required>
            {channels.map((c) => (
              <option key={c.databaseId} value={String(c.databaseId)}>
                {c.name} ({titleCase(c.provider)})
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="reconcile-date">Day (UTC)</label>
          <input id="reconcile-date" type="date" value={date} max={new Date().toISOString().slice(0, 10)} onChange={(e) => setDate(e.currentTarget.value)} required />
        </div>
      </div>
    </CardForm>
  );
}

function Totals({ side }: { side: Side | null | undefined }) {
  if (!side) return <span class="muted">No list from the provider</span>;
  const totals = Object.entries(side.completed_totals ?? {});
  return (
    <>
      {side.count ?? 0} payment{side.count === 1 ? "" : "s"}
      {totals.map(([currency, amount]) => (
        <span key={currency} class="muted block">
          {formatMoney(amount, currency)} completed
        </span>
      ))}
    </>
  );
}

function ReconciliationDetail({ id }: { id: number }) {
  const { data, error, loading } = useQuery(DETAIL, { id });
  let report: (Report & { items: Item[] }) | null = null;
  let failure = error;
  try {
    report = data ? expectOk(data.reconciliation) : null;
  } catch (problem) {
    failure = problem instanceof Error ? problem.message : String(problem);
  }
  const amount = (value: number | null, item: Item) => (value === null ? "—" : item.currency ? formatMoney(value, item.currency) : String(value));
  return (
    <section>
      <a class="back" href={`${BASE}/reconciliations`} onClick={(e) => onLinkClick(e, "/reconciliations")}>
        ← All reports
      </a>
      <PageHeader title={report ? `Reconciliation of ${report.date}` : "Reconciliation"} />
      <ErrorNote message={failure} />
      {!report && loading && <Loading />}
      {report && (
        <>
          <dl class="fields card" id="reconciliation-fields">
            <div>
              <dt>Channel</dt>
              <dd>{channelName(data?.paymentChannels, report.paymentChannelId)}</dd>
            </div>
            <div>
              <dt>Result</dt>
              <dd>
                <Badge value={reportWords(report)} kind={reportKind(report)} />
                {report.error && <span class="muted block">{report.error}</span>}
              </dd>
            </div>
            <div>
              <dt>Differences</dt>
              <dd id="reconciliation-differences">{differences(report)}</dd>
            </div>
            <div>
              <dt>Gateway</dt>
              <dd>
                <Totals side={summaryOf(report)?.gateway} />
              </dd>
            </div>
            <div>
              <dt>Provider</dt>
              <dd>
                <Totals side={summaryOf(report)?.provider_record} />
              </dd>
            </div>
            <div>
              <dt>Settled through verify</dt>
              <dd>{summaryOf(report)?.settled_via_verify ?? 0}</dd>
            </div>
            <div>
              <dt>Run</dt>
              <dd>
                {formatDate(report.createdAt)}
                {report.completedAt && <span class="muted block">finished {formatDate(report.completedAt)}</span>}
              </dd>
            </div>
          </dl>
          <h2>Differences</h2>
          {report.items.length === 0 ? (
            <EmptyState title={report.status === "completed" ? "The gateway and the provider agree" : "No differences recorded"} />
          ) : (
            <Table
              label="Differences"
              bodyId="reconciliation-items"
              rows={report.items}
              rowKey="databaseId"
              rowProps={(item) => ({ "data-kind": item.kind, "data-reference": item.reference ?? item.providerReference ?? "" })}
              columns={[
                { label: "Difference", cell: (item) => KIND_WORDS[item.kind] ?? titleCase(item.kind), note: (item) => (item.resolution ? titleCase(item.resolution) : null) },
                { label: "Reference", class: "mono break", cell: (item) => item.reference ?? "—" },
                { label: "Provider reference", class: "mono break", cell: (item) => item.providerReference ?? "—" },
                { label: "Here", cell: (item) => (item.gatewayStatus ? titleCase(item.gatewayStatus) : "Not recorded"), note: (item) => amount(item.gatewayAmount, item) },
                { label: "At the provider", cell: (item) => (item.providerStatus ? titleCase(item.providerStatus) : "Not recorded"), note: (item) => amount(item.providerAmount, item) },
              ]}
            />
          )}
        </>
      )}
    </section>
  );
}
