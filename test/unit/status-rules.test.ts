import { describe, expect, it } from "vitest";
import { canTransition, guardStatus, isTerminal, STATUSES, type Status } from "../../src/modules/events/status-rules.ts";

/**
 * The status machine of transactions and payouts, every pair of statuses. guardStatus() is the WHERE of
 * the one conditional update (events/status-machine.ts), so these are the rules the database applies;
 * test/integration/state-machine.test.ts races them.
 */
const ALLOWED: [Status, Status][] = [
  ["pending", "completed"],
  ["pending", "failed"],
];

const allPairs = STATUSES.flatMap((from) => STATUSES.map((to) => [from, to] as [Status, Status]));
const refused = allPairs.filter(([from, to]) => !ALLOWED.some(([f, t]) => f === from && t === to));

describe("status machine", () => {
  it("knows exactly the three statuses the database enum has", () => {
    expect([...STATUSES]).toEqual(["pending", "completed", "failed"]);
  });

  it.each(ALLOWED)("allows %s -> %s", (from, to) => {
    expect(canTransition(from, to)).toBe(true);
  });

  it("refuses the other 7 of the 9 pairs", () => {
    expect(refused).toHaveLength(7);
  });

  it.each(refused)("refuses %s -> %s", (from, to) => {
    expect(canTransition(from, to)).toBe(false);
  });

  it.each(STATUSES)("refuses %s -> itself (a repeated callback changes nothing)", (status) => {
    expect(canTransition(status, status)).toBe(false);
  });

  it.each(["completed", "failed"] as const)("%s is terminal: nothing leaves it", (status) => {
    expect(isTerminal(status)).toBe(true);
    for (const to of STATUSES) expect(canTransition(status, to)).toBe(false);
  });

  it("pending is not terminal, and nothing leads back to it", () => {
    expect(isTerminal("pending")).toBe(false);
    for (const from of STATUSES) expect(canTransition(from, "pending")).toBe(false);
  });

  it.each(["completed", "failed"] as const)("a change to %s applies only to a row still pending (the UPDATE's guard)", (to) => {
    expect(guardStatus(to)).toBe("pending");
  });

  it("has no guard for a change to pending: rows are created pending, never changed back", () => {
    expect(() => guardStatus("pending")).toThrow(/pending/);
  });
});
