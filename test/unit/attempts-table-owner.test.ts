import { describe, expect, it } from "vitest";
import { ATTEMPT_STATUSES, attemptGuard, canSettleAttempt, type AttemptStatus } from "../../src/modules/events/status-rules.ts";
import { readSource, sqlNaming, tableScan } from "../support/table-owner.ts";

/**
 * Issue 36: a payer's attempts (every provider call that may move a payer's money) are written and read by
 * src/modules/transactions/attempt-store.ts alone, and settle by the one status machine's attempt rule.
 */
const scan = tableScan([sqlNaming("transaction_attempts"), { what: "Prisma's transactionAttempt model", pattern: /\.transactionAttempt\s*\.|\[\s*["'`]transactionAttempt["'`]\s*\]/g }]);

describe("the transaction_attempts table's owner", () => {
  const owned = (file: string) => file === "src/modules/transactions/attempt-store.ts" || file.startsWith("src/db/generated/");

  it("no file but the attempt store writes or reads the attempts table", () => {
    const { files, found } = scan.outside(owned);
    expect(files.length).toBeGreaterThan(50);
    expect(found).toEqual([]);
  });

  it("the scan sees the statements the attempt store holds", () => {
    const found = scan.mentions(readSource("modules/transactions/attempt-store.ts")).join("\n");
    for (const statement of ["INSERT INTO transaction_attempts", "UPDATE transaction_attempts", "FROM transaction_attempts", ".transactionAttempt."]) {
      expect(found).toContain(statement);
    }
  });
});

describe("the attempt rule", () => {
  const ALLOWED: [AttemptStatus, AttemptStatus][] = [
    ["pending", "succeeded"],
    ["pending", "failed"],
    // A provider's late success overrides the gateway's own expiry of a push: the payer's money did move.
    ["failed", "succeeded"],
  ];
  const pairs = ATTEMPT_STATUSES.flatMap((from) => ATTEMPT_STATUSES.map((to) => [from, to] as [AttemptStatus, AttemptStatus]));

  it.each(pairs)("%s -> %s", (from, to) => {
    expect(canSettleAttempt(from, to)).toBe(ALLOWED.some(([f, t]) => f === from && t === to));
  });

  it("guards each verdict's conditional update with exactly the statuses it may follow", () => {
    expect(attemptGuard("succeeded")).toEqual(["pending", "failed"]);
    expect(attemptGuard("failed")).toEqual(["pending"]);
  });
});
