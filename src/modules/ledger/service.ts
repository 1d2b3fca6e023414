import { scopeOf, type Principal } from "../../auth.ts";
import { allows } from "../../authorization.ts";
import type { Reader, Sql } from "../../db/database.ts";
import type { LedgerEntry, PrismaClient } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { localDayReader } from "../../days.ts";
import { statusDateWhere, withTimeZone } from "../../filters.ts";
import { recordRecoveryPoint, recoveredObject } from "../../idempotency/scope.ts";
import { isKnownCurrency, MAX_AMOUNT } from "../../money.ts";
import { resolvePaging, toPage, type Page } from "../../paging.ts";
import { randomReference } from "../../references.ts";
import { csvChunks } from "./csv.ts";
import { BALANCE_TRANSACTION_TYPES, postAdjustment, type BalanceTransactionType } from "./postings.ts";
import * as store from "./store.ts";

/** The balance transaction list's filters as callers give them (REST query strings, GraphQL arguments). */
export interface BalanceTransactionListInput {
  type?: string | null;
  paymentChannelId?: number | null;
  /** YYYY-MM-DD, inclusive, days in timeZone, as the other /v1 lists take them. */
  dateFrom?: string | null;
  dateTo?: string | null;
  /** The zone whose days those are; UTC when unset (GraphQL and the CSV route give the merchant's). */
  timeZone?: string | null;
}

export interface AdjustmentInput {
  paymentChannelId: number;
  /** Signed minor units: positive adds to the channel's available balance. */
  amount: bigint;
  /** Default: the merchant's default currency. */
  currency?: string | null;
  note: string;
}

export const MAX_NOTE_LENGTH = 500;
/**
 * The CSV export's columns; `description` is an adjustment's note (empty for the others). `created_at` is the
 * instant (UTC); `date` its day in `timezone`, the merchant's zone, the days date_from and date_to name.
 */
export const CSV_COLUMNS = ["id", "type", "amount", "fee", "net", "currency", "payment_channel_id", "source_reference", "description", "created_at", "date", "timezone"] as const;
/** Rows read (and written to the reply) per statement of an export. */
export const EXPORT_BATCH_SIZE = 1000;

export function parseBalanceTransactionType(value: string, field = "type"): BalanceTransactionType {
  if (!(BALANCE_TRANSACTION_TYPES as readonly string[]).includes(value)) throw new ValidationError(field, `must be one of ${BALANCE_TRANSACTION_TYPES.join(", ")}`);
  return value as BalanceTransactionType;
}

function parseChannelId(value: number | null | undefined, field = "payment_channel_id"): number | null {
  if (value === undefined || value === null) return null;
  if (!Number.isSafeInteger(value) || value < 1 || value > 2_147_483_647) throw new ValidationError(field, "must be a positive integer");
  return value;
}

/** The filters checked and parsed once: the type, the channel, the dates (with the other lists' rules and messages). */
function filtersOf(principal: Principal, input: BalanceTransactionListInput): store.BalanceTransactionFilters {
  const { createdAt } = statusDateWhere(principal, { dateFrom: input.dateFrom, dateTo: input.dateTo, timeZone: input.timeZone });
  return {
    type: input.type ? parseBalanceTransactionType(input.type) : null,
    channelId: parseChannelId(input.paymentChannelId),
    ...(createdAt ? { createdAt: { gte: createdAt.gte as Date | undefined, lt: createdAt.lt as Date | undefined } } : {}),
  };
}

/**
 * The ledger's read side (balances, balance transactions, the CSV export) and its one write a person makes:
 * an adjustment. Everything is scoped by the caller's merchant and mode.
 */
export function createLedgerService(deps: { prisma: PrismaClient; read?: Reader }) {
  const { prisma } = deps;
  /** Balances, lists and the export read from the reader (a replica when there is one); adjustments from the primary. */
  const reader = deps.read?.prisma ?? prisma;
  /** The export's batches on plain SQL (the reader's); through Prisma's raw queries only where no reader was given. */
  const exportReader: Sql = deps.read?.sql ?? { query: (text, params = []) => prisma.$queryRawUnsafe(text, ...params) };

  return {
    /** Every channel's balance per currency (or one channel's), from the accounts' postings. */
    balance(principal: Principal, input: { paymentChannelId?: number | null } = {}): Promise<store.ChannelBalance[]> {
      return store.channelBalances(reader, scopeOf(principal), parseChannelId(input.paymentChannelId));
    },

    /** One page, newest first, with totals (GET /v1/balance/transactions). */
    async listPage(principal: Principal, input: BalanceTransactionListInput & { page?: number | null; limit?: number | null }): Promise<Page<LedgerEntry>> {
      const paging = resolvePaging(input);
      const { items, total } = await store.balanceTransactionPage(reader, scopeOf(principal), filtersOf(principal, input), paging);
      return toPage(items, total, paging);
    },

    /** GraphQL's balanceTransactions connection: one slice for Pothos's cursor arguments, and the total. */
    connectionSlice(principal: Principal, input: BalanceTransactionListInput, query: object): Promise<LedgerEntry[]> {
      return store.balanceTransactionSlice(reader, scopeOf(principal), filtersOf(principal, input), query);
    },
    count(principal: Principal, input: BalanceTransactionListInput): Promise<number> {
      return store.countBalanceTransactions(reader, scopeOf(principal), filtersOf(principal, input));
    },

    /**
     * The filtered balance transactions as CSV text, produced lazily: the filters are checked now (a bad one
     * throws before anything is sent), the rows read in keyset batches as the consumer pulls, so the export
     * of a year holds one batch in memory at a time.
     */
    async exportCsv(principal: Principal, input: BalanceTransactionListInput): Promise<{ filename: string; chunks: AsyncIterable<string> }> {
      const zoned = await withTimeZone(reader, principal, input);
      const zone = zoned.timeZone;
      const filters = filtersOf(principal, zoned);
      const scope = scopeOf(principal);
      // The days as asked (checked by filtersOf), in the merchant's zone.
      const range = [input.dateFrom, input.dateTo].filter(Boolean).join("_to_");
      const filename = `balance-transactions-${principal.mode}${range ? `-${range}` : ""}.csv`;
      const dayOf = localDayReader(zone);
      const chunks = csvChunks(CSV_COLUMNS, store.balanceTransactionBatches(exportReader, scope, filters, EXPORT_BATCH_SIZE), (row) => {
        const amount = BigInt(row.amount);
        const fee = BigInt(row.fee);
        const createdAt = row.createdAt instanceof Date ? row.createdAt : new Date(row.createdAt);
        return [BigInt(row.id), row.type, amount, fee, amount - fee, row.currency, row.channelId, row.sourceReference, row.note, createdAt.toISOString(), dayOf(createdAt), zone];
      });
      return { filename, chunks };
    },

    /**
     * A correction (a new entry: available <-> adjustments), never an edit. Made by a signed-in owner, recorded
     * as its author; an API key, or a user with another role, is refused. Under an Idempotency-Key, a retry after
     * an interrupted attempt returns the entry that attempt committed.
     */
    async createAdjustment(principal: Principal, input: AdjustmentInput): Promise<LedgerEntry> {
      if (!allows(principal, "signed_in_owner")) {
        throw new GatewayError("forbidden", "Adjustments are made by a signed-in owner (recorded as its author); an API key or another role cannot make them");
      }
      const scope = scopeOf(principal);
      const recovered = await recoveredObject(principal, "adjustment", (id) => store.findBalanceTransaction(prisma, scope, BigInt(id)));
      if (recovered) return recovered;
      const channelId = parseChannelId(input.paymentChannelId, "payment_channel_id");
      if (channelId === null) throw new ValidationError("payment_channel_id", "is required");
      const amount = input.amount;
      if (typeof amount !== "bigint" || amount === 0n || amount > BigInt(MAX_AMOUNT) || amount < -BigInt(MAX_AMOUNT)) {
        throw new ValidationError("amount", `must be a non-zero integer between -${MAX_AMOUNT} and ${MAX_AMOUNT} (minor units; negative takes from the balance)`);
      }
      const note = input.note?.trim() ?? "";
      if (note.length === 0) throw new ValidationError("note", "is required: say why the balance is corrected");
      if (note.length > MAX_NOTE_LENGTH) throw new ValidationError("note", `must be at most ${MAX_NOTE_LENGTH} characters`);
      const target = await store.adjustmentTarget(prisma, scope, channelId);
      if (!target) throw new NotFoundError(`Payment channel ${channelId}`);
      const currency = input.currency == null || input.currency.trim() === "" ? target.defaultCurrency : input.currency.trim().toUpperCase();
      if (!/^[A-Z]{3}$/.test(currency) || !isKnownCurrency(currency)) throw new ValidationError("currency", "must be an ISO 4217 currency code the gateway knows, such as KES");
      const id = await prisma.$transaction(async (tx) => {
        const entryId = await postAdjustment(tx, {
          ...scope,
          channelId,
          currency,
          reference: randomReference("adj_"),
          amount,
          note,
          createdBy: principal.userId,
        });
        await recordRecoveryPoint(tx, principal, "adjustment", Number(entryId));
        return entryId;
      });
      return prisma.ledgerEntry.findUniqueOrThrow({ where: { id } });
    },
  };
}

export type LedgerService = ReturnType<typeof createLedgerService>;
