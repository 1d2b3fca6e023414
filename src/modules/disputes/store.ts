import { scopeOf, type Principal } from "../../auth.ts";
import type { Db, PrismaClient } from "../../db/database.ts";
import type { Dispute, DisputeFile, Event, Prisma } from "../../db/generated/prisma/client.ts";
import { tableRows } from "../../db/table-rows.ts";
import { statusDateWhere } from "../../filters.ts";
import { countRows, pageOfIds, type CountedList, type Paging } from "../../paging.ts";
import type { DisputeState } from "../../providers/types.ts";
import { defineSnapshot } from "../events/snapshot.ts";
import type { StatusRules, StatusTable } from "../events/status-machine.ts";
import { enqueue } from "../../jobs/store.ts";
import { postReservation } from "../ledger/postings.ts";
import { disputeOnPaymentCte, lockForDispute } from "../transactions/store.ts";
import { EVENT_FAN_OUT_CTES, FAN_OUT_JOBS_QUEUED } from "../events/fan-out.ts";

/**
 * Every statement on the disputes and dispute_files tables. A dispute's changes each write, in one statement or
 * transaction, the dispute, its event (with its webhook deliveries), the ledger's entry and the payment's
 * dispute_status: opening holds the amount, the status machine (events/status-machine.ts, DISPUTE_STATUS below)
 * moves it on, and a won or lost one releases or takes the hold.
 */

/** Asks the provider about one open dispute ({ disputeId }), again and again until it is closed. */
export const DISPUTE_CHECK_JOB = "dispute.check";

export const OPEN_STATUSES = ["needs_response", "under_review"] as const;
export const isOpen = (status: string) => (OPEN_STATUSES as readonly string[]).includes(status);

/** The dispute as of an event, and as /v1/disputes shows it. */
const DISPUTE_SNAPSHOT = defineSnapshot<Dispute>()({
  id: "reference",
  transaction_reference: "transactionReference",
  amount: ["amount", "amount"],
  currency: "currency",
  reason: "reason",
  status: "status",
  due_by: ["dueBy", "time"],
  evidence: "evidence",
  evidence_submitted_at: ["evidenceSubmittedAt", "time"],
  provider_reference: "providerReference",
  created_at: ["createdAt", "time"],
  updated_at: ["updatedAt", "time"],
  closed_at: ["closedAt", "time"],
});
export const disputeSnapshot = (d: Dispute) => DISPUTE_SNAPSHOT.of(d);
export type DisputeSnapshot = ReturnType<typeof disputeSnapshot>;

const DISPUTE_ROWS = tableRows<Dispute>("disputes", {
  id: "value", merchantId: "value", mode: "value", reference: "value", transactionId: "value", transactionReference: "value", channelId: "value",
  amount: "bigint", currency: "value", reason: "value", status: "value", dueBy: "time", evidence: "value", evidenceSubmittedAt: "time",
  acceptedAt: "time", providerReference: "value", messages: "value", fee: "bigint", createdAt: "time", updatedAt: "time", closedAt: "time",
});

/** A closing or review change: under_review only from needs_response; won and lost from either open status. */
const DISPUTE_RULES: StatusRules<Exclude<DisputeState, "needs_response">> = {
  from: (to) => (to === "under_review" ? ["needs_response"] : OPEN_STATUSES),
  eventType: (to) => (to === "under_review" ? "updated" : "closed"),
  timeColumn: (to) => (to === "under_review" ? null : "closed_at"),
};

export type DisputeChange = "dueBy" | "messages" | "fee" | "evidence" | "evidenceSubmittedAt" | "acceptedAt";

/** The disputes table's part in the status machine. */
export const DISPUTE_STATUS: StatusTable<Dispute, DisputeChange, DisputeSnapshot, Exclude<DisputeState, "needs_response">> = {
  subject: "dispute",
  table: "disputes",
  eventColumn: "dispute_id",
  rules: DISPUTE_RULES,
  changeColumns: { dueBy: "due_by", messages: "messages", fee: "fee", evidence: "evidence", evidenceSubmittedAt: "evidence_submitted_at", acceptedAt: "accepted_at" },
  ...DISPUTE_ROWS,
  snapshot: DISPUTE_SNAPSHOT,
  // The payment shows where its dispute stands; a loss counts in what was charged back.
  alsoWrites: (to) => disputeOnPaymentCte(to === "lost"),
};

/** An event written with the dispute's statement, and the deliveries it queued. */
const EVENT_CTES = (type: string) => `ev AS (
    INSERT INTO events (merchant_id, mode, type, dispute_id, payload)
    SELECT t.merchant_id, t.mode, '${type}', t.id, jsonb_build_object('dispute', ${DISPUTE_SNAPSHOT.sql("t")}) FROM t
    RETURNING id, merchant_id, mode, type, created_at, payload
  ), ${EVENT_FAN_OUT_CTES}`;

type EventRow = { eventId: string; eventCreatedAt: Date | string; eventPayload: Prisma.JsonValue; deliveriesQueued: number };

function eventOf(dispute: Dispute, type: string, row: EventRow): { event: Event; deliveriesQueued: number } {
  return {
    event: {
      id: BigInt(row.eventId),
      merchantId: dispute.merchantId,
      mode: dispute.mode,
      type,
      transactionId: null,
      payoutId: null,
      refundId: null,
      disputeId: dispute.id,
      createdAt: row.eventCreatedAt instanceof Date ? row.eventCreatedAt : new Date(row.eventCreatedAt),
      payload: row.eventPayload,
    },
    deliveriesQueued: row.deliveriesQueued,
  };
}

export interface NewDispute {
  reference: string;
  transactionId: number;
  providerReference: string;
  /** What the provider disputes; null: the payment's whole amount. Held only up to what the payment still has. */
  amount: bigint | null;
  currency: string | null;
  reason: string;
  dueBy: Date | null;
  messages: unknown[];
}

export type Opened = { dispute: Dispute; created: true; event: Event; deliveriesQueued: number } | { dispute: Dispute; created: false } | { refused: "not_disputable" };

/**
 * Opens a dispute of a completed payment: its row, the hold (available -> disputed), its dispute.created event and
 * the payment's dispute_status, in one transaction. The payment's row is locked first, as a refund's reservation
 * locks it, so the dispute counts every refund not failed and no refund slips in beside an open dispute; what it
 * holds is never more than the payment still has (paid - refunds - lost disputes - other open disputes). A second
 * notice of the same dispute (however many arrive at once) finds it and opens nothing.
 */
export async function openDispute(prisma: PrismaClient, input: NewDispute, firstCheckAt: Date): Promise<Opened> {
  return prisma.$transaction(async (tx) => {
    const payment = await lockForDispute(tx, input.transactionId);
    if (!payment || payment.status !== "completed" || payment.channelId === null) return { refused: "not_disputable" } as const;
    const existing = await tx.dispute.findUnique({ where: { channelId_providerReference: { channelId: payment.channelId, providerReference: input.providerReference } } });
    if (existing) return { dispute: existing, created: false } as const;
    const [used] = await tx.$queryRaw<{ sum: string }[]>`
      SELECT ((SELECT coalesce(sum(amount), 0) FROM refunds WHERE transaction_id = ${payment.id} AND status <> 'failed')
        + (SELECT coalesce(sum(amount), 0) FROM disputes WHERE transaction_id = ${payment.id} AND status IN ('needs_response', 'under_review')))::text AS sum`;
    const room = payment.amount - payment.amountChargedBack - BigInt(used!.sum);
    const wanted = input.amount ?? payment.amount;
    const amount = wanted < room ? wanted : room > 0n ? room : 0n;
    const dispute = await tx.dispute.create({
      data: {
        reference: input.reference,
        merchantId: payment.merchantId,
        mode: payment.mode,
        transactionId: payment.id,
        transactionReference: payment.reference,
        channelId: payment.channelId,
        amount,
        currency: payment.currency,
        reason: input.reason,
        status: "needs_response",
        dueBy: input.dueBy,
        providerReference: input.providerReference,
        messages: input.messages as Prisma.InputJsonValue,
      },
    });
    if (amount > 0n) await postReservation(tx, "dispute", dispute.id);
    await enqueue(tx, DISPUTE_CHECK_JOB, { disputeId: dispute.id }, { runAt: firstCheckAt });
    const [row] = await tx.$queryRawUnsafe<EventRow[]>(
      `WITH t AS (SELECT * FROM disputes WHERE id = $1), ${EVENT_CTES("dispute.created")}, ${disputeOnPaymentCte(false)}
       SELECT ev.id::text AS "eventId", ev.created_at AS "eventCreatedAt", ev.payload AS "eventPayload", ${FAN_OUT_JOBS_QUEUED} AS "deliveriesQueued" FROM ev`,
      dispute.id,
    );
    return { dispute, created: true, ...eventOf(dispute, "dispute.created", row!) } as const;
  });
}

/**
 * A change that is not a status change (the provider's reminder, a new deadline or message), recorded with its
 * dispute.updated event: only when the row is still as it was read (`seen`), so concurrent notices record it once.
 */
export async function recordUpdate(prisma: PrismaClient, dispute: Dispute, changes: { dueBy: Date | null; messages: unknown[] }): Promise<{ dispute: Dispute; event: Event; deliveriesQueued: number } | null> {
  const [row] = await prisma.$queryRawUnsafe<(Record<string, unknown> & EventRow)[]>(
    `WITH t AS (
       UPDATE disputes SET due_by = $2, messages = $3::jsonb, updated_at = now() WHERE id = $1 AND updated_at = $4 AND status IN ('needs_response', 'under_review') RETURNING *
     ), ${EVENT_CTES("dispute.updated")}
     SELECT changed.*, ev.id::text AS "eventId", ev.created_at AS "eventCreatedAt", ev.payload AS "eventPayload", ${FAN_OUT_JOBS_QUEUED} AS "deliveriesQueued"
     FROM (SELECT ${DISPUTE_ROWS.columns} FROM t) changed, ev`,
    dispute.id,
    changes.dueBy,
    JSON.stringify(changes.messages),
    dispute.updatedAt,
  );
  if (!row) return null;
  const { eventId, eventCreatedAt, eventPayload, deliveriesQueued, ...columns } = row;
  const updated = DISPUTE_ROWS.fromRow(columns);
  return { dispute: updated, ...eventOf(updated, "dispute.updated", { eventId, eventCreatedAt, eventPayload, deliveriesQueued }) };
}

/** Keeps the merchant's evidence as a draft (no event: nothing was sent). Only while the dispute awaits an answer. */
export async function saveDraft(db: Db, id: number, evidence: Prisma.InputJsonValue): Promise<Dispute | null> {
  const { count } = await db.dispute.updateMany({ where: { id, status: "needs_response" }, data: { evidence } });
  return count ? db.dispute.findUnique({ where: { id } }) : null;
}

/**
 * Records the merchant's evidence as submitted (at `at`) before the provider hears of it, while the dispute still awaits
 * an answer: a check that finds it under review at the provider meanwhile keeps it. False when it no longer awaits one.
 */
export async function markSubmitted(db: Db, id: number, evidence: Prisma.InputJsonValue, at: Date): Promise<boolean> {
  const { count } = await db.dispute.updateMany({ where: { id, status: "needs_response", evidenceSubmittedAt: null }, data: { evidence, evidenceSubmittedAt: at } });
  return count === 1;
}

/** The provider did not take the evidence: it is a draft again, and may be submitted again. */
export async function unmarkSubmitted(db: Db, id: number): Promise<void> {
  await db.dispute.updateMany({ where: { id, status: "needs_response" }, data: { evidenceSubmittedAt: null } });
}

export const findById = (db: Db, id: number) => db.dispute.findUnique({ where: { id } });

export function findWithPayment(db: Db, id: number) {
  return db.dispute.findUnique({ where: { id }, include: { transaction: true, channel: true } });
}

export function findByProvider(db: Db, channelId: number, providerReference: string) {
  return db.dispute.findUnique({ where: { channelId_providerReference: { channelId, providerReference } }, include: { transaction: true, channel: true } });
}

/** By its reference (dp_...), in the caller's merchant and mode only. */
export function findScoped(db: Db, principal: Principal, reference: string) {
  return db.dispute.findFirst({ where: { ...scopeOf(principal), reference } });
}

export interface DisputeFilters {
  status?: DisputeState | null;
  /** The disputed transaction's id. */
  transactionId?: number | null;
  dateFrom?: string | null;
  dateTo?: string | null;
  timeZone?: string | null;
}

/** Open ones first, soonest deadline first; then the rest, newest first. */
const LIST_ORDER: Prisma.DisputeOrderByWithRelationInput[] = [{ closedAt: { sort: "desc", nulls: "first" } }, { dueBy: { sort: "asc", nulls: "last" } }, { createdAt: "desc" }, { id: "desc" }];

function filtered(principal: Principal, filters: DisputeFilters): Prisma.DisputeWhereInput {
  const { status: _, ...window } = statusDateWhere(principal, { dateFrom: filters.dateFrom ?? null, dateTo: filters.dateTo ?? null, timeZone: filters.timeZone ?? null });
  return {
    ...window,
    ...(filters.status ? { status: filters.status } : {}),
    ...(filters.transactionId != null ? { transactionId: filters.transactionId } : {}),
  };
}

/**
 * A page with its total, open disputes first by deadline (LIST_ORDER). The total from the rollups (list_counts, kept
 * by triggers, keyed by status; a transaction's disputes counted from its index), the page's ids along the
 * (merchant, mode[, status], closed_at DESC, due_by, created_at DESC, id DESC) index, in one statement (paging.ts);
 * then those rows with what `query` includes.
 */
export async function listPage(db: Db, principal: Principal, filters: DisputeFilters, paging: Paging, query: object = {}): Promise<{ items: Dispute[]; total: number }> {
  const { total, ids } = await pageOfIds<number>(db, countedList(principal, filters), paging);
  const items = ids.length ? await db.dispute.findMany({ ...query, where: { id: { in: ids } }, orderBy: LIST_ORDER }) : [];
  return { items: items as Dispute[], total };
}

/** LIST_ORDER in SQL: DESC puts nulls first and ASC last, as LIST_ORDER asks (and as the index is built). */
const LIST_ORDER_SQL = "closed_at DESC NULLS FIRST, due_by ASC NULLS LAST, created_at DESC, id DESC";

/** The filters as paging.ts counts and pages them: status and the date window are kept by the rollups. */
function countedList(principal: Principal, filters: DisputeFilters): CountedList {
  const { status: _, ...window } = statusDateWhere(principal, { dateFrom: filters.dateFrom ?? null, dateTo: filters.dateTo ?? null, timeZone: filters.timeZone ?? null });
  const created = window.createdAt as { gte?: Date; lt?: Date } | undefined;
  return {
    table: "disputes",
    merchantId: window.merchantId,
    mode: window.mode,
    order: LIST_ORDER_SQL,
    closedFirst: { column: "closed_at", rollup: "disputes_closed" },
    ...(filters.status ? { key: { column: "status", type: "text", values: [filters.status] } } : {}),
    ...(created ? { createdAt: { gte: created.gte, lt: created.lt } } : {}),
    ...(filters.transactionId != null ? { extra: (param: (value: unknown) => string) => `transaction_id = ${param(filters.transactionId)}::int` } : {}),
  };
}

/** GraphQL's disputes connection: Pothos's cursor arguments (`query`) over the caller's filtered disputes, newest id first. */
export function connectionSlice(db: Db, principal: Principal, filters: DisputeFilters, query: object): Promise<Dispute[]> {
  return db.dispute.findMany({ ...query, where: filtered(principal, filters), orderBy: { id: "desc" } });
}

export function count(db: Db, principal: Principal, filters: DisputeFilters): Promise<number> {
  return countRows(db, countedList(principal, filters));
}

export function ofTransaction(db: Db, transactionId: number) {
  return db.dispute.findMany({ where: { transactionId }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
}

// ---- Files ----

export function insertFile(db: Db, data: Prisma.DisputeFileUncheckedCreateInput): Promise<DisputeFile> {
  return db.disputeFile.create({ data });
}

/** The dispute's files named by reference (df_...); those not its own are left out. */
export function filesOf(db: Db, disputeId: number, references?: readonly string[]) {
  return db.disputeFile.findMany({
    where: { disputeId, ...(references ? { reference: { in: [...references] } } : {}) },
    select: { id: true, reference: true, name: true, size: true, contentType: true, providerFileName: true, createdAt: true },
    orderBy: { id: "asc" },
  });
}
