import { scopeOf, type Principal } from "../../auth.ts";
import type { Db } from "../../db/database.ts";
import type { Payout, Prisma } from "../../db/generated/prisma/client.ts";
import { tableRows } from "../../db/table-rows.ts";
import { statusDateWhere, type StatusDateFilters } from "../../filters.ts";
import { countRows, pageOfIds, type CountedList, type Paging } from "../../paging.ts";
import { defineSnapshot, OUTCOME_AND_TIMES } from "../events/snapshot.ts";
import type { StatusTable } from "../events/status-machine.ts";
import { postReservation } from "../ledger/postings.ts";

/**
 * Every statement on the payouts table. Prisma for all but the status change, which the status machine
 * (events/status-machine.ts) writes in one SQL statement from PAYOUT_STATUS below.
 */

export type PayoutQuery = { include?: Prisma.PayoutInclude; select?: Prisma.PayoutSelect };

/** The payout as of an event, and as /v1/payouts shows it. */
const PAYOUT_SNAPSHOT = defineSnapshot<Payout>()({
  id: "id",
  reference: "reference",
  client_reference: "clientReference",
  amount: ["amount", "amount"],
  currency: "currency",
  phone_number: ["phoneNumber", "msisdn"],
  status: "status",
  payment_channel_id: "channelId",
  ...OUTCOME_AND_TIMES,
});

export const payoutSnapshot = (p: Payout) => PAYOUT_SNAPSHOT.of(p);
export type PayoutSnapshot = ReturnType<typeof payoutSnapshot>;

/** A whole payouts row as the model has it, for the status change's RETURNING and reads by id. */
const PAYOUT_ROWS = tableRows<Payout>("payouts", {
  id: "value", merchantId: "value", mode: "value", reference: "value", clientReference: "value", amount: "bigint",
  currency: "value", phoneNumber: "value", status: "value", commandId: "value", description: "value", channelId: "value",
  providerRequestId: "value", providerConversationId: "value", providerReference: "value", failureCode: "value",
  failureReason: "value", createdAt: "time", updatedAt: "time", completedAt: "time",
});

/** The payouts table's part in the status machine. */
export const PAYOUT_STATUS: StatusTable<Payout, "providerReference" | "failureCode" | "failureReason", PayoutSnapshot> = {
  subject: "payout",
  table: "payouts",
  eventColumn: "payout_id",
  changeColumns: { providerReference: "provider_reference", failureCode: "failure_code", failureReason: "failure_reason" },
  ...PAYOUT_ROWS,
  snapshot: PAYOUT_SNAPSHOT,
};

/** A new payout, its amount reserved in the ledger (available -> pending_out) in the same transaction. */
export async function insertPayout(tx: Prisma.TransactionClient, data: Prisma.PayoutUncheckedCreateInput): Promise<Payout> {
  const payout = await tx.payout.create({ data });
  await postReservation(tx, "payout", payout.id);
  return payout;
}

/** The provider accepted the request: its own id for it (Daraja's ConversationID). */
export async function recordConversationId(db: Db, id: number, providerConversationId: string | null): Promise<void> {
  await db.payout.updateMany({ where: { id }, data: { providerConversationId } });
}

export function findWithChannel(db: Db, id: number) {
  return db.payout.findUnique({ where: { id }, include: { channel: true } });
}

export async function statusOf(db: Db, id: number) {
  return (await db.payout.findUnique({ where: { id }, select: { status: true } }))?.status ?? null;
}

/** A channel's payout by our reference (a provider's notification or a status answer names it). */
export function findByChannelReference(db: Db, channelId: number, reference: string) {
  return db.payout.findFirst({ where: { channelId, reference }, include: { channel: true } });
}

/** A channel's payout by our request id (what a provider's result carries). */
export function findByProviderRequestId(db: Db, channelId: number, providerRequestId: string) {
  return db.payout.findFirst({ where: { channelId, providerRequestId } });
}

/** By id or reference, in the caller's merchant and mode only. */
export async function findScoped(db: Db, principal: Principal, key: { id: number } | { reference: string }, query: PayoutQuery = {}): Promise<Payout | null> {
  return (await db.payout.findFirst({ ...query, where: { ...scopeOf(principal), ...key } })) as Payout | null;
}

/** The filters as paging.ts counts and pages them: status and the date window are both kept by the rollups. */
function countedList(principal: Principal, filters: StatusDateFilters): CountedList {
  const where = statusDateWhere(principal, filters);
  return {
    table: "payouts",
    merchantId: where.merchantId,
    mode: where.mode,
    ...(where.status ? { key: { column: "status", type: '"TransactionStatus"', values: [where.status] } } : {}),
    ...(where.createdAt ? { createdAt: where.createdAt as { gte?: Date; lt?: Date } } : {}),
  };
}

/**
 * One page, newest first, with the exact total: the ids and the total in one statement (paging.ts: the
 * rollups and the (merchant, mode[, status], created_at, id) indexes), then those rows with what `query` selects.
 */
export async function listPage(db: Db, principal: Principal, filters: StatusDateFilters, paging: Paging, query: PayoutQuery = {}): Promise<{ items: Payout[]; total: number }> {
  const { total, ids } = await pageOfIds<number>(db, countedList(principal, filters), paging);
  const items = ids.length ? await db.payout.findMany({ ...query, where: { id: { in: ids } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }) : [];
  return { items: items as Payout[], total };
}

/** GraphQL's payouts connection: Pothos's cursor arguments (`query`) over the caller's filtered payouts, newest id first. */
export function connectionSlice(db: Db, principal: Principal, filters: StatusDateFilters, query: object): Promise<Payout[]> {
  return db.payout.findMany({ ...query, where: statusDateWhere(principal, filters), orderBy: { id: "desc" } });
}

export function count(db: Db, principal: Principal, filters: StatusDateFilters): Promise<number> {
  return countRows(db, countedList(principal, filters));
}
