import { useState } from "preact/hooks";
import { ExportCsv, reportUrl } from "../export.tsx";
import { formatDate, formatMoney, titleCase } from "../format.ts";
import { useReloadOnMoney } from "../money-events.ts";
import { graphql } from "../gql/index.ts";
import type { BalanceTransactionType, DashboardBalancesQuery } from "../gql/graphql.ts";
import { CursorPager, useCursors } from "../paging.tsx";
import { DateRangeFields, Listing, Table } from "../tables.tsx";
import { BASE, onLinkClick } from "../router.ts";
import { Badge, EmptyState, PageHeader, useQuery } from "../ui.tsx";

/**
 * The Balances page: the money held at each channel (GraphQL `balance`, from the ledger) and the balance transactions
 * that moved it (`balanceTransactions`), filtered, paged and exported as CSV (GET /v1/reports/balance-transactions.csv
 * with the same filters).
 */

const BALANCES = graphql(`
  query DashboardBalances {
    balance { paymentChannelId provider currency collected fees refunded paidOut pendingOut disputed chargedBack adjustments available }
    paymentChannels { databaseId name }
  }
`);
type ChannelBalance = DashboardBalancesQuery["balance"][number];
type ChannelName = DashboardBalancesQuery["paymentChannels"][number];
type BalanceRow = ChannelBalance & { key: string; channelName: string };

/** Every type the API filters by, in the order a merchant meets them (a dispute's hold, release or loss included). */
const TYPES = ["payment", "refund", "refund_failure", "payout", "payout_failure", "dispute_hold", "dispute_release", "dispute_loss", "adjustment"] as const satisfies readonly BalanceTransactionType[];
// A type the schema gains and this list lacks fails the typecheck here.
const EVERY_TYPE_LISTED: Exclude<BalanceTransactionType, (typeof TYPES)[number]> extends never ? true : never = true;
void EVERY_TYPE_LISTED;
const PAGE_SIZE = 10;
const TRANSACTIONS = graphql(`
  query DashboardBalanceTransactions($first: Int!, $after: String, $type: BalanceTransactionType, $paymentChannelId: Int, $dateFrom: String, $dateTo: String) {
    balanceTransactions(first: $first, after: $after, type: $type, paymentChannelId: $paymentChannelId, dateFrom: $dateFrom, dateTo: $dateTo) {
      totalCount pageInfo { ...DashboardPageInfo }
      edges { node { databaseId type amount fee net currency paymentChannelId sourceReference description createdAt } }
    }
  }
`);

function useBalances() {
  const { data, error, loading, reload } = useQuery(BALANCES);
  useReloadOnMoney(reload);
  const names = new Map(data?.paymentChannels.map((channel) => [channel.databaseId, channel.name]));
  const rows: BalanceRow[] | undefined = data?.balance.map((b) => ({ ...b, key: `${b.paymentChannelId}-${b.currency}`, channelName: names.get(b.paymentChannelId) ?? `Channel ${b.paymentChannelId}` }));
  return { data, rows, error, loading };
}
const money = (field: keyof ChannelBalance) => (b: BalanceRow) => formatMoney(b[field] as number, b.currency);
const NO_BALANCES = (
  <EmptyState title="No balances yet">
    <p>A channel's balance starts with its first completed payment.</p>
  </EmptyState>
);

type BalanceColumn = { label: string; num: boolean; cell: (b: BalanceRow) => string };

/** A row per channel and currency: the channel, what is available and what is on its way out, then `more` columns. */
function ChannelBalances({ label, bodyId, rows, more = [] }: { label: string; bodyId: string; rows: BalanceRow[]; more?: BalanceColumn[] }) {
  return (
    <Table
      label={label}
      bodyId={bodyId}
      rows={rows}
      rowKey="key"
      rowProps={(b) => ({ "data-channel": String(b.paymentChannelId), "data-currency": b.currency })}
      columns={[
        { label: "Channel", cell: (b) => b.channelName, note: (b) => `${titleCase(b.provider)} · ${b.currency}` },
        { label: "Available", num: true, cell: (b) => <strong>{formatMoney(b.available, b.currency)}</strong> },
        { label: "Pending out", num: true, cell: money("pendingOut") },
        ...more,
      ]}
    />
  );
}

/** The Overview's short view: what is available at each channel, and the way to the Balances page. */
export function BalanceSummary() {
  const { rows, error, loading } = useBalances();
  return (
    <section aria-labelledby="balance-summary-title">
      <div class="section-header">
        <h2 id="balance-summary-title">Available per channel</h2>
        <a href={`${BASE}/balances`} id="balances-link" onClick={(e) => onLinkClick(e, "/balances")}>
          Balances and balance transactions
        </a>
      </div>
      <Listing items={rows} loading={loading} error={error} empty={NO_BALANCES}>
        {(items) => (
<ChannelBalances label="Available per channel" bodyId="balance-summary-rows" rows={items} />
        )}
      </Listing>
    </section>
  );
}

/** The Balances page: each channel's balance in full (Disputed once a dispute has held money), then the balance transactions. */
export function BalancesPage() {
  const { data, rows, error, loading } = useBalances();
  const disputes = rows?.some((b) => b.disputed > 0 || b.chargedBack > 0);
  return (
    <section aria-labelledby="balances-title">
      <PageHeader title="Balances" />
      <h2 id="balances-title">Balance per channel</h2>
      <Listing items={rows} loading={loading} error={error} empty={NO_BALANCES}>
        {(items) => (
          <ChannelBalances
            label="Balance per channel"
            bodyId="balance-rows"
            rows={items}
            more={[
              ...(disputes ? [{ label: "Disputed", num: true, cell: money("disputed") }, { label: "Charged back", num: true, cell: money("chargedBack") }] : []),
              { label: "Collected", num: true, cell: money("collected") },
              { label: "Fees", num: true, cell: money("fees") },
              { label: "Refunded", num: true, cell: money("refunded") },
              { label: "Paid out", num: true, cell: money("paidOut") },
              { label: "Adjustments", num: true, cell: money("adjustments") },
            ]}
          />
        )}
      </Listing>
      <BalanceTransactions channels={data?.paymentChannels ?? []} />
    </section>
  );
}

interface Filters {
  type: string;
  channel: string;
  dateFrom: string;
  dateTo: string;
}
const NO_FILTERS: Filters = { type: "", channel: "", dateFrom: "", dateTo: "" };

function BalanceTransactions({ channels }: { channels: ChannelName[] }) {
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const cursors = useCursors();
  const variables = {
    first: PAGE_SIZE,
    after: cursors.after,
    type: (filters.type || null) as BalanceTransactionType | null,
    paymentChannelId: filters.channel ? Number(filters.channel) : null,
    dateFrom: filters.dateFrom || null,
    dateTo: filters.dateTo || null,
  };
  const { data, error, loading, reload } = useQuery(TRANSACTIONS, variables);
  useReloadOnMoney(reload);
  const setFilter = (name: keyof Filters, value: string) => {
    setFilters({ ...filters, [name]: value });
    cursors.reset();
  };
  const names = new Map(channels.map((channel) => [channel.databaseId, channel.name]));
  const filtered = Object.values(filters).some(Boolean);
  const connection = data?.balanceTransactions;
  const csv = reportUrl("/v1/reports/balance-transactions.csv", {
    type: filters.type,
    payment_channel_id: filters.channel,
    date_from: filters.dateFrom,
    date_to: filters.dateTo,
  });

  return (
    <section aria-labelledby="balance-transactions-title">
      <div class="section-header">
        <h2 id="balance-transactions-title">Balance transactions</h2>
        <ExportCsv href={csv} fallbackName="balance-transactions.csv" id="balance-transactions-export" />
      </div>
      <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label="Filter balance transactions">
        <div class="field">
          <label for="bt-type">Type</label>
          <select id="bt-type" value={filters.type} onChange={(e) => setFilter("type", e.currentTarget.value)}>
            <option value="">All</option>
            {TYPES.map((type) => (
              <option key={type} value={type}>
                {titleCase(type)}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="bt-channel">Channel</label>
          <select id="bt-channel" value={filters.channel} onChange={(e) => setFilter("channel", e.currentTarget.value)}>
            <option value="">All</option>
            {channels.map((channel) => (
              <option key={channel.databaseId} value={String(channel.databaseId)}>
                {channel.name}
              </option>
            ))}
          </select>
        </div>
        <DateRangeFields ids="bt" from={filters.dateFrom} to={filters.dateTo} onChange={setFilter} filtered={filtered} onClear={() => (setFilters(NO_FILTERS), cursors.reset())} />
      </form>
      <Listing
        items={connection?.edges.map((edge) => edge.node)}
        loading={loading}
        error={error}
        empty={<EmptyState title={filtered ? "No balance transactions match these filters" : "No balance transactions yet"} />}
      >
        {(items) => (
          <>
            <p class="muted count" id="balance-transactions-count">
              {connection!.totalCount} balance transaction{connection!.totalCount === 1 ? "" : "s"}
            </p>
            <Table
              label="Balance transactions"
              bodyId="balance-transaction-rows"
              rows={items}
              rowKey="databaseId"
              rowProps={(t) => ({ "data-type": t.type, "data-source": t.sourceReference })}
              columns={[
                { label: "Source", class: "mono", cell: (t) => t.sourceReference, note: (t) => t.description },
                { label: "Type", cell: (t) => <Badge value={t.type} kind={t.type.endsWith("failure") ? "failed" : "info"} /> },
                { label: "Amount", num: true, cell: (t) => formatMoney(t.amount, t.currency) },
                { label: "Fee", num: true, cell: (t) => formatMoney(t.fee, t.currency) },
                { label: "Net", num: true, cell: (t) => formatMoney(t.net, t.currency) },
                { label: "Channel", cell: (t) => names.get(t.paymentChannelId) ?? `Channel ${t.paymentChannelId}` },
                { label: "Date", cell: (t) => formatDate(t.createdAt) },
              ]}
            />
          </>
        )}
      </Listing>
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}
