import type { Principal } from "./auth.ts";
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

/** What one list's store reads, for filters already resolved. */
export interface FilteredReads<Row, Filters, Query> {
  page(principal: Principal, filters: Filters, paging: Paging, query: Query): Promise<{ items: Row[]; total: number }>;
  slice(principal: Principal, filters: Filters, query: object): Promise<Row[]>;
  count(principal: Principal, filters: Filters): Promise<number>;
}

/**
 * A list's three reads as GraphQL's paged and connection fields take them (graphql/offset-page.ts): a page with
 * totals, a connection's rows and their count, each after the caller's input is turned into the store's filters;
 * filters that can match nothing (null: e.g. a transaction that is not the caller's) answer empty without a query.
 */
export function filteredList<Row, Input, Filters, Query = object>(filtersOf: (principal: Principal, input: Input) => Promise<Filters | null>, reads: FilteredReads<Row, Filters, Query>) {
  return {
    async listPage(principal: Principal, input: Input & { page?: number | null; limit?: number | null }, query = {} as Query): Promise<Page<Row>> {
      const paging = resolvePaging(input);
      const filters = await filtersOf(principal, input);
      if (!filters) return toPage([], 0, paging);
      const { items, total } = await reads.page(principal, filters, paging, query);
      return toPage(items, total, paging);
    },
    async connectionSlice(principal: Principal, input: Input, query: object): Promise<Row[]> {
      const filters = await filtersOf(principal, input);
      return filters ? reads.slice(principal, filters, query) : [];
    },
    async count(principal: Principal, input: Input): Promise<number> {
      const filters = await filtersOf(principal, input);
      return filters ? reads.count(principal, filters) : 0;
    },
  };
}

/**
 * A paged list as its table and the list_counts rollups know it (prisma/migrations/*_list_rollups): the
 * scope, the rolled-up filters (a key column such as status, a channel, a created_at window) and any others.
 * Table and column names are code constants, never input; every value travels as a parameter.
 */
export interface CountedList {
  table: "transactions" | "payouts" | "refunds" | "customers" | "payment_links" | "ledger_entries" | "disputes";
  merchantId: number;
  mode: string;
  /** The rollup key's column, its SQL type, and the values the filter allows (or every value but `except`); absent for any. */
  key?: { column: string; type: string; values: readonly string[] } | { column: string; type: string; except: readonly string[] };
  channelId?: number | null;
  createdAt?: { gte?: Date; lt?: Date };
  /** Conditions the rollups do not keep (a search, a transaction id): the total is then counted from the indexes. */
  extra?: (param: (value: unknown) => string) => string;
  /**
   * With `extra`: find its matches through their own indexes first, then take the newest (the default). False:
   * walk the list's index newest first, testing each row, which is cheaper while the merchant has few rows
   * (listRowCount) and a search's index holds every merchant's rows.
   */
  matchesFirst?: boolean;
  /**
   * The page's order when it is not newest first (a code constant, ending with the unique id): the page is then read
   * with OFFSET along an index in that order; the total is the rollups' all the same.
   */
  order?: string;
  /**
   * With `order` (`column` DESC NULLS FIRST first): the rows with `column` set are also counted by `column`'s day and
   * hour in list_counts as `rollup` (disputes' closed_at), so a deep page past the nulls skips to its hour.
   */
  closedFirst?: { column: string; rollup: string };
}

const DAY_MS = 24 * 60 * 60 * 1000;
const floorDay = (d: Date) => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);
const ceilDay = (d: Date) => new Date(Math.ceil(d.getTime() / DAY_MS) * DAY_MS);
const dayText = (d: Date) => d.toISOString().slice(0, 10);
/** Below this offset a page simply walks the index; from it on, the per-day counts say where to start. */
export const DAY_SKIP_FROM = 1000;

/**
 * Two subqueries over one parameter list, for one statement (one snapshot, so the total and the page agree):
 * `total`, the exact number of matching rows, and `ids`, the page's ids newest first.
 *
 * total: the rollups' all-time rows (at most 16 per key), or their days within a date window, plus the
 * partial edge days counted from the index (a UTC merchant's windows are whole UTC days, so none; another
 * zone's days start at another hour, so two partial days, each at most a day of rows read from the index);
 * counted from the indexes when the list has a filter the rollups do not keep.
 *
 * ids: from the (merchant_id, mode[, key], created_at DESC, id DESC) index alone (a deferred join: the caller
 * reads the rows of those ids only). A deep page does not walk what it skips: the per-day counts, summed
 * newest day first, find the UTC day its first row falls in, that day's per-hour counts the hour, and the index is
 * entered at the end of that hour with the offset left within it (windows of whole UTC days; another zone's window walks the index). Same order
 * and rows as `ORDER BY created_at DESC, id DESC OFFSET`.
 */
export function listStatements(list: CountedList, paging: Paging): { params: unknown[]; cte: string; total: string; ids: string } {
  const params: unknown[] = [];
  const param = (value: unknown) => `$${params.push(value)}`;
  const scope = `merchant_id = ${param(list.merchantId)} AND mode = ${param(list.mode)}::"Mode"`;
  let rollup = `list = '${list.table}' AND ${scope}`;
  let rows = scope;
  if (list.key && "except" in list.key) {
    // Every key but these (every balance transaction but the reservations): "<> ALL" reads to the planner as most of
    // the rows even before ANALYZE, so it walks the list's index in order. "= ANY(nine types)" read as a few, right
    // after a bulk load: it took them from the (merchant, mode, type) index and sorted a million entries for a page.
    const values = param(list.key.except);
    rows += ` AND ${list.key.column} <> ALL(${values}::${list.key.type}[])`;
    rollup += ` AND key <> ALL(${values}::text[])`;
  } else if (list.key) {
    const one = list.key.values.length === 1;
    const values = param(one ? list.key.values[0] : list.key.values);
    rows += one ? ` AND ${list.key.column} = ${values}::${list.key.type}` : ` AND ${list.key.column} = ANY(${values}::${list.key.type}[])`;
    rollup += one ? ` AND key = ${values}::text` : ` AND key = ANY(${values}::text[])`;
  }
  if (list.channelId != null) {
    const channel = param(list.channelId);
    rows += ` AND channel_id = ${channel}::int`;
    rollup += ` AND channel_id = ${channel}::int`;
  }
  const { gte, lt } = list.createdAt ?? {};
  if (gte) rows += ` AND created_at >= ${param(gte)}::timestamptz`;
  if (lt) rows += ` AND created_at < ${param(lt)}::timestamptz`;
  const extra = list.extra?.(param);
  const unsearched = rows;
  if (extra) rows += ` AND (${extra})`;

  // The whole UTC days of the window, [from, to); the edges outside them are counted from the index.
  const from = gte ? ceilDay(gte) : undefined;
  const to = lt ? floorDay(lt) : undefined;
  const count = (condition: string) => `(SELECT count(*) FROM ${list.table} WHERE ${condition})`;
  // The window's days in list_counts; parameters are added when first used (PostgreSQL refuses an unused one).
  let window: string | undefined;
  const days = () => {
    if (window === undefined) {
      window = `day > '-infinity'`;
      if (from) window += ` AND day >= ${param(dayText(from))}::date`;
      if (to) window += ` AND day < ${param(dayText(to))}::date`;
    }
    return window;
  };
  const aligned = (!gte || gte.getTime() === from!.getTime()) && (!lt || lt.getTime() === to!.getTime());
  // A search finds its matches once, for its total and its page (`cte` goes before the statement): through the
  // search's own indexes, or (matchesFirst false) by reading the merchant's rows and testing each. The fences (a
  // materialized CTE, OFFSET 0) keep the planner to that choice: its guess of a search's matches swings with the
  // statistics, and a wrong guess reads every merchant's rows, or all of this one's.
  // With an order of its own, the matches keep every column it may sort by.
  const matchedColumns = list.order ? "*" : "id, created_at";
  const cte = !extra
    ? ""
    : list.matchesFirst === false
      ? `WITH matched AS MATERIALIZED (SELECT ${matchedColumns} FROM (SELECT * FROM ${list.table} WHERE ${unsearched} OFFSET 0) mine WHERE ${extra}) `
      : `WITH matched AS MATERIALIZED (SELECT ${matchedColumns} FROM ${list.table} WHERE ${rows}) `;
  let total: string;
  if (extra) total = `(SELECT count(*) FROM matched)`;
  else if (from && to && from >= to) total = count(rows);
  else if (!gte && !lt) total = `(SELECT coalesce(sum(n), 0) FROM list_counts WHERE ${rollup} AND day = '-infinity')`;
  else {
    const parts = [`(SELECT coalesce(sum(n), 0) FROM list_counts WHERE ${rollup} AND ${days()})`];
    if (gte && from && gte < from) parts.push(count(`${rows} AND created_at < ${param(from)}::timestamptz`));
    if (lt && to && to < lt) parts.push(count(`${rows} AND created_at >= ${param(to)}::timestamptz`));
    total = parts.join(" + ");
  }

  // The offset as exact text: (page - 1) * limit can pass 2^53 for an absurd page, and PostgreSQL takes a bigint.
  const offsetValue = (BigInt(paging.page) - 1n) * BigInt(paging.limit);
  const offset = `${param(String(offsetValue))}::bigint`;
  const limit = `${param(paging.limit)}::int`;
  const order = `ORDER BY ${list.order ?? "created_at DESC, id DESC"} LIMIT ${limit}`;
  let ids: string;
  /**
   * The page's ids past `before` rows, the rest ordered by `column` DESC: the per-day counts of `rollupWhere`, summed
   * newest day first, find the UTC day the page's first row falls in, that day's per-hour counts the hour, and the
   * index is entered at the end of that hour with the offset left within it: at most an hour of rows walked. Where a
   * day's hours do not add up to its count (a row counted by an older trigger), the day alone.
   */
  const skipTo = (column: string, rollupWhere: string, daysWhere: string, before: string) =>
    `WITH days AS (SELECT day, sum(n) AS n FROM list_counts WHERE ${rollupWhere} AND ${daysWhere} GROUP BY day),
      start AS (SELECT day, n, before FROM (SELECT day, n, ${before} + sum(n) OVER (ORDER BY day DESC) - n AS before FROM days) newer
        WHERE before + n > ${offset} ORDER BY day DESC LIMIT 1),
      hours AS (SELECT u.h, sum(u.cnt) AS n FROM list_counts, unnest(hours) WITH ORDINALITY AS u(cnt, h)
        WHERE ${rollupWhere} AND day = (SELECT day FROM start) GROUP BY u.h),
      hour_start AS (SELECT h, before FROM (SELECT h, n, (SELECT before FROM start) + sum(n) OVER (ORDER BY h DESC) - n AS before FROM hours) newer
        WHERE before + n > ${offset} AND (SELECT sum(n) FROM hours) = (SELECT n FROM start) ORDER BY h DESC LIMIT 1)
      SELECT id FROM ${list.table} WHERE ${rows}
        AND ${column} < coalesce((SELECT ((SELECT day FROM start) + h * interval '1 hour') AT TIME ZONE 'UTC' FROM hour_start),
                                 (SELECT (day + 1)::timestamp AT TIME ZONE 'UTC' FROM start))
      ${order} OFFSET coalesce((SELECT (${offset} - before)::bigint FROM hour_start), (SELECT (${offset} - before)::bigint FROM start))`;
  if (list.order) {
    ids = extra ? `SELECT id FROM matched ${order} OFFSET ${offset}` : `SELECT id FROM ${list.table} WHERE ${rows} ${order} OFFSET ${offset}`;
  } else if (extra) {
    // A search: its matches from their own indexes (trigram, or exact per field), then the newest of them. The
    // materialized CTE keeps the planner from walking the list's index in order, testing each row against the
    // search until it has a page: it guesses a search matches many rows, and for a rare term it reads them all.
    ids = `SELECT id FROM matched ${order} OFFSET ${offset}`;
  } else if (!aligned || offsetValue < BigInt(DAY_SKIP_FROM)) {
    ids = `SELECT id FROM ${list.table} WHERE ${rows} ${order} OFFSET ${offset}`;
  } else {
    ids = skipTo("created_at", rollup, days(), "0");
  }
  if (list.order && list.closedFirst && !extra && !gte && !lt && offsetValue >= BigInt(DAY_SKIP_FROM)) {
    // Rows without `column` first (the rollups' total less the closed rollup's), then newest `column` first: past
    // the first, a deep page finds its day and hour in the closed rollup as above. Only one branch answers rows.
    const closedRollup = rollup.replace(`list = '${list.table}'`, `list = '${list.closedFirst.rollup}'`);
    const open = `((${total}) - (SELECT coalesce(sum(n), 0) FROM list_counts WHERE ${closedRollup} AND day = '-infinity'))`;
    ids = `(SELECT id FROM (${ids}) plain WHERE ${open} > ${offset})
      UNION ALL (SELECT id FROM (${skipTo(list.closedFirst.column, closedRollup, "day > '-infinity'", open)}) skipped WHERE ${open} <= ${offset})`;
  }
  return { params, cte, total: `(${total})::int`, ids };
}

/** How many rows a merchant's list has in all (its rollup): one probe of list_counts. */
export async function listRowCount(db: RawQuery, table: CountedList["table"], merchantId: number, mode: string): Promise<number> {
  const [row] = await db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT coalesce(sum(n), 0)::int AS n FROM list_counts WHERE list = $1 AND merchant_id = $2 AND mode = $3::"Mode" AND day = '-infinity'`,
    table,
    merchantId,
    mode,
  );
  return row!.n;
}

/** What runs a list's statement: Prisma's client (or a transaction's), or the plain-SQL runner. */
export type RawQuery = { $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T> };

/** The page's ids, newest first, and the exact total, in one statement (listStatements). */
export async function pageOfIds<Id>(db: RawQuery, list: CountedList, paging: Paging): Promise<{ total: number; ids: Id[] }> {
  const { params, cte, total, ids } = listStatements(list, paging);
  const [row] = await db.$queryRawUnsafe<{ total: number; ids: Id[] }[]>(`${cte}SELECT ${total} AS total, ARRAY(${ids}) AS ids`, ...params);
  return { total: Number(row!.total), ids: row!.ids };
}

/**
 * The exact number of rows the list has (a connection's totalCount). Through pageOfIds with a one-row page:
 * the statement then uses every parameter (PostgreSQL refuses one it cannot type), for one index probe more.
 */
export async function countRows(db: RawQuery, list: CountedList): Promise<number> {
  return (await pageOfIds(db, list, { page: 1, limit: 1 })).total;
}
