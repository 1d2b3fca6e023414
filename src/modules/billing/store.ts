import { scopeOf, type Principal } from "../../auth.ts";
import type { Db, PrismaClient } from "../../db/database.ts";
import type { Sql } from "../../db/sql.ts";
import type { Event, Invoice, Mode, Plan, Prisma, Subscription, TestClock } from "../../db/generated/prisma/client.ts";
import type { Paging } from "../../paging.ts";
import { randomReference } from "../../references.ts";
import { EVENT_FAN_OUT_CTES, FAN_OUT_JOBS_QUEUED } from "../events/fan-out.ts";
import { date, optionalDate } from "../transactions/rows.ts";
import { invoiceChargesJson } from "../transactions/store.ts";

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

// ---- The billing cycle's statements, in plain SQL ----
// What Prisma's include reads in a query per relation (and its query layer's CPU per row), the cycle's steps read in
// one plain statement per batch, and write in plain statements on a plain-SQL transaction (db/sql.ts: prepared once
// per connection, no query layer): a morning's renewals read and write 100,000 subscriptions and invoices this way
// (bench/billing.ts). The rows have the same shape and types as the include's (LinkedSubscription, LinkedInvoice).

/** Timestamps as ISO strings for a statement's timestamptz[] parameter. */
const isoAll = (dates: (Date | null)[]) => dates.map((d) => d?.toISOString() ?? null);

const SUBSCRIPTION_COLUMNS = `s.id, s.merchant_id AS "merchantId", s.mode::text AS mode, s.reference, s.customer_id AS "customerId",
  s.plan_id AS "planId", s.payment_method_id AS "paymentMethodId", s.test_clock_id AS "testClockId", s.status,
  s.billing_anchor AS "billingAnchor", s.periods_billed AS "periodsBilled", s.trial_end AS "trialEnd",
  s.current_period_start AS "currentPeriodStart", s.current_period_end AS "currentPeriodEnd", s.next_invoice_at AS "nextInvoiceAt",
  s.cancel_at_period_end AS "cancelAtPeriodEnd", s.canceled_at AS "canceledAt", s.metadata, s.created_at AS "createdAt", s.updated_at AS "updatedAt"`;

const LINKED_SUBSCRIPTIONS = `SELECT ${SUBSCRIPTION_COLUMNS},
  json_build_object('id', p.id, 'merchantId', p.merchant_id, 'mode', p.mode, 'reference', p.reference, 'name', p.name, 'amount', p.amount::text,
    'currency', p.currency, 'interval', p.interval, 'intervalCount', p.interval_count, 'trialDays', p.trial_days, 'metadata', p.metadata,
    'createdAt', p.created_at) AS plan,
  pm.reference AS "paymentMethodReference", tc.reference AS "testClockReference"
  FROM subscriptions s JOIN plans p ON p.id = s.plan_id JOIN payment_methods pm ON pm.id = s.payment_method_id
  LEFT JOIN test_clocks tc ON tc.id = s.test_clock_id
  WHERE s.id = ANY($1::int[]) ORDER BY s.id`;

type PlanJson = Omit<Plan, "amount" | "createdAt"> & { amount: string; createdAt: string };
type SubscriptionRow = Subscription & { plan: PlanJson; paymentMethodReference: string; testClockReference: string | null };

function linkedSubscriptionOf({ plan, paymentMethodReference, testClockReference, ...row }: SubscriptionRow): LinkedSubscription {
  return {
    ...row,
    billingAnchor: date(row.billingAnchor),
    trialEnd: optionalDate(row.trialEnd),
    currentPeriodStart: date(row.currentPeriodStart),
    currentPeriodEnd: date(row.currentPeriodEnd),
    nextInvoiceAt: optionalDate(row.nextInvoiceAt),
    canceledAt: optionalDate(row.canceledAt),
    createdAt: date(row.createdAt),
    updatedAt: date(row.updatedAt),
    plan: { ...plan, amount: BigInt(plan.amount), createdAt: new Date(plan.createdAt) },
    paymentMethod: { reference: paymentMethodReference },
    testClock: testClockReference === null ? null : { reference: testClockReference },
  };
}

/** The subscriptions with their links (plan, method, clock), in id order; ids that do not exist are left out. */
export async function readSubscriptions(sql: Sql, ids: number[]): Promise<LinkedSubscription[]> {
  if (!ids.length) return [];
  return (await sql.query<SubscriptionRow>(LINKED_SUBSCRIPTIONS, [ids])).map(linkedSubscriptionOf);
}

const INVOICE_COLUMNS = `i.id, i.merchant_id AS "merchantId", i.mode::text AS mode, i.reference, i.subscription_id AS "subscriptionId",
  i.customer_id AS "customerId", i.test_clock_id AS "testClockId", i.amount_due AS "amountDue", i.currency, i.period_start AS "periodStart",
  i.period_end AS "periodEnd", i.status, i.attempts, i.next_attempt_at AS "nextAttemptAt", i.paid_at AS "paidAt",
  i.created_at AS "createdAt", i.updated_at AS "updatedAt"`;

/** An invoice's charges in attempt order, as INVOICE_LINKS reads them (one JSON array per invoice). */
const INVOICE_CHARGES = `${invoiceChargesJson("i")} AS charges`;

type InvoiceRow = Invoice & { subscriptionReference: string; charges: (Omit<InvoiceCharge, "createdAt"> & { createdAt: string })[] };

function linkedInvoiceOf({ subscriptionReference, charges, ...row }: InvoiceRow): LinkedInvoice {
  return {
    ...row,
    amountDue: BigInt(row.amountDue),
    periodStart: date(row.periodStart),
    periodEnd: date(row.periodEnd),
    nextAttemptAt: optionalDate(row.nextAttemptAt),
    paidAt: optionalDate(row.paidAt),
    createdAt: date(row.createdAt),
    updatedAt: date(row.updatedAt),
    subscription: { reference: subscriptionReference },
    transactions: charges.map((c) => ({ ...c, createdAt: new Date(c.createdAt) })),
  };
}

const invoicesWhere = (where: string) =>
  `SELECT ${INVOICE_COLUMNS}, s.reference AS "subscriptionReference", ${INVOICE_CHARGES}
   FROM invoices i JOIN subscriptions s ON s.id = i.subscription_id ${where} ORDER BY i.id`;
const INVOICES_BY_ID = invoicesWhere("WHERE i.id = ANY($1::int[])");
const INVOICES_BY_PERIOD = invoicesWhere("JOIN unnest($1::int[], $2::timestamptz[]) AS p(subscription_id, period_start) ON i.subscription_id = p.subscription_id AND i.period_start = p.period_start");
const INVOICES_TO_COLLECT = `SELECT ${INVOICE_COLUMNS}, s.reference AS "subscriptionReference", ${INVOICE_CHARGES}, pl.name AS "planName", pm.reference AS "paymentMethodReference"
  FROM invoices i JOIN subscriptions s ON s.id = i.subscription_id JOIN plans pl ON pl.id = s.plan_id JOIN payment_methods pm ON pm.id = s.payment_method_id
  WHERE i.id = ANY($1::int[]) ORDER BY i.id`;

/** The invoices with their links (subscription, charges), in id order; ids that do not exist are left out. */
export async function readInvoices(sql: Sql, ids: number[]): Promise<LinkedInvoice[]> {
  if (!ids.length) return [];
  return (await sql.query<InvoiceRow>(INVOICES_BY_ID, [ids])).map(linkedInvoiceOf);
}

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

/** A new subscription's columns (the billing service decides them; the cycle writes them: cycle.ts). */
export type NewSubscription = Pick<
  Subscription,
  "merchantId" | "mode" | "reference" | "customerId" | "planId" | "paymentMethodId" | "testClockId" | "status" | "billingAnchor" | "trialEnd" | "currentPeriodStart" | "currentPeriodEnd" | "nextInvoiceAt"
> & { metadata?: Prisma.InputJsonObject };

export async function insertSubscription(tx: Sql, data: NewSubscription): Promise<LinkedSubscription> {
  const [row] = await tx.query<{ id: number }>(
    `INSERT INTO subscriptions (merchant_id, mode, reference, customer_id, plan_id, payment_method_id, test_clock_id, status, billing_anchor,
       trial_end, current_period_start, current_period_end, next_invoice_at, metadata, updated_at)
     VALUES ($1, $2::"Mode", $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15) RETURNING id`,
    [
      data.merchantId, data.mode, data.reference, data.customerId, data.planId, data.paymentMethodId, data.testClockId, data.status, data.billingAnchor,
      data.trialEnd, data.currentPeriodStart, data.currentPeriodEnd, data.nextInvoiceAt, data.metadata === undefined ? null : JSON.stringify(data.metadata), new Date(),
    ],
  );
  return (await readSubscriptions(tx, [row!.id]))[0]!;
}
export const findSubscription = (db: Db, principal: Principal, reference: string) => db.subscription.findFirst({ where: { reference, ...scopeOf(principal) } });
export const linkedSubscription = (db: Db, id: number) => db.subscription.findUniqueOrThrow({ where: { id }, include: SUBSCRIPTION_LINKS });

/** The subscription, locked until the caller's transaction ends: what bills it or changes its status waits here. */
export async function lockSubscription(tx: Sql, id: number): Promise<LinkedSubscription | null> {
  return (await lockSubscriptions(tx, [id]))[0] ?? null;
}

/**
 * Sets the named columns of one row (and its updated_at, as Prisma's @updatedAt does), in a statement per set of
 * columns: `columns` maps each field the cycle changes to its column, a fixed list (never input).
 */
async function updateRow<Change extends object>(tx: Sql, table: string, columns: Record<keyof Change, string>, id: number, change: Change): Promise<void> {
  const values: unknown[] = [id];
  const sets: string[] = [];
  for (const [field, column] of Object.entries(columns) as [keyof Change, string][]) {
    if (change[field] === undefined) continue;
    values.push(change[field]);
    sets.push(`${column} = $${values.length}`);
  }
  values.push(new Date());
  sets.push(`updated_at = $${values.length}`);
  await tx.query(`UPDATE ${table} SET ${sets.join(", ")} WHERE id = $1`, values);
}

/** What a step changes on a subscription besides renewing it. */
export type SubscriptionChange = Partial<Pick<Subscription, "status" | "canceledAt" | "nextInvoiceAt" | "cancelAtPeriodEnd">>;
const SUBSCRIPTION_CHANGES: Record<keyof SubscriptionChange, string> = { status: "status", canceledAt: "canceled_at", nextInvoiceAt: "next_invoice_at", cancelAtPeriodEnd: "cancel_at_period_end" };

export async function updateSubscription(tx: Sql, id: number, change: SubscriptionChange): Promise<LinkedSubscription> {
  await updateRow(tx, "subscriptions", SUBSCRIPTION_CHANGES, id, change);
  return (await readSubscriptions(tx, [id]))[0]!;
}

/**
 * The subscriptions, locked until the caller's transaction ends, in id order (so batches that share some never wait
 * on each other in a circle), with their links; ids that do not exist are left out.
 */
export async function lockSubscriptions(tx: Sql, ids: number[]): Promise<LinkedSubscription[]> {
  await tx.query(`SELECT id FROM subscriptions WHERE id = ANY($1::int[]) ORDER BY id FOR UPDATE`, [ids]);
  // Read after the lock, in a statement of its own: its snapshot has whatever the lock waited for.
  return readSubscriptions(tx, ids);
}

/** A subscription's next period, invoiced: what the billing cycle writes on it. */
export interface Renewal {
  id: number;
  status: string;
  periodsBilled: number;
  currentPeriodStart: Date;
  currentPeriodEnd: Date;
  nextInvoiceAt: Date;
}

/** Renews the (locked) subscriptions in one statement; answers them with their links, in id order. */
export async function renewSubscriptions(tx: Sql, renewals: Renewal[]): Promise<LinkedSubscription[]> {
  if (!renewals.length) return [];
  await tx.query(
    `UPDATE subscriptions s SET periods_billed = r.periods_billed, current_period_start = r.period_start, current_period_end = r.period_end,
       next_invoice_at = r.next_invoice_at, status = r.status, updated_at = $7::timestamptz
     FROM unnest($1::int[], $2::int[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[], $6::text[]) AS r(id, periods_billed, period_start, period_end, next_invoice_at, status)
     WHERE s.id = r.id`,
    [
      renewals.map((r) => r.id),
      renewals.map((r) => r.periodsBilled),
      isoAll(renewals.map((r) => r.currentPeriodStart)),
      isoAll(renewals.map((r) => r.currentPeriodEnd)),
      isoAll(renewals.map((r) => r.nextInvoiceAt)),
      renewals.map((r) => r.status),
      new Date().toISOString(),
    ],
  );
  return readSubscriptions(tx, renewals.map((r) => r.id));
}

// ---- Invoices ----

/** A period's invoice, as the cycle makes it. */
export type NewInvoice = Pick<
  Invoice,
  "reference" | "merchantId" | "mode" | "subscriptionId" | "customerId" | "testClockId" | "amountDue" | "currency" | "periodStart" | "periodEnd" | "nextAttemptAt"
>;

/**
 * Each period's invoice, made once: a second caller (another instance, a retried job) finds the first one's. Answers
 * every period's invoice, and the ids of those this call made.
 */
export async function insertInvoicesForPeriods(tx: Sql, data: NewInvoice[]): Promise<{ invoices: LinkedInvoice[]; created: Set<number> }> {
  if (!data.length) return { invoices: [], created: new Set() };
  const made = await tx.query<{ id: number }>(
    `INSERT INTO invoices (reference, merchant_id, mode, subscription_id, customer_id, test_clock_id, amount_due, currency, period_start, period_end,
       next_attempt_at, updated_at)
     SELECT i.reference, i.merchant_id, i.mode::"Mode", i.subscription_id, i.customer_id, i.test_clock_id, i.amount_due, i.currency, i.period_start,
       i.period_end, i.next_attempt_at, $12::timestamptz
     FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int[], $6::int[], $7::bigint[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[])
       WITH ORDINALITY AS i(reference, merchant_id, mode, subscription_id, customer_id, test_clock_id, amount_due, currency, period_start, period_end, next_attempt_at, n)
     ORDER BY i.n
     ON CONFLICT DO NOTHING RETURNING id`,
    [
      data.map((d) => d.reference),
      data.map((d) => d.merchantId),
      data.map((d) => d.mode),
      data.map((d) => d.subscriptionId),
      data.map((d) => d.customerId),
      data.map((d) => d.testClockId),
      data.map((d) => d.amountDue.toString()),
      data.map((d) => d.currency),
      isoAll(data.map((d) => d.periodStart)),
      isoAll(data.map((d) => d.periodEnd)),
      isoAll(data.map((d) => d.nextAttemptAt)),
      new Date().toISOString(),
    ],
  );
  const rows = await tx.query<InvoiceRow>(INVOICES_BY_PERIOD, [data.map((d) => d.subscriptionId), isoAll(data.map((d) => d.periodStart))]);
  return { invoices: rows.map(linkedInvoiceOf), created: new Set(made.map((m) => m.id)) };
}

export const findInvoice = (db: Db, principal: Principal, reference: string) => db.invoice.findFirst({ where: { reference, ...scopeOf(principal) } });
export const linkedInvoice = (db: Db, id: number) => db.invoice.findUnique({ where: { id }, include: INVOICE_LINKS });

/** The invoices, locked until the caller's transaction ends, in id order (after their subscriptions: cycle.ts), with their links. */
export async function lockInvoices(tx: Sql, ids: number[]): Promise<LinkedInvoice[]> {
  await tx.query(`SELECT id FROM invoices WHERE id = ANY($1::int[]) ORDER BY id FOR UPDATE`, [ids]);
  return readInvoices(tx, ids);
}

/**
 * Which subscription and clock each invoice an outcome may still be recorded on is of (what to lock before it, and
 * whose time it lives on): open ones, and void ones (a charge in flight when it was voided pays it). A paid or
 * uncollectible invoice has nothing left to record, so the second caller of an outcome (the collect step and the
 * charge's settling job both ask) stops here.
 */
export const invoiceOwners = (sql: Sql, ids: number[]) =>
  sql.query<{ id: number; subscriptionId: number; testClockId: number | null }>(
    `SELECT id, subscription_id AS "subscriptionId", test_clock_id AS "testClockId" FROM invoices WHERE id = ANY($1::int[]) AND status IN ('open', 'void')`,
    [ids],
  );

/** Invoices with what charging them names: the subscription's plan and payment method. */
export async function invoicesToCollect(sql: Sql, ids: number[]) {
  const rows = await sql.query<InvoiceRow & { planName: string; paymentMethodReference: string }>(INVOICES_TO_COLLECT, [ids]);
  return rows.map(({ planName, paymentMethodReference, ...row }) => {
    const invoice = linkedInvoiceOf(row);
    return { ...invoice, subscription: { ...invoice.subscription, plan: { name: planName }, paymentMethod: { reference: paymentMethodReference } } };
  });
}

/** Marks the (locked) invoices paid by their current attempt, in one statement; answers them with their links, in id order. */
export async function markInvoicesPaid(tx: Sql, paid: { id: number; attempt: number }[], at: Date): Promise<LinkedInvoice[]> {
  if (!paid.length) return [];
  await tx.query(
    `UPDATE invoices i SET status = 'paid', paid_at = $3::timestamptz, attempts = p.attempt, next_attempt_at = NULL, updated_at = $4::timestamptz
     FROM unnest($1::int[], $2::int[]) AS p(id, attempt) WHERE i.id = p.id`,
    [paid.map((p) => p.id), paid.map((p) => p.attempt), at.toISOString(), new Date().toISOString()],
  );
  return readInvoices(tx, paid.map((p) => p.id));
}

/** What a step changes on an invoice besides marking a batch paid. */
export type InvoiceChange = Partial<Pick<Invoice, "status" | "paidAt" | "attempts" | "nextAttemptAt">>;
const INVOICE_CHANGES: Record<keyof InvoiceChange, string> = { status: "status", paidAt: "paid_at", attempts: "attempts", nextAttemptAt: "next_attempt_at" };

export async function updateInvoice(tx: Sql, id: number, change: InvoiceChange): Promise<LinkedInvoice> {
  await updateRow(tx, "invoices", INVOICE_CHANGES, id, change);
  return (await readInvoices(tx, [id]))[0]!;
}

/** The subscription's open invoices (canceling it voids those no charge is pending on). */
export async function openInvoicesOf(tx: Sql, subscriptionId: number): Promise<LinkedInvoice[]> {
  const open = await tx.query<{ id: number }>(`SELECT id FROM invoices WHERE subscription_id = $1 AND status = 'open' ORDER BY id`, [subscriptionId]);
  return readInvoices(tx, open.map((i) => i.id));
}

/** Whether the subscription still has an invoice that failed and is not paid (it stays past_due until none). */
export async function hasUnpaidFailures(tx: Sql, subscriptionId: number, except: number): Promise<boolean> {
  const found = await tx.query(`SELECT 1 FROM invoices WHERE subscription_id = $1 AND id <> $2 AND status = 'open' AND attempts > 0 LIMIT 1`, [subscriptionId, except]);
  return found.length > 0;
}

// ---- Events ----

export interface NewBillingEvent {
  merchantId: number;
  mode: Mode;
  type: string;
  payload: Prisma.InputJsonObject;
}

/**
 * Records several events, in their order, with their webhook deliveries queued (the outbox's fan-out), in the
 * caller's database transaction and two statements: what events/outbox.ts's recordEvent does for one.
 */
export async function recordEvents(tx: Sql, events: NewBillingEvent[]): Promise<{ events: Event[]; deliveriesQueued: number }> {
  if (!events.length) return { events: [], deliveriesQueued: 0 };
  // The events as written come back from the statement itself (a morning's renewals write tens of thousands).
  const rows = await tx.query<{ id: string; merchant_id: number; mode: Mode; type: string; created_at: Date | string; payload: Prisma.JsonValue; queued: number }>(
    `WITH ev AS (
       INSERT INTO events (merchant_id, mode, type, payload)
       SELECT e.merchant_id, e.mode::"Mode", e.type, e.payload::jsonb
       FROM unnest($1::int[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS e(merchant_id, mode, type, payload, n)
       ORDER BY e.n
       RETURNING id, merchant_id, mode, type, payload, created_at
     ), ${EVENT_FAN_OUT_CTES}
     SELECT ev.id::text AS id, ev.merchant_id, ev.mode::text AS mode, ev.type, ev.created_at, ev.payload, ${FAN_OUT_JOBS_QUEUED} AS queued
     FROM ev ORDER BY ev.id`,
    [events.map((e) => e.merchantId), events.map((e) => e.mode), events.map((e) => e.type), events.map((e) => JSON.stringify(e.payload))],
  );
  const recorded: Event[] = rows.map((row) => ({
    id: BigInt(row.id),
    merchantId: row.merchant_id,
    mode: row.mode,
    type: row.type,
    transactionId: null,
    payoutId: null,
    refundId: null,
    disputeId: null,
    createdAt: row.created_at instanceof Date ? row.created_at : new Date(row.created_at),
    payload: row.payload,
  }));
  return { events: recorded, deliveriesQueued: rows[0]?.queued ?? 0 };
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

/** Marks the clock ready once everything up to `ranTo` has run; not when it was moved on meanwhile (that advance's run finishes it). */
export const finishAdvance = (db: Db, id: number, ranTo: Date) => db.testClock.updateMany({ where: { id, status: "advancing", frozenTime: ranTo }, data: { status: "ready" } });
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
