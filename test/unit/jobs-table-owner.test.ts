import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { enqueueCte, enqueueFromParameterCte, jobsParameter } from "../../src/jobs/store.ts";

/**
 * The job runner owns the `jobs` table: every statement on it lives in src/jobs (store.ts), and features
 * go through enqueue/cancel/reschedule or the CTE fragments store.ts builds. A source scan keeps it so.
 */
const root = new URL("../..", import.meta.url).pathname;
const src = join(root, "src");

function typescriptFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return typescriptFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** SQL that names the table (quoted or not), and Prisma's `job` model delegate. */
const MENTIONS = [
  { what: "SQL naming the jobs table", pattern: /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|FROM|JOIN|TRUNCATE(?:\s+TABLE)?)\s+"?jobs"?\b/gi },
  { what: "Prisma's job model", pattern: /\.job\s*\.|\[\s*["'`]job["'`]\s*\]/g },
];

function mentions(text: string): string[] {
  return MENTIONS.flatMap(({ what, pattern }) => [...text.matchAll(pattern)].map((m) => `${what}: ${m[0]}`));
}

describe("the jobs table's owner", () => {
  const files = typescriptFiles(src).map((path) => relative(root, path));
  const owned = (file: string) => file.startsWith("src/jobs/") || file.startsWith("src/db/generated/");

  it("no file outside src/jobs writes, reads or names the jobs table", () => {
    const outside = files.filter((file) => !owned(file));
    expect(outside.length).toBeGreaterThan(50);
    const found = outside.flatMap((file) => mentions(readFileSync(join(root, file), "utf8")).map((m) => `${file}: ${m}`));
    expect(found).toEqual([]);
  });

  it("the scan sees the statements src/jobs holds (a scan that matches nothing would prove nothing)", () => {
    const store = readFileSync(join(src, "jobs/store.ts"), "utf8");
    const found = mentions(store).join("\n");
    for (const statement of ["INSERT INTO jobs", "UPDATE jobs", "DELETE FROM jobs", "FROM jobs", ".job."]) expect(found).toContain(statement);
    expect(mentions(`await tx["job"].create({})`)).toHaveLength(1);
    expect(mentions(`DELETE FROM "jobs" WHERE id = 1`)).toHaveLength(1);
  });

  it("the CTE fragments take names, kinds and payload fields, never SQL text", () => {
    expect(enqueueCte("delivery_jobs", "webhook.deliver", { from: "deliveries", payload: { deliveryId: "id" } })).toContain(
      "SELECT 'webhook.deliver', jsonb_build_object('deliveryId', id) FROM deliveries",
    );
    expect(() => enqueueCte("q", "webhook.deliver", { from: "deliveries; DROP TABLE x", payload: {} })).toThrow(/identifier/);
    expect(() => enqueueCte("q", "it's", { from: "deliveries", payload: {} })).toThrow(/kind/);
    expect(() => enqueueCte("q", "k", { from: "deliveries", payload: { "a'": "id" } })).toThrow(/payload field/);
    expect(() => enqueueCte("q", "k", { from: "deliveries", payload: { a: "id)" } })).toThrow(/identifier/);
    expect(() => enqueueFromParameterCte("follow_up", "$0", "ev")).toThrow(/parameter/);
    expect(() => enqueueFromParameterCte("follow_up", "$3", "ev t")).toThrow(/identifier/);
    const runAt = new Date("2026-01-02T03:04:05.678Z");
    expect(JSON.parse(jobsParameter([{ kind: "a", payload: { x: 1 } }, { kind: "b", payload: {}, runAt }]))).toEqual([
      { kind: "a", payload: { x: 1 }, run_at: null },
      { kind: "b", payload: {}, run_at: "2026-01-02T03:04:05.678Z" },
    ]);
  });
});
