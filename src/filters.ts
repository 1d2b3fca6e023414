import type { Principal } from "./auth.ts";
import type { Db } from "./db/database.ts";
import type { Prisma, TransactionStatus } from "./db/generated/prisma/client.ts";
import { isTimeZone, localDayRange, UTC } from "./days.ts";
import { ValidationError } from "./errors.ts";

/**
 * The list filters transactions and payouts share: status and an inclusive range of days in `timeZone`. The
 * merchant's zone unless a caller asks for another: the /api family asks for UTC, its published meaning.
 */
export interface StatusDateFilters {
  status?: string | null;
  dateFrom?: string | null;
  dateTo?: string | null;
  /** The IANA zone whose days dateFrom and dateTo name (see withTimeZone); UTC when unset. */
  timeZone?: string | null;
}

const statuses: readonly TransactionStatus[] = ["pending", "completed", "failed"];
/** PostgreSQL's first instant that the drivers send (no year 0): a day range never starts before it. */
const FIRST_INSTANT = new Date("0001-01-01T00:00:00.000Z");

/**
 * The days a date filter may name, both ends included. 0001-01-01 is PostgreSQL's first day (it has no year 0);
 * 9999-12-30 is the last whose next midnight (a date_to's exclusive end) still has a four-digit year, which
 * the drivers can send: 9999-12-31 and year 10000 are refused rather than failing in the database.
 */
export const FIRST_DAY = "0001-01-01";
export const LAST_DAY = "9999-12-30";

/** A calendar date YYYY-MM-DD that exists, between FIRST_DAY and LAST_DAY: 2024-02-30 and 2024-13-45 are rejected. */
export function parseDay(value: string, field: string): Date {
  // Not Date.UTC: it reads the years 0 to 99 as 1900 to 1999.
  const date = /^\d{4}-\d{2}-\d{2}$/.test(value) ? new Date(`${value}T00:00:00.000Z`) : null;
  if (!date || Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== value) throw new ValidationError(field, "must be a date in YYYY-MM-DD format");
  if (value < FIRST_DAY || value > LAST_DAY) throw new ValidationError(field, `must be between ${FIRST_DAY} and ${LAST_DAY}`);
  return date;
}

export function parseStatus(value: string, field = "status"): TransactionStatus {
  if (!statuses.includes(value as TransactionStatus)) throw new ValidationError(field, `must be one of ${statuses.join(", ")}`);
  return value as TransactionStatus;
}

/** The filters as a Prisma where, scoped to the caller's merchant and mode. */
export function statusDateWhere(principal: Principal, filters: StatusDateFilters) {
  const where: { merchantId: number; mode: Principal["mode"]; status?: TransactionStatus; createdAt?: Prisma.DateTimeFilter } = {
    merchantId: principal.merchantId,
    mode: principal.mode,
  };
  if (filters.status) where.status = parseStatus(filters.status);
  const from = filters.dateFrom ? parseDay(filters.dateFrom, "date_from") : undefined;
  const to = filters.dateTo ? parseDay(filters.dateTo, "date_to") : undefined;
  if (from && to && from > to) throw new ValidationError("date_from", "must not be after date_to");
  if (from || to) {
    const range = localDayRange(filters.timeZone || UTC, from && filters.dateFrom!, to && filters.dateTo!);
    where.createdAt = { ...(range.gte ? { gte: range.gte < FIRST_INSTANT ? FIRST_INSTANT : range.gte } : {}), ...(range.lt ? { lt: range.lt } : {}) };
  }
  return where;
}

/** A zone a caller asked for by name (GraphQL's timeZone argument), checked. */
export function parseTimeZone(value: string, field = "timeZone"): string {
  if (!isTimeZone(value)) throw new ValidationError(field, "must be an IANA time zone name, e.g. Africa/Nairobi or UTC");
  return value;
}

/** The merchant's time zone (Brand settings; UTC unless set): the zone its days are counted in. */
export async function merchantTimeZone(db: Db, merchantId: number): Promise<string> {
  const merchant = await db.merchant.findUnique({ where: { id: merchantId }, select: { timezone: true } });
  const zone = merchant?.timezone;
  return zone && isTimeZone(zone) ? zone : UTC;
}

/** The filters with the zone their days are in: the one asked for (checked), else the merchant's. */
export async function withTimeZone<F extends StatusDateFilters>(db: Db, principal: Principal, filters: F): Promise<F & { timeZone: string }> {
  const timeZone = filters.timeZone ? parseTimeZone(filters.timeZone) : await merchantTimeZone(db, principal.merchantId);
  return { ...filters, timeZone };
}
