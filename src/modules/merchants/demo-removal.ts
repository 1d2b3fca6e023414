import type { PrismaClient } from "../../db/database.ts";
import { ConflictError, NotFoundError } from "../../errors.ts";
import { deleteJobsOfMerchantRows } from "../../jobs/store.ts";

/**
 * `cli demo remove`: deletes the demo merchant (merchants.is_demo, set when a development start created it) and
 * every row it owns, in one database transaction, so a database that began as a developer's try-out can go live
 * without a stray "Demo Merchant". Refused once the merchant has anything in live mode: real money is never
 * deleted.
 */

/** Live rows here are not data: a live key exists from the start; the counts are rollups of other tables. */
const NOT_LIVE_DATA = new Set(["api_keys", "list_counts"]);

/**
 * Tables that other merchant tables reference with ON DELETE RESTRICT, children first: deleting the merchant row
 * and leaving them to its cascade could trip one RESTRICT before the cascade reaches the referencing row.
 */
const RESTRICTED_FIRST = ["invoices", "subscriptions", "disputes", "refunds", "payouts", "payment_methods"];

/** Job payload fields naming a row, and the table of that row: the merchant's queued work goes with it. */
const JOB_REFERENCES: [string, string][] = [
  ["transactionId", "transactions"],
  ["deliveryId", "webhook_deliveries"],
  ["messageId", "mail_messages"],
  ["invoiceId", "invoices"],
  ["subscriptionId", "subscriptions"],
  ["clockId", "test_clocks"],
  ["channelId", "payment_channels"],
];

export interface DemoRemoval {
  merchant: { id: number; name: string; email: string };
  /** Rows deleted per table (the merchant's own row under merchants; cascaded rows are not counted). */
  deleted: Record<string, number>;
}

export async function removeDemoMerchant(prisma: PrismaClient): Promise<DemoRemoval> {
  const demo = await prisma.merchant.findFirst({ where: { isDemo: true }, orderBy: { id: "asc" }, select: { id: true, name: true, email: true } });
  if (!demo) throw new NotFoundError("Demo merchant (one created by a development start on an empty database)");
  const id = demo.id;
  return prisma.$transaction(
    async (tx) => {
      // Locks the merchant row: nothing new of it (a live channel, a payment) commits between the check and the delete.
      await tx.$queryRawUnsafe(`SELECT id FROM merchants WHERE id = $1 FOR UPDATE`, id);
      const columns = await tx.$queryRawUnsafe<{ table_name: string; has_mode: boolean }[]>(
        `SELECT table_name, bool_or(column_name = 'mode') AS has_mode
           FROM information_schema.columns
          WHERE table_schema = current_schema() AND column_name IN ('merchant_id', 'mode')
          GROUP BY table_name
         HAVING bool_or(column_name = 'merchant_id')
          ORDER BY table_name`,
      );
      const live: string[] = [];
      for (const { table_name: table, has_mode: hasMode } of columns) {
        if (!hasMode || NOT_LIVE_DATA.has(table)) continue;
        const [row] = await tx.$queryRawUnsafe<{ found: boolean }[]>(`SELECT EXISTS (SELECT 1 FROM "${table}" WHERE merchant_id = $1 AND mode = 'live') AS found`, id);
        if (row?.found) live.push(table);
      }
      if (live.length > 0) {
        throw new ConflictError(
          `The demo merchant ${id} has live-mode data (${live.join(", ")}): it is not removed, because live payments are real money. Rename it instead (npm run cli -- merchant rename --merchant ${id} --name <name>).`,
        );
      }

      const deleted: Record<string, number> = {};
      const count = async (table: string, statement: string) => {
        const rows = await tx.$executeRawUnsafe(statement, id);
        if (rows > 0) deleted[table] = (deleted[table] ?? 0) + rows;
      };
      // The ledger's triggers allow these deletes only for this (demo, test-mode) merchant, within this transaction.
      await tx.$queryRawUnsafe(`SELECT set_config('gateway.removing_demo_merchant', $1, true)`, String(id));
      await count("ledger_postings", `DELETE FROM ledger_postings WHERE account_id IN (SELECT id FROM ledger_accounts WHERE merchant_id = $1)`);
      await count("ledger_entries", `DELETE FROM ledger_entries WHERE merchant_id = $1`);
      await count("ledger_accounts", `DELETE FROM ledger_accounts WHERE merchant_id = $1`);
      for (const [field, table] of JOB_REFERENCES) {
        const rows = await deleteJobsOfMerchantRows(tx, field, table, id);
        if (rows > 0) deleted.jobs = (deleted.jobs ?? 0) + rows;
      }
      for (const table of RESTRICTED_FIRST) await count(table, `DELETE FROM "${table}" WHERE merchant_id = $1`);
      // Every other table with a merchant_id column, whether or not a foreign key cascades from merchants
      // (idempotency keys, provider calls, receipts, webhook deliveries, ...); then the merchant, which cascades
      // to the rest (keys, channels, users and their sessions, attempts).
      for (const { table_name: table } of columns) {
        if (table.startsWith("ledger_") || table === "list_counts" || RESTRICTED_FIRST.includes(table)) continue;
        await count(table, `DELETE FROM "${table}" WHERE merchant_id = $1`);
      }
      await count("merchants", `DELETE FROM merchants WHERE id = $1`);
      // Last: deleting the lists' rows above wrote their (negative) counts here.
      await count("list_counts", `DELETE FROM list_counts WHERE merchant_id = $1`);
      await tx.$queryRawUnsafe(`SELECT set_config('gateway.removing_demo_merchant', '', true)`);
      return { merchant: demo, deleted };
    },
    { timeout: 120_000 },
  );
}
