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

/** A calendar date YYYY-MM-DD (UTC) that exists: 2024-02-30 and 2024-13-45 are rejected. */
function parseDay(value: string, field: string): Date {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  const date = match ? new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]))) : null;
  if (!date || date.toISOString().slice(0, 10) !== value) throw new ValidationError(field, "must be a date in YYYY-MM-DD format");
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
