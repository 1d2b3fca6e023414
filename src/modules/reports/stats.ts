import type { Principal } from "../../auth.ts";
import type { Db } from "../../db/database.ts";
import { addDays, localDay, startOfLocalDay } from "../../days.ts";
import { ValidationError } from "../../errors.ts";
import { merchantTimeZone } from "../../filters.ts";
import { dailyPaymentFigures, dailyRefundFigures } from "./store.ts";

/**
 * The dashboard overview's figures: per day and per period (today, the last 7 days, ...), the volume and
 * count of completed payments per currency, completed and failed counts and the success rate, and completed
 * refunds per currency. Two grouped statements (store.ts), summed here; a payment or refund belongs to the
 * day it was created on in the merchant's time zone, as in the lists' date filters.
 */

export const MAX_STATS_DAYS = 366;
const DAY_MS = 24 * 60 * 60 * 1000;

/** An amount in one currency and how many payments or refunds make it. */
export interface CurrencyTotal {
  currency: string;
  amount: bigint;
  count: number;
}

export interface StatsFigures {
  volume: CurrencyTotal[];
  completedCount: number;
  failedCount: number;
  /** completed / (completed + failed); null when nothing settled. */
  successRate: number | null;
  refunds: CurrencyTotal[];
}

export interface StatsDay extends StatsFigures {
  /** YYYY-MM-DD, a day in the merchant's zone. */
  date: string;
}

export interface StatsPeriod extends StatsFigures {
  /** The number of days, today included. */
  days: number;
  /** The period's first day's midnight in the merchant's zone. */
  since: Date;
}

export interface PaymentStats {
  /** When the figures were read. */
  asOf: Date;
  /** The merchant's time zone (IANA name): the zone of every day here. */
  timezone: string;
  /** One per local day, oldest first, today last; days with nothing are included. */
  daily: StatsDay[];
  periods: StatsPeriod[];
}

function checkDays(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 1 || value > MAX_STATS_DAYS) throw new ValidationError(field, `must be a whole number of days from 1 to ${MAX_STATS_DAYS}`);
  return value;
}


function addTo(totals: Map<string, CurrencyTotal>, currency: string, amount: bigint, count: number) {
  const total = totals.get(currency) ?? { currency, amount: 0n, count: 0 };
  totals.set(currency, { currency, amount: total.amount + amount, count: total.count + count });
}

interface Accumulator {
  volume: Map<string, CurrencyTotal>;
  refunds: Map<string, CurrencyTotal>;
  completed: number;
  failed: number;
}
const emptyAccumulator = (): Accumulator => ({ volume: new Map(), refunds: new Map(), completed: 0, failed: 0 });

function figures(acc: Accumulator): StatsFigures {
  const settled = acc.completed + acc.failed;
  const sorted = (totals: Map<string, CurrencyTotal>) => [...totals.values()].sort((a, b) => b.count - a.count || a.currency.localeCompare(b.currency));
  return {
    volume: sorted(acc.volume).filter((total) => total.count > 0),
    completedCount: acc.completed,
    failedCount: acc.failed,
    successRate: settled === 0 ? null : acc.completed / settled,
    refunds: sorted(acc.refunds),
  };
}

/**
 * The caller's figures for the last `days` days (the daily series) and for each of `periods` (numbers of
 * days, today included), in its merchant and mode, its days those of the merchant's time zone.
 */
export async function paymentStats(db: Db, principal: Principal, input: { days?: number | null; periods?: readonly number[] | null }, now = new Date()): Promise<PaymentStats> {
  const days = checkDays(input.days ?? 30, "days");
  const periods = input.periods ?? [1, 7, 30];
  if (periods.length > 10) throw new ValidationError("periods", "at most 10 periods");
  periods.forEach((period) => checkDays(period, "periods"));
  const window = Math.max(days, ...periods);
  const zone = await merchantTimeZone(db, principal.merchantId);
  const today = localDay(now, zone);
  const firstDay = addDays(today, -(window - 1));
  // The instants computed once here; the database groups by the local day (store.ts).
  const since = startOfLocalDay(firstDay, zone);
  const [payments, refunds] = await Promise.all([dailyPaymentFigures(db, principal, since, zone), dailyRefundFigures(db, principal, since, zone)]);

  // Index 0 is the window's first day, window - 1 today (days as dates: a DST day's 23 or 25 hours do not matter).
  const byDay = Array.from({ length: window }, emptyAccumulator);
  const dayIndex = (day: string) => Math.round((Date.parse(`${day}T00:00:00Z`) - Date.parse(`${firstDay}T00:00:00Z`)) / DAY_MS);
  for (const row of payments) {
    const acc = byDay[dayIndex(row.day)];
    if (!acc) continue; // created after the local midnight of a day that began since `now` was read
    acc.completed += row.completed;
    acc.failed += row.failed;
    addTo(acc.volume, row.currency, row.volume, row.completed);
  }
  for (const row of refunds) {
    const acc = byDay[dayIndex(row.day)];
    if (acc) addTo(acc.refunds, row.currency, row.amount, row.count);
  }

  const sum = (accs: Accumulator[]): Accumulator => {
    const total = emptyAccumulator();
    for (const acc of accs) {
      total.completed += acc.completed;
      total.failed += acc.failed;
      for (const t of acc.volume.values()) addTo(total.volume, t.currency, t.amount, t.count);
      for (const t of acc.refunds.values()) addTo(total.refunds, t.currency, t.amount, t.count);
    }
    return total;
  };

  return {
    asOf: now,
    timezone: zone,
    daily: byDay.slice(window - days).map((acc, i) => ({ date: addDays(today, -(days - 1 - i)), ...figures(acc) })),
    periods: periods.map((period) => ({ days: period, since: startOfLocalDay(addDays(today, -(period - 1)), zone), ...figures(sum(byDay.slice(window - period))) })),
  };
}
