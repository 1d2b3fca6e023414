import { ValidationError } from "./errors.ts";

/** Offset paging shared by every paged list: page from 1, limit 1..100 (default 20). */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface Paging {
  page: number;
  limit: number;
}

export interface Page<T> extends Paging {
  items: T[];
  total: number;
  pages: number;
}

export function resolvePaging(input: { page?: number | null; limit?: number | null }): Paging {
  const page = input.page ?? 1;
  const limit = input.limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isSafeInteger(page) || page < 1) throw new ValidationError("page", "must be a positive integer");
  if (!Number.isSafeInteger(limit) || limit < 1) throw new ValidationError("limit", "must be a positive integer");
  if (limit > MAX_PAGE_SIZE) throw new ValidationError("limit", `must be at most ${MAX_PAGE_SIZE}`);
  return { page, limit };
}

/** skip/take for a query, and the envelope numbers once the total is known. */
export function pageWindow({ page, limit }: Paging) {
  return { skip: (page - 1) * limit, take: limit };
}

export function toPage<T>(items: T[], total: number, paging: Paging): Page<T> {
  return { items, total, page: paging.page, limit: paging.limit, pages: Math.ceil(total / paging.limit) };
}
