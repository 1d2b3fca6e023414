import { scopeOf, type Principal } from "../../auth.ts";
import type { Db } from "../../db/database.ts";
import type { PaymentLink, Prisma } from "../../db/generated/prisma/client.ts";
import { countRows, pageOfIds, type CountedList, type Paging } from "../../paging.ts";

/** Every statement on payment_links and payment_link_payments. */

export type LinkQuery = { include?: Prisma.PaymentLinkInclude; select?: Prisma.PaymentLinkSelect };

export interface LinkFilters {
  active?: boolean | null;
}

const filtered = (principal: Principal, filters: LinkFilters): Prisma.PaymentLinkWhereInput => ({
  ...scopeOf(principal),
  ...(filters.active != null ? { active: filters.active } : {}),
});

export function create(db: Db | Prisma.TransactionClient, data: Prisma.PaymentLinkUncheckedCreateInput): Promise<PaymentLink> {
  return db.paymentLink.create({ data });
}

/** By id, in the caller's merchant and mode only. */
export async function findScoped(db: Db, principal: Principal, id: number, query: LinkQuery = {}): Promise<PaymentLink | null> {
  return (await db.paymentLink.findFirst({ ...query, where: { ...scopeOf(principal), id } })) as PaymentLink | null;
}

/** The public page's link by its slug, with its merchant's name. */
export function findBySlug(db: Db, slug: string) {
  return db.paymentLink.findUnique({ where: { slug }, include: { merchant: { select: { name: true } } } });
}

export async function deactivate(db: Db, principal: Principal, id: number): Promise<PaymentLink | null> {
  const { count } = await db.paymentLink.updateMany({ where: { ...scopeOf(principal), id }, data: { active: false } });
  return count ? findScoped(db, principal, id) : null;
}

/** The filters as paging.ts counts and pages them: the rollups keep the active flag (their key). */
const countedList = (principal: Principal, filters: LinkFilters): CountedList => ({
  table: "payment_links",
  merchantId: principal.merchantId,
  mode: principal.mode,
  ...(filters.active != null ? { key: { column: "active", type: "boolean", values: [String(filters.active)] } } : {}),
});

/** One page, newest first, with the exact total (paging.ts: ids and total in one statement), then those rows. */
export async function listPage(db: Db, principal: Principal, filters: LinkFilters, paging: Paging, query: LinkQuery = {}): Promise<{ items: PaymentLink[]; total: number }> {
  const { total, ids } = await pageOfIds<number>(db, countedList(principal, filters), paging);
  const items = ids.length ? await db.paymentLink.findMany({ ...query, where: { id: { in: ids } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }) : [];
  return { items: items as PaymentLink[], total };
}

/** GraphQL's connection: Pothos's cursor arguments over the caller's links, newest id first. */
export function connectionSlice(db: Db, principal: Principal, filters: LinkFilters, query: object): Promise<PaymentLink[]> {
  return db.paymentLink.findMany({ ...query, where: filtered(principal, filters), orderBy: { id: "desc" } });
}

export function count(db: Db, principal: Principal, filters: LinkFilters): Promise<number> {
  return countRows(db, countedList(principal, filters));
}

/** How many transactions each link created (REST's payments_count), in one statement for a page. */
export async function paymentCounts(db: Db, linkIds: number[]): Promise<Map<number, number>> {
  if (linkIds.length === 0) return new Map();
  const rows = await db.paymentLinkPayment.groupBy({ by: ["linkId"], where: { linkId: { in: linkIds } }, _count: { _all: true } });
  return new Map(rows.map((r) => [r.linkId, r._count._all]));
}

/** The link's completed transaction if any, else its newest pending one (what a single-use link's page decides by). */
export async function settlingPayments(db: Db, linkId: number) {
  const [completed, pending] = await Promise.all([
    db.paymentLinkPayment.findFirst({ where: { linkId, transaction: { status: "completed" } }, include: { transaction: { select: { reference: true } } } }),
    db.paymentLinkPayment.findFirst({ where: { linkId, transaction: { status: "pending" } }, orderBy: { createdAt: "desc" }, include: { transaction: { select: { reference: true, amount: true } } } }),
  ]);
  return { completed: completed?.transaction ?? null, pending: pending?.transaction ?? null };
}

export async function recordPayment(db: Db, linkId: number, transactionId: number): Promise<void> {
  await db.paymentLinkPayment.create({ data: { linkId, transactionId } });
}

/**
 * Claims a single-use link for one payer's payment for `ms`: true for the one caller whose conditional UPDATE
 * matched (no claim, or an expired one, e.g. left by a crashed instance). Decided by the database, so two payers
 * on two instances cannot both make a payment of the link.
 */
export async function claim(db: Db, linkId: number, ms: number): Promise<boolean> {
  const now = new Date();
  const { count } = await db.paymentLink.updateMany({
    where: { id: linkId, OR: [{ claimedUntil: null }, { claimedUntil: { lt: now } }] },
    data: { claimedUntil: new Date(now.getTime() + ms) },
  });
  return count === 1;
}

export async function release(db: Db, linkId: number): Promise<void> {
  await db.paymentLink.updateMany({ where: { id: linkId }, data: { claimedUntil: null } });
}
