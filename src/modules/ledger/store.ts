import type { Db, Sql } from "../../db/database.ts";
import type { LedgerEntry, Mode, Prisma } from "../../db/generated/prisma/client.ts";
import { countRows, pageOfIds, type CountedList, type Paging } from "../../paging.ts";
import { BALANCE_TRANSACTION_TYPES, type BalanceTransactionType, type EntryType } from "./postings.ts";

/** The entry types that are not balance transactions (EntryType is BalanceTransactionType and these). */
const RESERVATION_TYPES = ["refund_reservation", "payout_reservation"] as const satisfies readonly Exclude<EntryType, BalanceTransactionType>[];

/**
 * Reads of the ledger's tables. Writes are only ever the posting rules' statements (postings.ts), run inside
 * the money statements that cause them; nothing updates or deletes a ledger row (the database refuses).
 */

export interface LedgerScope {
  merchantId: number;
  mode: Mode;
}

/**
 * One channel's balance in one currency, from its accounts' balances (each the sum of its postings). The
 * accounts of a channel and currency sum to zero, so
 * available = collected - fees - refunded - paid_out - pending_out - disputed - charged_back + adjustments.
 */
export interface ChannelBalance {
  channelId: number;
  provider: string;
  currency: string;
  /** Payments received (the payers account, sign turned). */
  collected: bigint;
  fees: bigint;
  /** Refunds completed. */
  refunded: bigint;
  /** Payouts completed. */
  paidOut: bigint;
  /** Refunds and payouts in flight. */
  pendingOut: bigint;
  /** Corrections, money in positive. */
  adjustments: bigint;
  /** Held while payers' chargebacks are open. */
  disputed: bigint;
  /** Taken back by lost disputes. */
  chargedBack: bigint;
  available: bigint;
}

interface BalanceRow {
  channelId: number;
  provider: string;
  currency: string;
  kind: string;
  balance: string;
}

/**
 * Every channel's balances (or one channel's), per currency, ordered by channel and currency. Each account's
 * balance is its rows in ledger_account_balances (at most 16 stripes), which triggers on ledger_postings keep equal
 * to the sum of its postings: the cost is the number of accounts, not of postings (issue 42).
 */
export async function channelBalances(db: Db, scope: LedgerScope, channelId?: number | null): Promise<ChannelBalance[]> {
  const rows = await db.$queryRawUnsafe<BalanceRow[]>(
    `SELECT a.channel_id AS "channelId", c.provider, a.currency, a.kind, coalesce(sum(p.balance), 0)::text AS balance
     FROM ledger_accounts a
     JOIN payment_channels c ON c.id = a.channel_id
     LEFT JOIN ledger_account_balances p ON p.account_id = a.id
     WHERE a.merchant_id = $1 AND a.mode = $2::"Mode" AND ($3::int IS NULL OR a.channel_id = $3::int)
     GROUP BY a.channel_id, c.provider, a.currency, a.kind
     ORDER BY a.channel_id, a.currency`,
    scope.merchantId,
    scope.mode,
    channelId ?? null,
  );
  const byKey = new Map<string, ChannelBalance>();
  for (const row of rows) {
    const key = `${row.channelId}|${row.currency}`;
    let b = byKey.get(key);
    if (!b) {
      b = { channelId: row.channelId, provider: row.provider, currency: row.currency, collected: 0n, fees: 0n, refunded: 0n, paidOut: 0n, pendingOut: 0n, adjustments: 0n, disputed: 0n, chargedBack: 0n, available: 0n };
      byKey.set(key, b);
    }
    const amount = BigInt(row.balance);
    switch (row.kind) {
      case "payers": b.collected = -amount; break;
      case "fees": b.fees = amount; break;
      case "refunds": b.refunded = amount; break;
      case "payees": b.paidOut = amount; break;
      case "pending_out": b.pendingOut = amount; break;
      case "adjustments": b.adjustments = -amount; break;
      case "disputed": b.disputed = amount; break;
      case "chargebacks": b.chargedBack = amount; break;
      case "available": b.available = amount; break;
    }
  }
  return [...byKey.values()];
}

/** What a list of balance transactions is narrowed to; every read is also scoped by merchant and mode. */
export interface BalanceTransactionFilters {
  type?: BalanceTransactionType | null;
  channelId?: number | null;
  /** An inclusive-from, exclusive-to window on created_at (the /v1 lists' date_from/date_to, already parsed). */
  createdAt?: { gte?: Date; lt?: Date };
}

const balanceWhere = (scope: LedgerScope, filters: BalanceTransactionFilters): Prisma.LedgerEntryWhereInput => ({
  merchantId: scope.merchantId,
  mode: scope.mode,
  // Reservations move money inside the merchant's holding: they are not balance transactions.
  type: filters.type ?? { in: [...BALANCE_TRANSACTION_TYPES] },
  ...(filters.channelId != null ? { channelId: filters.channelId } : {}),
  ...(filters.createdAt ? { createdAt: filters.createdAt } : {}),
});

/** Newest first: the (merchant_id, mode[, channel_id], created_at desc, id desc) indexes serve this order. */
const NEWEST_FIRST: Prisma.LedgerEntryOrderByWithRelationInput[] = [{ createdAt: "desc" }, { id: "desc" }];

/** The filters as paging.ts counts and pages them: the rollups keep each entry's type (their key) and channel. */
const countedList = (scope: LedgerScope, filters: BalanceTransactionFilters): CountedList => ({
  table: "ledger_entries",
  merchantId: scope.merchantId,
  mode: scope.mode,
  // No type: every entry but the reservations (the entry types are the balance transaction types and these two).
  key: filters.type ? { column: "type", type: "text", values: [filters.type] } : { column: "type", type: "text", except: RESERVATION_TYPES },
  channelId: filters.channelId,
  ...(filters.createdAt ? { createdAt: filters.createdAt } : {}),
});

/** One page of balance transactions, newest first, with the exact total (paging.ts: ids and total in one statement). */
export async function balanceTransactionPage(db: Db, scope: LedgerScope, filters: BalanceTransactionFilters, paging: Paging): Promise<{ items: LedgerEntry[]; total: number }> {
  const { total, ids } = await pageOfIds<bigint | string>(db, countedList(scope, filters), paging);
  const items = ids.length ? await db.ledgerEntry.findMany({ where: { id: { in: ids.map((id) => BigInt(id)) } }, orderBy: NEWEST_FIRST }) : [];
  return { items, total };
}

/**
 * GraphQL's balanceTransactions connection: Pothos's cursor arguments (`query`, a cursor on the unique id) over
 * the filtered entries, newest first; Prisma turns the cursor into a (created_at, id) bound, so the index serves it.
 */
export function balanceTransactionSlice(db: Db, scope: LedgerScope, filters: BalanceTransactionFilters, query: object): Promise<LedgerEntry[]> {
  return db.ledgerEntry.findMany({ ...query, where: balanceWhere(scope, filters), orderBy: NEWEST_FIRST });
}

export function countBalanceTransactions(db: Db, scope: LedgerScope, filters: BalanceTransactionFilters): Promise<number> {
  return countRows(db, countedList(scope, filters));
}

/** A balance transaction by id, in the caller's merchant and mode only (a reservation is none). */
export function findBalanceTransaction(db: Db, scope: LedgerScope, id: bigint): Promise<LedgerEntry | null> {
  return db.ledgerEntry.findFirst({ where: { id, ...balanceWhere(scope, {}) } });
}

/** A balance transaction as the CSV export reads it. */
export interface ExportRow {
  id: string;
  type: string;
  amount: string;
  fee: string;
  currency: string;
  channelId: number;
  sourceReference: string;
  note: string | null;
  createdAt: Date | string;
}

type KeyedRow = ExportRow & { createdAtKey: string };

/**
 * All the filtered balance transactions, newest first, in batches of `batchSize` read by keyset on
 * (created_at, id): each batch is one index range scan starting where the last ended, so a year of entries is
 * never in memory at once and the last batch costs what the first did (an OFFSET would rescan all before it).
 */
export async function* balanceTransactionBatches(sql: Sql, scope: LedgerScope, filters: BalanceTransactionFilters, batchSize = 1000): AsyncGenerator<ExportRow[]> {
  // Only the filters given become conditions (their values always parameters): the planner then sees plain
  // index bounds, not "$n IS NULL OR ..." it could not use for the range.
  const params: unknown[] = [scope.merchantId, scope.mode, filters.type ? [filters.type] : [...BALANCE_TRANSACTION_TYPES]];
  const where = [`merchant_id = $1`, `mode = $2::"Mode"`, `type = ANY($3::text[])`];
  const bind = (value: unknown) => `$${params.push(value)}`;
  if (filters.channelId != null) where.push(`channel_id = ${bind(filters.channelId)}::int`);
  if (filters.createdAt?.gte) where.push(`created_at >= ${bind(filters.createdAt.gte)}::timestamptz`);
  if (filters.createdAt?.lt) where.push(`created_at < ${bind(filters.createdAt.lt)}::timestamptz`);
  // The keyset's created_at goes back as the database wrote it (text), so no driver's Date conversion can move it.
  const select = `SELECT id::text AS id, type, amount::text AS amount, fee::text AS fee, currency, channel_id AS "channelId",
      source_reference AS "sourceReference", note, created_at AS "createdAt", created_at::text AS "createdAtKey"
    FROM ledger_entries`;
  // Qualified: a bare "id" in ORDER BY would be the selected text column, which sorts "9" after "10".
  const order = `ORDER BY ledger_entries.created_at DESC, ledger_entries.id DESC LIMIT ${bind(batchSize)}::int`;
  const first = `${select} WHERE ${where.join(" AND ")} ${order}`;
  const next = `${select} WHERE ${where.join(" AND ")} AND (created_at, id) < ($${params.length + 1}::timestamptz, $${params.length + 2}::bigint) ${order}`;
  let after: [string, string] | null = null;
  for (;;) {
    const rows: KeyedRow[] = after ? await sql.query<KeyedRow>(next, [...params, ...after]) : await sql.query<KeyedRow>(first, params);
    if (rows.length === 0) return;
    const last: KeyedRow = rows[rows.length - 1]!;
    // The key column rides along (the CSV writer reads only the export's columns): no copy of each row.
    yield rows;
    if (rows.length < batchSize) return;
    after = [last.createdAtKey, last.id];
  }
}

/** The channel an adjustment is posted to, in the caller's merchant and mode, with the merchant's default currency; null when it is not theirs. */
export async function adjustmentTarget(db: Db, scope: LedgerScope, channelId: number): Promise<{ channelId: number; defaultCurrency: string } | null> {
  const [row] = await db.$queryRawUnsafe<{ channelId: number; defaultCurrency: string }[]>(
    `SELECT c.id AS "channelId", m.default_currency AS "defaultCurrency"
     FROM payment_channels c JOIN merchants m ON m.id = c.merchant_id
     WHERE c.id = $1 AND c.merchant_id = $2 AND c.mode = $3::"Mode"`,
    channelId,
    scope.merchantId,
    scope.mode,
  );
  return row ?? null;
}
