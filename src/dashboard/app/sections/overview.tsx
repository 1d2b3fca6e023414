import { useState } from "preact/hooks";
import { expectOk, type Ok } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardOverviewQuery } from "../gql/graphql.ts";
import { BarChart } from "../chart.tsx";
import { BalanceSummary } from "./balances.tsx";
import { GoLiveChecklist } from "./go-live.tsx";
import type { Session } from "../session.ts";
import { formatMoney, localDay, majorUnits } from "../format.ts";
import { useReloadOnMoney } from "../money-events.ts";
import { ErrorNote, Loading, PageHeader, useQuery } from "../ui.tsx";

/**
 * The landing page: today's, the last 7 and the last 30 days' figures (paymentStats; days of the merchant's time
 * zone, which the answer names), a chart of the last 30 days' volume, then the balances. Figures follow live events: a settled payment or refund loads them again.
 */

const CHART_DAYS = 30;
const PERIODS = [1, 7, 30] as const;

graphql(`
  fragment DashboardFigures on PaymentFigures {
    volume { currency amount count } completedCount failedCount successRate refunds { currency amount count }
  }
`);
const QUERY = graphql(`
  query DashboardOverview($days: Int!, $periods: [Int!]!) {
    paymentStats(days: $days, periods: $periods) {
      __typename ...DashboardError ... on PaymentStats { asOf timezone daily { date ...DashboardFigures } periods { days since ...DashboardFigures } }
    }
  }
`);
type Stats = Ok<DashboardOverviewQuery["paymentStats"]>;
type Day = Stats["daily"][number];
type Period = Stats["periods"][number];
type CurrencyTotal = Day["volume"][number];

const PERIOD_TITLES: Record<number, string> = { 1: "Today", 7: "Last 7 days", 30: "Last 30 days" };

/** "25 Nov" for a day (YYYY-MM-DD, already the merchant's): formatted as a calendar date, so in UTC, not shifted again. */
export function shortDay(date: string): string {
  return new Date(`${date}T00:00:00Z`).toLocaleDateString("en-GB", { day: "numeric", month: "short", timeZone: "UTC" });
}

/** A zone as people read it: Africa/Nairobi is "Africa/Nairobi", UTC "UTC". */
const zoneName = (zone: string) => zone.replace(/_/g, " ");

/** An axis value in major units, short: 950, 1.2K, 3.4M. */
function compactMajor(minor: number, currency: string): string {
  return Number(majorUnits(minor, currency)).toLocaleString("en-US", { notation: "compact", maximumFractionDigits: 1 });
}

const plural = (count: number, word: string) => `${count.toLocaleString("en-US")} ${word}${count === 1 ? "" : "s"}`;

export function Overview({ session }: { session?: Session }) {
  const { data, error, loading, reload } = useQuery(QUERY, { days: CHART_DAYS, periods: [...PERIODS] });
  let stats: Stats | null = null;
  let failure = error;
  try {
    stats = data ? expectOk(data.paymentStats) : null;
  } catch (problem) {
    failure = problem instanceof Error ? problem.message : String(problem);
  }

  // A payment or refund that settles changes the figures.
  useReloadOnMoney(reload);

  return (
    <section>
      <PageHeader title="Overview" />
      {session?.mode === "live" && session.user.role !== "viewer" && <GoLiveChecklist />}
      <ErrorNote message={failure} />
      {!stats && loading && <Loading />}
      {stats && (
        <>
          <p class="muted hint" id="overview-as-of">
            Days are {zoneName(stats.timezone)} days (the time zone in Brand settings); a payment counts on the day it was started. Figures as of{" "}
            {new Date(stats.asOf).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", timeZone: stats.timezone })} <span id="overview-zone">{stats.timezone}</span> time.
          </p>
          <div class="stat-cards">
            {stats.periods.map((period) => (
              <PeriodCard key={period.days} period={period} zone={stats.timezone} />
            ))}
          </div>
          <VolumeChart daily={stats.daily} zone={stats.timezone} />
        </>
      )}
      <BalanceSummary />
    </section>
  );
}

function Amounts({ totals, none, what }: { totals: CurrencyTotal[]; none: string; what: string }) {
  if (totals.length === 0) return <span class="muted">{none}</span>;
  return (
    <>
      {totals.map((total) => (
        <span key={total.currency} class="amount-line" data-currency={total.currency} data-amount={total.amount} data-count={total.count}>
          <strong>{formatMoney(total.amount, total.currency)}</strong> <span class="muted">{plural(total.count, what)}</span>
        </span>
      ))}
    </>
  );
}

function PeriodCard({ period, zone }: { period: Period; zone: string }) {
  const title = PERIOD_TITLES[period.days] ?? `Last ${period.days} days`;
  // `since` is the first day's midnight in the merchant's zone: its date there.
  const day = localDay(period.since, zone);
  const settled = period.completedCount + period.failedCount;
  const headingId = `period-${period.days}`;
  return (
    <section class="card stat-card" data-period={period.days} aria-labelledby={headingId}>
      <h2 id={headingId}>
        {title} <span class="muted since">{period.days === 1 ? shortDay(day) : `since ${shortDay(day)}`}</span>
      </h2>
      <dl class="stat-list">
        <div>
          <dt>Volume</dt>
          <dd class="stat-volume">
            <Amounts totals={period.volume} none="No payments" what="payment" />
          </dd>
        </div>
        <div>
          <dt>Success rate</dt>
          <dd class="stat-rate" data-completed={period.completedCount} data-failed={period.failedCount}>
            {period.successRate === null ? (
              <span class="muted">—</span>
            ) : (
              <>
                <strong>{(period.successRate * 100).toLocaleString("en-US", { maximumFractionDigits: 1 })}%</strong>{" "}
                <span class="muted">
                  {period.completedCount} of {plural(settled, "settled payment")}
                </span>
              </>
            )}
          </dd>
        </div>
        <div>
          <dt>Refunds</dt>
          <dd class="stat-refunds">
            <Amounts totals={period.refunds} none="None" what="refund" />
          </dd>
        </div>
      </dl>
    </section>
  );
}

/** The daily volume of one currency (the busiest, or the one picked) over the chart's days. */
function VolumeChart({ daily, zone }: { daily: Day[]; zone: string }) {
  const counts = new Map<string, number>();
  for (const day of daily) for (const total of day.volume) counts.set(total.currency, (counts.get(total.currency) ?? 0) + total.count);
  const currencies = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([currency]) => currency);
  const [picked, setPicked] = useState<string | null>(null);
  const currency = picked && currencies.includes(picked) ? picked : currencies[0];
  const first = daily[0]?.date;
  const last = daily[daily.length - 1]?.date;

  const bars = daily.map((day) => {
    const total = day.volume.find((t) => t.currency === currency);
    const amount = total?.amount ?? 0;
    return {
      key: day.date,
      value: amount,
      title: `${shortDay(day.date)}: ${currency ? formatMoney(amount, currency) : "no payments"}${total ? ` (${plural(total.count, "payment")})` : ""}`,
    };
  });
  const sum = bars.reduce((total, bar) => total + bar.value, 0);
  const count = currency ? (counts.get(currency) ?? 0) : 0;

  return (
    <section class="card chart-card" aria-labelledby="volume-chart-title">
      <div class="chart-header">
        <h2 id="volume-chart-title">
          Daily volume, last {daily.length} days{currency && <span class="muted since"> {currency}</span>}
        </h2>
        {currencies.length > 1 && (
          <div class="field inline-field">
            <label for="chart-currency">Currency</label>
            <select id="chart-currency" value={currency} onChange={(event) => setPicked(event.currentTarget.value)}>
              {currencies.map((code) => (
                <option key={code} value={code}>
                  {code}
                </option>
              ))}
            </select>
          </div>
        )}
      </div>
      {currency ? (
        <>
          <BarChart
            id="volume-chart"
            bars={bars}
            label={`Completed payments per day (${zoneName(zone)}) in ${currency}, ${first ? shortDay(first) : ""} to ${last ? shortDay(last) : ""}: ${formatMoney(sum, currency)} in all`}
            axisLabel={shortDay}
            tickLabel={(value) => compactMajor(value, currency)}
          />
          <p class="muted hint">
            {shortDay(first!)} – {shortDay(last!)} ({zoneName(zone)}): {formatMoney(sum, currency)} in {plural(count, "payment")}. Point at a bar for its day.
          </p>
        </>
      ) : (
        <p class="muted" id="volume-chart-empty">
          No completed payments in the last {daily.length} days.
        </p>
      )}
    </section>
  );
}
