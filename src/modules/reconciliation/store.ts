import { scopeOf, type Principal } from "../../auth.ts";
import type { Db, PrismaClient } from "../../db/database.ts";
import type { Prisma, Reconciliation, ReconciliationItem } from "../../db/generated/prisma/client.ts";
import { pageWindow, type Paging } from "../../paging.ts";

/**
 * Every statement on the reconciliations and reconciliation_items tables. A report is created `running`,
 * then completed with its items in one database transaction (or failed with its error); the provider's
 * balance, which arrives later by callback, is merged into its summary by one statement.
 */

export type NewItem = Omit<Prisma.ReconciliationItemCreateManyInput, "reconciliationId" | "id" | "createdAt">;
type ReconciliationQuery = { include?: Prisma.ReconciliationInclude; select?: Prisma.ReconciliationSelect };

export function create(db: Db, data: { merchantId: number; mode: Reconciliation["mode"]; channelId: number; date: string }): Promise<Reconciliation> {
  return db.reconciliation.create({ data });
}

/** The newest report of a channel and day that did not fail, if any (the daily job makes one per day). */
export function findKeptForDay(db: Db, channelId: number, date: string): Promise<Reconciliation | null> {
  return db.reconciliation.findFirst({ where: { channelId, date, status: { not: "failed" } }, orderBy: { id: "desc" } });
}

export function findById(db: Db, id: number): Promise<Reconciliation & { items: ReconciliationItem[] }> {
  return db.reconciliation.findUniqueOrThrow({ where: { id }, include: { items: { orderBy: { id: "asc" } } } });
}

/** The report's items and summary, and its completion, in one database transaction. */
export async function complete(db: PrismaClient, id: number, summary: Prisma.InputJsonValue, items: NewItem[]): Promise<void> {
  await db.$transaction(async (tx) => {
    if (items.length) await tx.reconciliationItem.createMany({ data: items.map((item) => ({ ...item, reconciliationId: id })) });
    await tx.reconciliation.update({ where: { id }, data: { status: "completed", summary, completedAt: new Date() } });
  });
}

export async function fail(db: Db, id: number, error: string): Promise<void> {
  await db.reconciliation.update({ where: { id }, data: { status: "failed", error: error.slice(0, 1000), completedAt: new Date() } });
}

/**
 * Merges `balance` into the report's summary.balance, in one statement (the callback may arrive while another
 * instance writes): only on the report of this channel, so a callback path cannot touch another channel's report.
 * True when there was such a report.
 */
export async function mergeBalance(db: Db, id: number, channelId: number, balance: Record<string, unknown>): Promise<boolean> {
  const count = await db.$executeRaw`
    UPDATE reconciliations
    SET summary = summary || jsonb_build_object('balance', coalesce(summary->'balance', '{}'::jsonb) || ${JSON.stringify(balance)}::jsonb)
    WHERE id = ${id} AND channel_id = ${channelId}`;
  return count > 0;
}

/** By id, in the caller's merchant and mode only. */
export function findScoped(db: Db, principal: Principal, id: number, query: ReconciliationQuery = {}) {
  return db.reconciliation.findFirst({ ...query, where: { ...scopeOf(principal), id } });
}

export interface ReconciliationFilters {
  channelId?: number | null;
}

const filtered = (principal: Principal, filters: ReconciliationFilters): Prisma.ReconciliationWhereInput => ({
  ...scopeOf(principal),
  ...(filters.channelId != null ? { channelId: filters.channelId } : {}),
});

/** One page, newest first, with the total (the merchant, mode, created_at index serves it). */
export async function listPage(db: Db, principal: Principal, filters: ReconciliationFilters, paging: Paging, query: ReconciliationQuery = {}) {
  const where = filtered(principal, filters);
  const [items, total] = await Promise.all([
    db.reconciliation.findMany({ ...query, where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], ...pageWindow(paging) }),
    db.reconciliation.count({ where }),
  ]);
  return { items: items as Reconciliation[], total };
}

/** GraphQL's connection: Pothos's cursor arguments over the caller's reports, newest id first. */
export function connectionSlice(db: Db, principal: Principal, filters: ReconciliationFilters, query: object): Promise<Reconciliation[]> {
  return db.reconciliation.findMany({ ...query, where: filtered(principal, filters), orderBy: { id: "desc" } });
}

export function count(db: Db, principal: Principal, filters: ReconciliationFilters): Promise<number> {
  return db.reconciliation.count({ where: filtered(principal, filters) });
}

/** The channels the daily job reconciles for a day: every active one that existed before the day ended. */
export async function activeChannelIds(db: Db, createdBefore: Date): Promise<number[]> {
  const channels = await db.paymentChannel.findMany({ where: { isActive: true, createdAt: { lt: createdBefore } }, select: { id: true }, orderBy: { id: "asc" } });
  return channels.map((c) => c.id);
}
