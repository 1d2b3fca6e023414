import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

/**
 * The source scan behind the tests that keep a table behind its owner (test/unit/*-table-owner.test.ts): which
 * files of src/ name the table in SQL or call its Prisma model delegate, outside the files that own it.
 */
const root = new URL("../..", import.meta.url).pathname;

/** One way of naming the table, and what a finding of it is called. */
export interface TableMention {
  what: string;
  pattern: RegExp;
}

/** SQL that names the table (quoted or not) after INSERT INTO, UPDATE, DELETE FROM, FROM, JOIN or TRUNCATE. */
export function sqlNaming(table: string): TableMention {
  return {
    what: `SQL naming the ${table} table`,
    pattern: new RegExp(`\\b(?:INSERT\\s+INTO|UPDATE|DELETE\\s+FROM|FROM|JOIN|TRUNCATE(?:\\s+TABLE)?)\\s+"?${table}"?\\b`, "gi"),
  };
}

/** A scanner for the table: `mentions(text)` lists what a text says of it; `outside(owned)` what src/ says elsewhere. */
export function tableScan(kinds: TableMention[]) {
  const mentions = (text: string): string[] => kinds.flatMap(({ what, pattern }) => [...text.matchAll(pattern)].map((m) => `${what}: ${m[0]}`));
  /** Every .ts file under src/, as a path from the repository's root ("src/..."). */
  const files = readdirSync(join(root, "src"), { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts"))
    .map((path) => relative(root, join(root, "src", path)));
  return {
    mentions,
    /** The files that do not own the table, and every mention in them as "file: what: text". */
    outside(owned: (file: string) => boolean): { files: string[]; found: string[] } {
      const others = files.filter((file) => !owned(file));
      return { files: others, found: others.flatMap((file) => mentions(readSource(file)).map((m) => `${file}: ${m}`)) };
    },
  };
}

/** A source file's text, by its path from the repository's root or from src/ ("jobs/store.ts"). */
export function readSource(file: string): string {
  return readFileSync(join(root, file.startsWith("src/") ? file : join("src", file)), "utf8");
}
