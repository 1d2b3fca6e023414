import { describe, expect, it } from "vitest";
import { enqueueCte, enqueueFromColumnCte, enqueueFromParameterCte, jobsParameter } from "../../src/jobs/store.ts";
import { readSource, sqlNaming, tableScan } from "../support/table-owner.ts";

/**
 * The job runner owns the `jobs` table: every statement on it lives in src/jobs (store.ts), and features
 * go through enqueue/cancel/reschedule or the CTE fragments store.ts builds. A source scan keeps it so.
 */
/** SQL that names the table (quoted or not), and Prisma's `job` model delegate. */
const scan = tableScan([sqlNaming("jobs"), { what: "Prisma's job model", pattern: /\.job\s*\.|\[\s*["'`]job["'`]\s*\]/g }]);
const mentions = scan.mentions;

describe("the jobs table's owner", () => {
  const owned = (file: string) => file.startsWith("src/jobs/") || file.startsWith("src/db/generated/");

  it("no file outside src/jobs writes, reads or names the jobs table", () => {
    const { files, found } = scan.outside(owned);
    expect(files.length).toBeGreaterThan(50);
    expect(found).toEqual([]);
  });

  it("the scan sees the statements src/jobs holds (a scan that matches nothing would prove nothing)", () => {
    const found = mentions(readSource("jobs/store.ts")).join("\n");
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
    expect(enqueueCte("q", "k", { from: "follow", payload: { transactionId: "transaction_id" }, runAt: "follow_up_at" })).toContain(
      "INSERT INTO jobs (kind, payload, run_at) SELECT 'k', jsonb_build_object('transactionId', transaction_id), coalesce(follow_up_at, now()) FROM follow",
    );
    expect(() => enqueueCte("q", "k", { from: "follow", payload: {}, runAt: "now()" })).toThrow(/identifier/);
    expect(() => enqueueFromParameterCte("follow_up", "$0", "ev")).toThrow(/parameter/);
    expect(() => enqueueFromParameterCte("follow_up", "$3", "ev t")).toThrow(/identifier/);
    expect(enqueueFromColumnCte("follow_up", "applied_jobs", "jobs")).toContain("FROM applied_jobs src, jsonb_to_recordset(src.jobs)");
    expect(() => enqueueFromColumnCte("follow_up", "applied_jobs; DROP TABLE x", "jobs")).toThrow(/identifier/);
    expect(() => enqueueFromColumnCte("follow_up", "applied_jobs", "jobs)")).toThrow(/identifier/);
    const runAt = new Date("2026-01-02T03:04:05.678Z");
    expect(JSON.parse(jobsParameter([{ kind: "a", payload: { x: 1 } }, { kind: "b", payload: {}, runAt }]))).toEqual([
      { kind: "a", payload: { x: 1 }, run_at: null },
      { kind: "b", payload: {}, run_at: "2026-01-02T03:04:05.678Z" },
    ]);
  });
});
