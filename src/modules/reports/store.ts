import type { Principal } from "../../auth.ts";
import type { Db } from "../../db/database.ts";

/**
 * The overview's grouped statements: one over the transactions, one over the refunds, each counting and summing
 * the caller's rows per day of the merchant's time zone and currency (stats.ts adds them up). Reads only; every
 * write to those tables stays in their own stores. Days follow created_at, as the lists' date filters do, so a
 * day's figures are that day's filtered list. PostgreSQL turns each instant into its local day (its tz database,
 * DST included); the filter on created_at stays a plain range the indexes serve.
 */

/** One local day's settled payments in one currency. */
export interface DailyPaymentFigures {
  /** YYYY-MM-DD, in the zone asked for. */
  day: string;
  currency: string;
  completed: number;
  failed: number;
  /** The completed payments' amounts, in minor units. */
  volume: bigint;
}

/** One local day's completed refunds in one currency. */
export interface DailyRefundFigures {
  /** YYYY-MM-DD, in the zone asked for. */
  day: string;
  currency: string;
  count: number;
  amount: bigint;
}

/** The caller's completed and failed payments created since `since` (the merchant, mode, status, created_at index serves it). */
export async function dailyPaymentFigures(db: Db, principal: Principal, since: Date, zone: string): Promise<DailyPaymentFigures[]> {
  const rows = await db.$queryRaw<(Omit<DailyPaymentFigures, "volume"> & { volume: string })[]>`
    SELECT to_char(created_at AT TIME ZONE ${zone}::text, 'YYYY-MM-DD') AS day, currency,
      (count(*) FILTER (WHERE status = 'completed'))::int AS completed,
      (count(*) FILTER (WHERE status = 'failed'))::int AS failed,
      coalesce(sum(amount) FILTER (WHERE status = 'completed'), 0)::text AS volume
    FROM transactions
    WHERE merchant_id = ${principal.merchantId} AND mode = ${principal.mode}::"Mode" AND status IN ('completed', 'failed') AND created_at >= ${since}
    GROUP BY 1, 2 ORDER BY 1, 2`;
  return rows.map((row) => ({ ...row, volume: BigInt(row.volume) }));
}

/**
 * How long before the day a payment or refund counted in it may have been created: the bound on created_at lets the
 * (merchant, mode, status, created_at) index serve the summary, which filters on when rows settled. Checkouts expire
 * in hours and refunds settle in days; a row settling later than this is not in any summary.
 */
export const SETTLING_LOOKBACK_DAYS = 31;

/**
 * One merchant's day in one mode, per currency, for its daily summary e-mail: payments that completed or failed
 * in [from, to) (by when they settled, which is the day the merchant heard of them), and refunds completed then.
 */
export async function dayTotals(db: Db, merchantId: number, mode: "test" | "live", from: Date, to: Date) {
  const earliest = new Date(from.getTime() - SETTLING_LOOKBACK_DAYS * 86_400_000);
  const rows = await db.$queryRaw<{ currency: string; payments: number; volume: string; failures: number; refunds: number; refunded: string }[]>`
    WITH p AS (
      SELECT currency, (count(*) FILTER (WHERE status = 'completed'))::int AS payments, coalesce(sum(amount) FILTER (WHERE status = 'completed'), 0) AS volume,
        (count(*) FILTER (WHERE status = 'failed'))::int AS failures
      FROM transactions
      WHERE merchant_id = ${merchantId} AND mode = ${mode}::"Mode" AND status IN ('completed', 'failed')
        AND created_at >= ${earliest}
        AND coalesce(completed_at, updated_at) >= ${from} AND coalesce(completed_at, updated_at) < ${to}
      GROUP BY 1
    ), r AS (
      SELECT currency, count(*)::int AS refunds, sum(amount) AS refunded FROM refunds
      WHERE merchant_id = ${merchantId} AND mode = ${mode}::"Mode" AND status = 'completed'
        AND created_at >= ${earliest}
        AND completed_at >= ${from} AND completed_at < ${to}
      GROUP BY 1
    )
    SELECT coalesce(p.currency, r.currency) AS currency, coalesce(p.payments, 0) AS payments, coalesce(p.volume, 0)::text AS volume,
      coalesce(p.failures, 0) AS failures, coalesce(r.refunds, 0) AS refunds, coalesce(r.refunded, 0)::text AS refunded
    FROM p FULL JOIN r ON r.currency = p.currency ORDER BY 1`;
  return rows.map((row) => ({ ...row, volume: BigInt(row.volume), refunded: BigInt(row.refunded) }));
}

/** The caller's completed refunds created since `since`. */
export async function dailyRefundFigures(db: Db, principal: Principal, since: Date, zone: string): Promise<DailyRefundFigures[]> {
  const rows = await db.$queryRaw<(Omit<DailyRefundFigures, "amount"> & { amount: string })[]>`
    SELECT to_char(created_at AT TIME ZONE ${zone}::text, 'YYYY-MM-DD') AS day, currency, count(*)::int AS count, sum(amount)::text AS amount
    FROM refunds
    WHERE merchant_id = ${principal.merchantId} AND mode = ${principal.mode}::"Mode" AND status = 'completed' AND created_at >= ${since}
    GROUP BY 1, 2 ORDER BY 1, 2`;
  return rows.map((row) => ({ ...row, amount: BigInt(row.amount) }));
}
