import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Every statement on the `transactions` table lives in src/modules/transactions/store.ts, which chooses
 * plain SQL or Prisma; everything else calls its named functions. The status change is the one status machine's
 * statement (events/status-machine.ts), built for any money table from its StatusTable (the transactions' one is
 * state-machine.ts, over the store's TRANSACTION_COLUMNS), so it names no table itself. A source scan keeps it so.
 */
const root = new URL("../..", import.meta.url).pathname;
const src = join(root, "src");

const PRISMA_METHODS =
  "findUnique|findUniqueOrThrow|findFirst|findFirstOrThrow|findMany|create|createMany|createManyAndReturn|update|updateMany|updateManyAndReturn|upsert|delete|deleteMany|count|aggregate|groupBy";

/** SQL that names the table (quoted or not), and a call on Prisma's `transaction` model delegate. */
const MENTIONS = [
  { what: "SQL naming the transactions table", pattern: /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|FROM|JOIN|TRUNCATE(?:\s+TABLE)?)\s+"?transactions"?\b/gi },
  { what: "Prisma's transaction model", pattern: new RegExp(`(?:\\.transaction|\\[\\s*["'\`]transaction["'\`]\\s*\\])\\s*\\.\\s*(?:${PRISMA_METHODS})\\b`, "g") },
];

function mentions(text: string): string[] {
  return MENTIONS.flatMap(({ what, pattern }) => [...text.matchAll(pattern)].map((m) => `${what}: ${m[0]}`));
}

describe("the transactions table's owner", () => {
  const files = readdirSync(src, { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts"))
    .map((path) => relative(root, join(src, path)));
  const owned = (file: string) => file === "src/modules/transactions/store.ts" || file.startsWith("src/db/generated/");

  it("no file but the store writes or reads the transactions table", () => {
    const outside = files.filter((file) => !owned(file));
    expect(outside.length).toBeGreaterThan(50);
    const found = outside.flatMap((file) => mentions(readFileSync(join(root, file), "utf8")).map((m) => `${file}: ${m}`));
    expect(found).toEqual([]);
  });

  it("the scan sees the statements the store holds (a scan that matches nothing would prove nothing)", () => {
    const store = readFileSync(join(src, "modules/transactions/store.ts"), "utf8");
    const found = mentions(store).join("\n");
    for (const statement of ["INSERT INTO transactions", "UPDATE transactions", "FROM transactions", ".transaction.create", ".transaction.findMany", ".transaction.count"]) {
      expect(found).toContain(statement);
    }
    expect(mentions(`await tx["transaction"].update({})`)).toHaveLength(1);
    expect(mentions(`DELETE FROM "transactions" WHERE id = 1`)).toHaveLength(1);
    // A transaction held in a variable is not the table.
    expect(mentions(`return { id: result.transaction.id, status: created.transaction.status }`)).toEqual([]);
  });
});
