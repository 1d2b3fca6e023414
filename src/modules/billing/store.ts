import { scopeOf, type Principal } from "../../auth.ts";
import type { Db, PrismaClient } from "../../db/database.ts";
import type { Invoice, Plan, Prisma, Subscription, TestClock } from "../../db/generated/prisma/client.ts";
import type { Paging } from "../../paging.ts";
import { randomReference } from "../../references.ts";

/**
 * Every statement on plans, subscriptions, invoices and test clocks. The billing cycle (cycle.ts) locks a
 * subscription or an invoice before it changes it, and each change is guarded by what it expects to find, so a
 * period is invoiced once and an outcome recorded once however many instances or jobs race; the unique
 * (subscription_id, period_start) holds "one invoice per period" whatever happens.
 */
export type { Invoice, Plan, Subscription, TestClock };

export const newPlanId = () => randomReference("pln_");
export const newSubscriptionId = () => randomReference("sub_");
export const newInvoiceId = () => randomReference("in_");
export const newTestClockId = () => randomReference("clock_");

export const SUBSCRIPTION_STATUSES = ["trialing", "active", "past_due", "canceled", "unpaid"] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];
export const INVOICE_STATUSES = ["open", "paid", "uncollectible", "void"] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];

/** A subscription with what its /v1 shape names: its plan, method and clock by their ids. */
export const SUBSCRIPTION_LINKS = { plan: true, paymentMethod: { select: { reference: true } }, testClock: { select: { reference: true } } } as const;
export type LinkedSubscription = Prisma.SubscriptionGetPayload<{ include: typeof SUBSCRIPTION_LINKS }>;

/** An invoice with what its /v1 shape names: its subscription and its charges, in attempt order. */
export const INVOICE_LINKS = {
  subscription: { select: { reference: true } },
  transactions: {
    select: { reference: true, invoiceAttempt: true, status: true, failureCode: true, providerCheckoutUrl: true, createdAt: true },
    orderBy: { invoiceAttempt: "asc" },
  },
} as const;
export type LinkedInvoice = Prisma.InvoiceGetPayload<{ include: typeof INVOICE_LINKS }>;
export type InvoiceCharge = LinkedInvoice["transactions"][number];

// ---- Lists (plans, subscriptions, invoices: newest first, by page or as a connection's slice) ----

type ListDelegate<Row> = {
  findMany(args: object): Promise<Row[]>;
  count(args: { where: object }): Promise<number>;
};

/** One list over one table: a page with its total, a Relay connection's rows, their count; always in the caller's merchant and mode. */
export function listOf<Row, Filters>(delegate: (db: Db) => ListDelegate<Row>, where: (filters: Filters) => object) {
  const scoped = (principal: Principal, filters: Filters) => ({ ...where(filters), ...scopeOf(principal) });
  return {
    async page(db: Db, principal: Principal, filters: Filters, paging: Paging, query: object = {}): Promise<{ items: Row[]; total: number }> {
      const w = scoped(principal, filters);
      const [items, total] = await Promise.all([
        delegate(db).findMany({ ...query, where: w, orderBy: [{ createdAt: "desc" }, { id: "desc" }], skip: (paging.page - 1) * paging.limit, take: paging.limit }),
        delegate(db).count({ where: w }),
      ]);
      return { items, total };
    },
    slice: (db: Db, principal: Principal, filters: Filters, query: object) => delegate(db).findMany({ ...query, where: scoped(principal, filters), orderBy: { id: "desc" } }),
    count: (db: Db, principal: Principal, filters: Filters) => delegate(db).count({ where: scoped(principal, filters) }),
  };
}

export interface SubscriptionFilters {
  customerId?: number;
  status?: SubscriptionStatus;
  planId?: number;
}
export interface InvoiceFilters {
  subscriptionId?: number;
  customerId?: number;
  status?: InvoiceStatus;
}

export const planList = listOf<Plan, Record<string, never>>((db) => db.plan, () => ({}));
export const subscriptionList = listOf<Subscription, SubscriptionFilters>((db) => db.subscription, (f) => ({
  ...(f.customerId !== undefined ? { customerId: f.customerId } : {}),
  ...(f.status ? { status: f.status } : {}),
  ...(f.planId !== undefined ? { planId: f.planId } : {}),
}));
export const invoiceList = listOf<Invoice, InvoiceFilters>((db) => db.invoice, (f) => ({
  ...(f.subscriptionId !== undefined ? { subscriptionId: f.subscriptionId } : {}),
  ...(f.customerId !== undefined ? { customerId: f.customerId } : {}),
  ...(f.status ? { status: f.status } : {}),
}));

// ---- Plans ----

export const insertPlan = (db: Db, data: Prisma.PlanUncheckedCreateInput) => db.plan.create({ data });
export const findPlan = (db: Db, principal: Principal, reference: string) => db.plan.findFirst({ where: { reference, ...scopeOf(principal) } });

// ---- Subscriptions ----

export const insertSubscription = (db: Db, data: Prisma.SubscriptionUncheckedCreateInput) => db.subscription.create({ data, include: SUBSCRIPTION_LINKS });
export const findSubscription = (db: Db, principal: Principal, reference: string) => db.subscription.findFirst({ where: { reference, ...scopeOf(principal) } });
export const linkedSubscription = (db: Db, id: number) => db.subscription.findUniqueOrThrow({ where: { id }, include: SUBSCRIPTION_LINKS });

/** The subscription, locked until the caller's transaction ends: what bills it or changes its status waits here. */
export async function lockSubscription(tx: Prisma.TransactionClient, id: number): Promise<LinkedSubscription | null> {
  await tx.$queryRaw`SELECT id FROM subscriptions WHERE id = ${id} FOR UPDATE`;
  return tx.subscription.findUnique({ where: { id }, include: SUBSCRIPTION_LINKS });
}

export const updateSubscription = (tx: Db, id: number, data: Prisma.SubscriptionUncheckedUpdateInput) => tx.subscription.update({ where: { id }, data, include: SUBSCRIPTION_LINKS });

// ---- Invoices ----

/** The period's invoice, made once: a second caller (another instance, a retried job) finds the first one's. */
export async function insertInvoiceForPeriod(tx: Prisma.TransactionClient, data: Prisma.InvoiceCreateManyInput): Promise<{ invoice: LinkedInvoice; created: boolean }> {
  const { count } = await tx.invoice.createMany({ data: [data], skipDuplicates: true });
  const invoice = await tx.invoice.findUniqueOrThrow({
    where: { subscriptionId_periodStart: { subscriptionId: data.subscriptionId, periodStart: data.periodStart } },
    include: INVOICE_LINKS,
  });
  return { invoice, created: count === 1 };
}

export const findInvoice = (db: Db, principal: Principal, reference: string) => db.invoice.findFirst({ where: { reference, ...scopeOf(principal) } });
export const linkedInvoice = (db: Db, id: number) => db.invoice.findUnique({ where: { id }, include: INVOICE_LINKS });

export async function lockInvoice(tx: Prisma.TransactionClient, id: number): Promise<LinkedInvoice | null> {
  await tx.$queryRaw`SELECT id FROM invoices WHERE id = ${id} FOR UPDATE`;
  return linkedInvoice(tx, id);
}

export const updateInvoice = (tx: Db, id: number, data: Prisma.InvoiceUncheckedUpdateInput) => tx.invoice.update({ where: { id }, data, include: INVOICE_LINKS });

/** The subscription's open invoices (canceling it voids those no charge is pending on). */
export const openInvoicesOf = (tx: Db, subscriptionId: number) => tx.invoice.findMany({ where: { subscriptionId, status: "open" }, include: INVOICE_LINKS });

/** Whether the subscription still has an invoice that failed and is not paid (it stays past_due until none). */
export async function hasUnpaidFailures(tx: Db, subscriptionId: number, except: number): Promise<boolean> {
  return (await tx.invoice.count({ where: { subscriptionId, id: { not: except }, status: "open", attempts: { gt: 0 } } })) > 0;
}

// ---- Test clocks ----

export const insertClock = (db: Db, data: Prisma.TestClockUncheckedCreateInput) => db.testClock.create({ data });
export const findClock = (db: Db, principal: Principal, reference: string) => db.testClock.findFirst({ where: { reference, ...scopeOf(principal) } });
export const clockById = (db: Db, id: number) => db.testClock.findUnique({ where: { id } });

/** Moves a ready clock forward and marks it advancing; null when it is not ready or not behind `to`. */
export async function startAdvance(db: PrismaClient, id: number, to: Date): Promise<TestClock | null> {
  const { count } = await db.testClock.updateMany({ where: { id, status: "ready", frozenTime: { lt: to } }, data: { frozenTime: to, status: "advancing" } });
  return count ? db.testClock.findUnique({ where: { id } }) : null;
}

export const finishAdvance = (db: Db, id: number) => db.testClock.updateMany({ where: { id, status: "advancing" }, data: { status: "ready" } });
export const deleteClock = (db: Db, id: number) => db.testClock.delete({ where: { id } });
export const subscriptionsOnClock = (db: Db, testClockId: number) => db.subscription.findMany({ where: { testClockId, status: { not: "canceled" } }, select: { id: true } });

/**
 * What on the clock is due first, at or before `until`: a subscription's next period (or its end), or an open
 * invoice's next charge no charge is pending for. Null when nothing is.
 */
export async function nextDueOnClock(db: Db, testClockId: number, until: Date): Promise<{ kind: "subscription" | "invoice"; id: number; at: Date } | null> {
  const [subscription, invoice] = await Promise.all([
    db.subscription.findFirst({
      where: { testClockId, nextInvoiceAt: { lte: until } },
      orderBy: [{ nextInvoiceAt: "asc" }, { id: "asc" }],
      select: { id: true, nextInvoiceAt: true },
    }),
    db.invoice.findFirst({
      where: { testClockId, status: "open", nextAttemptAt: { lte: until }, transactions: { none: { status: "pending" } } },
      orderBy: [{ nextAttemptAt: "asc" }, { id: "asc" }],
      select: { id: true, nextAttemptAt: true },
    }),
  ]);
  const s = subscription && { kind: "subscription" as const, id: subscription.id, at: subscription.nextInvoiceAt! };
  const i = invoice && { kind: "invoice" as const, id: invoice.id, at: invoice.nextAttemptAt! };
  if (!s || !i) return s ?? i;
  // A period begins before the charges due at the same moment (its own invoice's first charge among them).
  return i.at < s.at ? i : s;
}
