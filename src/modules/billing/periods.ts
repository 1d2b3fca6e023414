/**
 * Billing periods. Period n of a subscription starts at anchor + n intervals, computed from the anchor each time
 * (not by adding to the previous period), so a month that starts on the 31st comes back to the 31st after February.
 * Calendar arithmetic is in UTC.
 */
export const PLAN_INTERVALS = ["day", "week", "month", "quarter", "year"] as const;
export type PlanInterval = (typeof PLAN_INTERVALS)[number];

const DAY_MS = 86_400_000;
const MONTHS: Partial<Record<PlanInterval, number>> = { month: 1, quarter: 3, year: 12 };

/** `at` moved forward by `count` intervals; a month-based move keeps the day of the month, clamped to the month's last day. */
export function addIntervals(at: Date, interval: PlanInterval, count: number): Date {
  const months = MONTHS[interval];
  if (months === undefined) return new Date(at.getTime() + count * (interval === "week" ? 7 : 1) * DAY_MS);
  const total = at.getUTCMonth() + months * count;
  const year = at.getUTCFullYear() + Math.floor(total / 12);
  const month = ((total % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return new Date(Date.UTC(year, month, Math.min(at.getUTCDate(), lastDay), at.getUTCHours(), at.getUTCMinutes(), at.getUTCSeconds(), at.getUTCMilliseconds()));
}

/** Where period `n` (from 0) of a subscription anchored at `anchor` starts. */
export const periodStart = (anchor: Date, plan: { interval: string; intervalCount: number }, n: number) => addIntervals(anchor, plan.interval as PlanInterval, plan.intervalCount * n);
