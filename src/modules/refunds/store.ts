import { scopeOf, type Principal } from "../../auth.ts";
import type { Db } from "../../db/database.ts";
import type { Prisma, Refund, Transaction } from "../../db/generated/prisma/client.ts";
import { tableRows } from "../../db/table-rows.ts";
import { statusDateWhere, type StatusDateFilters } from "../../filters.ts";
import { countRows, pageOfIds, type CountedList, type Paging } from "../../paging.ts";
import { defineSnapshot, OUTCOME_AND_TIMES } from "../events/snapshot.ts";
import type { StatusTable } from "../events/status-machine.ts";
import { postReservation } from "../ledger/postings.ts";
import { ADD_REFUNDED_AMOUNT_CTE, lockForRefund } from "../transactions/store.ts";

/**
 * Every statement on the refunds table. Prisma for all but the status change, which the status machine
 * (events/status-machine.ts) writes in one SQL statement from REFUND_STATUS below.
 */

export type RefundQuery = { include?: Prisma.RefundInclude; select?: Prisma.RefundSelect };

/** The refund as of an event, and as /v1/refunds shows it. */
const REFUND_SNAPSHOT = defineSnapshot<Refund>()({
  id: "id",
  reference: "reference",
  transaction_reference: "transactionReference",
  amount: ["amount", "amount"],
  currency: "currency",
  status: "status",
  method: "method",
  reason: "reason",
  merchant_note: "merchantNote",
  customer_note: "customerNote",
  ...OUTCOME_AND_TIMES,
});

export const refundSnapshot = (r: Refund) => REFUND_SNAPSHOT.of(r);
export type RefundSnapshot = ReturnType<typeof refundSnapshot>;

/** A whole refunds row as the model has it, for the status change's RETURNING and reads by id. */
const REFUND_ROWS = tableRows<Refund>("refunds", {
  id: "value", merchantId: "value", mode: "value", reference: "value", transactionId: "value", transactionReference: "value",
  channelId: "value", amount: "bigint", currency: "value", status: "value", method: "value", reason: "value", merchantNote: "value",
  customerNote: "value", providerRequestId: "value", providerReference: "value", reversedReceipt: "value", failureCode: "value", failureReason: "value",
  createdAt: "time", updatedAt: "time", completedAt: "time",
});

/** The refunds table's part in the status machine. */
export const REFUND_STATUS: StatusTable<Refund, "providerReference" | "failureCode" | "failureReason" | "reversedReceipt", RefundSnapshot> = {
  subject: "refund",
  table: "refunds",
  eventColumn: "refund_id",
  // reversed_receipt is cleared only by the failure of a request the provider refused at once (refunds/service.ts).
  changeColumns: { providerReference: "provider_reference", failureCode: "failure_code", failureReason: "failure_reason", reversedReceipt: "reversed_receipt" },
  ...REFUND_ROWS,
  snapshot: REFUND_SNAPSHOT,
  // A completed refund counts in its transaction's amount_refunded, in the same statement.
  alsoWrites: (to) => (to === "completed" ? ADD_REFUNDED_AMOUNT_CTE : null),
};

export type NewRefund = Omit<Prisma.RefundUncheckedCreateInput, "transactionId" | "transactionReference" | "channelId" | "currency" | "merchantId" | "mode" | "amount">;

/** What a reservation came to: the refund, or why it could not be made. */
export type Reservation =
  | { refund: Refund }
  | { refused: "transaction_not_refundable" }
  /** A dispute of the payment is open: the payer's bank decides first. */
  | { refused: "transaction_disputed" }
  | { refused: "amount_exceeds_refundable"; refundable: bigint }
  /** The payment's receipt was sent for reversal and that reversal failed: it is never sent again, and nothing else is refunded. */
  | { refused: "reversal_failed"; failed: Pick<Refund, "reference" | "reversedReceipt" | "failureCode" | "failureReason"> };

/**
 * Reserves a refund of a transaction in the caller's database transaction: the transaction's row is
 * locked first (FOR UPDATE), so refunds of one transaction are decided one at a time across instances,
 * and the refunds that have not failed are summed by the next statement, whose snapshot is taken after
 * the lock is granted (READ COMMITTED): a refund committed meanwhile is counted. `amount` null means all
 * that remains.
 */
export async function reserveRefund(tx: Prisma.TransactionClient, transaction: Pick<Transaction, "id">, amount: bigint | null, data: NewRefund): Promise<Reservation> {
  const locked = await lockForRefund(tx, transaction.id);
  if (!locked || locked.status !== "completed" || locked.channelId === null) return { refused: "transaction_not_refundable" };
  if (locked.disputeStatus === "needs_response" || locked.disputeStatus === "under_review") return { refused: "transaction_disputed" };
  // One statement, so what it counts and the failed reversal it finds are one snapshot.
  const [used] = await tx.$queryRaw<{ sum: string; failed_reversal: number | null }[]>`
    SELECT coalesce(sum(amount) FILTER (WHERE status <> 'failed'), 0)::text AS sum,
           min(id) FILTER (WHERE status = 'failed' AND reversed_receipt IS NOT NULL) AS failed_reversal
    FROM refunds WHERE transaction_id = ${transaction.id}`;
  if (used!.failed_reversal !== null) {
    const failed = await tx.refund.findUniqueOrThrow({ where: { id: used!.failed_reversal }, select: { reference: true, reversedReceipt: true, failureCode: true, failureReason: true } });
    return { refused: "reversal_failed", failed };
  }
  // What lost disputes took back is gone too: refunds and chargebacks together never exceed what was paid.
  const refundable = locked.amount - BigInt(used!.sum) - locked.amountChargedBack;
  const wanted = amount ?? refundable;
  if (wanted <= 0n || wanted > refundable) return { refused: "amount_exceeds_refundable", refundable };
  const refund = await tx.refund.create({
    data: {
      ...data,
      merchantId: locked.merchantId,
      mode: locked.mode,
      transactionId: locked.id,
      transactionReference: locked.reference,
      channelId: locked.channelId,
      amount: wanted,
      currency: locked.currency,
    },
  });
  // The amount is reserved in the ledger (available -> pending_out) with the refund, in this transaction.
  await postReservation(tx, "refund", refund.id);
  return { refund };
}

export function findWithPayment(db: Db, id: number) {
  return db.refund.findUnique({ where: { id }, include: { transaction: true, channel: true } });
}

/** By id or reference, in the caller's merchant and mode only. */
export async function findScoped(db: Db, principal: Principal, key: { id: number } | { reference: string }, query: RefundQuery = {}): Promise<Refund | null> {
  return (await db.refund.findFirst({ ...query, where: { ...scopeOf(principal), ...key } })) as Refund | null;
}

export interface RefundFilters extends StatusDateFilters {
  /** The refunded transaction's id. */
  transactionId?: number | null;
}

const filtered = (principal: Principal, filters: RefundFilters): Prisma.RefundWhereInput => ({
  ...statusDateWhere(principal, filters),
  ...(filters.transactionId != null ? { transactionId: filters.transactionId } : {}),
});

/**
 * The filters as paging.ts counts and pages them: status and the date window are kept by the rollups; a
 * transaction's refunds (a handful) are counted from the transaction_id index.
 */
function countedList(principal: Principal, filters: RefundFilters): CountedList {
  const where = statusDateWhere(principal, filters);
  const transactionId = filters.transactionId;
  return {
    table: "refunds",
    merchantId: where.merchantId,
    mode: where.mode,
    ...(where.status ? { key: { column: "status", type: '"TransactionStatus"', values: [where.status] } } : {}),
    ...(where.createdAt ? { createdAt: where.createdAt as { gte?: Date; lt?: Date } } : {}),
    ...(transactionId != null ? { extra: (param: (value: unknown) => string) => `transaction_id = ${param(transactionId)}::int` } : {}),
  };
}

/**
 * One page, newest first, with the exact total: the ids and the total in one statement (paging.ts: the
 * rollups and the (merchant, mode[, status], created_at, id) indexes), then those rows with what `query` selects.
 */
export async function listPage(db: Db, principal: Principal, filters: RefundFilters, paging: Paging, query: RefundQuery = {}): Promise<{ items: Refund[]; total: number }> {
  const { total, ids } = await pageOfIds<number>(db, countedList(principal, filters), paging);
  const items = ids.length ? await db.refund.findMany({ ...query, where: { id: { in: ids } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }) : [];
  return { items: items as Refund[], total };
}

/** GraphQL's refunds connection: Pothos's cursor arguments (`query`) over the caller's filtered refunds, newest id first. */
export function connectionSlice(db: Db, principal: Principal, filters: RefundFilters, query: object): Promise<Refund[]> {
  return db.refund.findMany({ ...query, where: filtered(principal, filters), orderBy: { id: "desc" } });
}

export function count(db: Db, principal: Principal, filters: RefundFilters): Promise<number> {
  return countRows(db, countedList(principal, filters));
}

/** The sum of a transaction's completed refunds, recomputed (transactions.amount_refunded keeps it as they complete). */
/** A payment's completed refunds, oldest first (its receipt lists them). */
export function completedOf(db: Db, transactionId: number): Promise<Refund[]> {
  return db.refund.findMany({ where: { transactionId, status: "completed" }, orderBy: { id: "asc" } });
}

export async function refundedAmount(db: Db, transactionId: number): Promise<bigint> {
  const result = await db.refund.aggregate({ where: { transactionId, status: "completed" }, _sum: { amount: true } });
  return result._sum.amount ?? 0n;
}

/** A pending refund's provider id and note as the provider last reported them (Paystack's needs-attention is kept as failure_reason). */
export async function recordPending(db: Db, id: number, data: { providerReference: string | null; failureReason: string | null }): Promise<void> {
  await db.refund.updateMany({ where: { id, status: "pending" }, data });
}

/** A refund of one channel by our request id (Daraja's OriginatorConversationID), else by the provider's conversation id kept while pending. */
export async function findForResult(db: Db, channelId: number, ids: { providerRequestId: string | null; conversationId: string | null }): Promise<Refund | null> {
  if (ids.providerRequestId) {
    const mine = await db.refund.findFirst({ where: { channelId, providerRequestId: ids.providerRequestId } });
    if (mine) return mine;
  }
  if (!ids.conversationId) return null;
  return db.refund.findFirst({ where: { channelId, status: "pending", providerReference: ids.conversationId } });
}

export function findByChannelReference(db: Db, channelId: number, reference: string): Promise<Refund | null> {
  return db.refund.findFirst({ where: { channelId, reference } });
}

/** What the refunds of a transaction that have not failed add up to (what a refund of "all that remains" would leave out). */
export async function unfailedAmount(db: Db, transactionId: number): Promise<bigint> {
  const result = await db.refund.aggregate({ where: { transactionId, status: { not: "failed" } }, _sum: { amount: true } });
  return result._sum.amount ?? 0n;
}

/** What a provider's notice names, on one channel: the refunded payment's reference, the provider's refund id, or both. */
export interface RefundNotice {
  paymentReference: string | null;
  providerReference: string | null;
}

/**
 * The pending refunds a provider's notice can mean, with their payment and channel: those of the payment it
 * names on this channel (narrowed to the one with its refund id when that is recorded), else the one with its id.
 */
export async function findPendingForNotice(db: Db, channelId: number, notice: RefundNotice) {
  const include = { transaction: true, channel: true } as const;
  if (notice.paymentReference) {
    const rows = await db.refund.findMany({ where: { channelId, status: "pending", transaction: { reference: notice.paymentReference } }, include, orderBy: { id: "asc" } });
    const named = notice.providerReference ? rows.filter((r) => r.providerReference === notice.providerReference) : [];
    return named.length ? named : rows;
  }
  if (!notice.providerReference) return [];
  return db.refund.findMany({ where: { channelId, status: "pending", providerReference: notice.providerReference }, include });
}
