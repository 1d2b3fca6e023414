import type { PrismaClient } from "../db/database.ts";
import { checkLedger, formatLedgerReport } from "../modules/ledger/check.ts";
import { UsageError } from "./usage.ts";

/**
 * `ledger check`: the ledger's proof (modules/ledger/check.ts) as a readable report. Exit 0 when clean, 1 on any
 * difference (each check lists at most --limit of its differences, and counts all of them).
 */
export async function ledgerCheckCommand(prisma: PrismaClient, options: Record<string, string | boolean | undefined>): Promise<{ text: string; exitCode: number }> {
  const limit = options.limit === undefined ? 20 : Number(options.limit);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError("--limit must be a whole number from 1 to 10000");
  const result = await checkLedger(prisma, { limit });
  return { text: formatLedgerReport(result), exitCode: result.clean ? 0 : 1 };
}
