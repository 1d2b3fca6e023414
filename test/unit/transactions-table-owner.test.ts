import { describe, expect, it } from "vitest";
import { readSource, sqlNaming, tableScan } from "../support/table-owner.ts";

/**
 * Every statement on the `transactions` table lives in src/modules/transactions/store.ts, which chooses
 * plain SQL or Prisma; everything else calls its named functions. The status change is the one status machine's
 * statement (events/status-machine.ts), built for any money table from its StatusTable (the transactions' one is
 * state-machine.ts, over the store's TRANSACTION_COLUMNS), so it names no table itself. A source scan keeps it so.
 */
const PRISMA_METHODS =
  "findUnique|findUniqueOrThrow|findFirst|findFirstOrThrow|findMany|create|createMany|createManyAndReturn|update|updateMany|updateManyAndReturn|upsert|delete|deleteMany|count|aggregate|groupBy";

/** SQL that names the table (quoted or not), and a call on Prisma's `transaction` model delegate. */
const scan = tableScan([
  sqlNaming("transactions"),
  { what: "Prisma's transaction model", pattern: new RegExp(`(?:\\.transaction|\\[\\s*["'\`]transaction["'\`]\\s*\\])\\s*\\.\\s*(?:${PRISMA_METHODS})\\b`, "g") },
]);
const mentions = scan.mentions;

describe("the transactions table's owner", () => {
  // Two readers on their own: `ledger check` audits the ledger against every money table in one snapshot, so
  // that a store's bug cannot hide itself; the reports module's store groups several money tables into the
  // overview's figures, on the read replica. Both only read.
  const owned = (file: string) =>
    file === "src/modules/transactions/store.ts" ||
    file === "src/modules/ledger/check.ts" ||
    file === "src/modules/reports/store.ts" ||
    file.startsWith("src/db/generated/");

  it("no file but the store writes or reads the transactions table", () => {
    const { files, found } = scan.outside(owned);
    expect(files.length).toBeGreaterThan(50);
    expect(found).toEqual([]);
  });

  it("the two readers only read it", () => {
    for (const file of ["modules/ledger/check.ts", "modules/reports/store.ts"]) {
      const source = readSource(file);
      expect(mentions(source).length, file).toBeGreaterThan(0);
      expect(source, file).not.toMatch(/(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?transactions\b/i);
    }
  });

  it("the scan sees the statements the store holds (a scan that matches nothing would prove nothing)", () => {
    const found = mentions(readSource("modules/transactions/store.ts")).join("\n");
    for (const statement of ["INSERT INTO transactions", "UPDATE transactions", "FROM transactions", ".transaction.create", ".transaction.findMany", ".transaction.findFirst"]) {
      expect(found).toContain(statement);
    }
    expect(mentions(`await tx["transaction"].update({})`)).toHaveLength(1);
    expect(mentions(`DELETE FROM "transactions" WHERE id = 1`)).toHaveLength(1);
    // A transaction held in a variable is not the table.
    expect(mentions(`return { id: result.transaction.id, status: created.transaction.status }`)).toEqual([]);
  });
});
