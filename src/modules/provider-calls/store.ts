import type { PrismaClient } from "../../db/database.ts";
import type { ProviderCallRecord } from "../../providers/call-record.ts";

/**
 * Every statement on `provider_calls`: the batch insert the sink makes, the reads of the transaction, refund and
 * payout pages, and retention's batch delete. Reads name the merchant as well as the object, so a record is only
 * ever shown to the merchant whose call it was.
 */

export type ProviderCallRow = ProviderCallRecord & {
  merchantId: number;
  transactionId: number | null;
  attemptId: number | null;
  payoutId: number | null;
  refundId: number | null;
  /** When the call was made (rows are written later, in batches). */
  createdAt: Date;
};

/** What the pages show of a record. */
export type ProviderCallView = ProviderCallRecord & { id: bigint; createdAt: Date };

/** The most a page shows for one object (the newest, in the order they were made). */
export const CALLS_PER_OBJECT = 200;

const viewColumns = { id: true, connector: true, operation: true, method: true, path: true, statusCode: true, durationMs: true, requestBody: true, responseBody: true, error: true, createdAt: true } as const;

/** One statement for a whole batch. */
export async function insertProviderCalls(prisma: PrismaClient, rows: ProviderCallRow[]): Promise<void> {
  await prisma.providerCall.createMany({ data: rows });
}

/** A transaction's calls: its own and its attempts' (an attempt's scope always names its transaction too). */
export async function transactionCalls(prisma: PrismaClient, merchantId: number, transactionId: number): Promise<ProviderCallView[]> {
  const rows = await prisma.providerCall.findMany({ where: { merchantId, transactionId }, select: viewColumns, orderBy: { id: "desc" }, take: CALLS_PER_OBJECT });
  return rows.reverse();
}

export async function refundCalls(prisma: PrismaClient, merchantId: number, refundId: number): Promise<ProviderCallView[]> {
  const rows = await prisma.providerCall.findMany({ where: { merchantId, refundId }, select: viewColumns, orderBy: { id: "desc" }, take: CALLS_PER_OBJECT });
  return rows.reverse();
}

export async function payoutCalls(prisma: PrismaClient, merchantId: number, payoutId: number): Promise<ProviderCallView[]> {
  const rows = await prisma.providerCall.findMany({ where: { merchantId, payoutId }, select: viewColumns, orderBy: { id: "desc" }, take: CALLS_PER_OBJECT });
  return rows.reverse();
}

/**
 * Retention: one batch (at most `limit`) of records made more than `olderThanMs` ago, by the database's clock;
 * rows locked by anything else are skipped for the next run (as retention's other statements).
 */
export function deleteOldProviderCallsBatch(prisma: PrismaClient, olderThanMs: number, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM provider_calls WHERE id = ANY(ARRAY(
      SELECT id FROM provider_calls
      WHERE created_at < now() - make_interval(secs => ${olderThanMs / 1000}::double precision)
      ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ))`;
}
