import type { Principal } from "./auth.ts";
import type { Prisma, TransactionStatus } from "./db/generated/prisma/client.ts";
import { ValidationError } from "./errors.ts";

/** The list filters transactions and payouts share: status and an inclusive UTC date range. */
export interface StatusDateFilters {
  status?: string | null;
  dateFrom?: string | null;
  dateTo?: string | null;
}

const statuses: readonly TransactionStatus[] = ["pending", "completed", "failed"];
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The days a date filter may name, both ends included. 0001-01-01 is PostgreSQL's first day (it has no year 0);
 * 9999-12-30 is the last whose next midnight (a date_to's exclusive end) still has a four-digit year, which
 * the drivers can send: 9999-12-31 and year 10000 are refused rather than failing in the database.
 */
export const FIRST_DAY = "0001-01-01";
export const LAST_DAY = "9999-12-30";

/** A calendar date YYYY-MM-DD (UTC) that exists, between FIRST_DAY and LAST_DAY: 2024-02-30 and 2024-13-45 are rejected. */
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
  if (from || to) where.createdAt = { ...(from ? { gte: from } : {}), ...(to ? { lt: new Date(to.getTime() + DAY_MS) } : {}) };
  return where;
}
