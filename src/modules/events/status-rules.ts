/**
 * Which status changes a money object (transaction, payout) may make: pending -> completed | failed, and
 * completed and failed never change. Pure, so test/unit/status-rules.test.ts checks every pair; the
 * conditional updates that apply a change (transactions/status.ts in one SQL statement, payouts in
 * status-change.ts) take their WHERE from guardStatus(), so the rule tested is the rule that runs.
 */
export const STATUSES = ["pending", "completed", "failed"] as const;
export type Status = (typeof STATUSES)[number];
export type TerminalStatus = "completed" | "failed";
/** The money objects that have a status: each has its table's part in the status machine. */
export type MoneySubject = "transaction" | "payout" | "refund";

const NEXT: { readonly [S in Status]: readonly Status[] } = {
  pending: ["completed", "failed"],
  completed: [],
  failed: [],
};

export function canTransition(from: Status, to: Status): boolean {
  return NEXT[from].includes(to);
}

export function isTerminal(status: Status): boolean {
  return NEXT[status].length === 0;
}

/**
 * The one status a row must still have for a change to `to` to apply: the guard of the conditional UPDATE
 * (it must be exactly one, or a single `status = ...` could not express it). Throws for a status nothing
 * leads to (pending: rows are created pending, never changed back).
 */
export function guardStatus(to: Status): Status {
  const from = STATUSES.filter((status) => canTransition(status, to));
  if (from.length !== 1) throw new Error(`no single status may change to ${to} (from: ${from.join(", ") || "none"})`);
  return from[0]!;
}

/**
 * An attempt (one provider call that may move a payer's money: a card charge, an STK push) is pending until the
 * provider's verdict settles it: pending -> succeeded | failed, once. One exception: a provider's late success
 * overrides the gateway's own verdict that the push expired (failed), since the payer's money did move.
 */
export const ATTEMPT_STATUSES = ["pending", "succeeded", "failed"] as const;
export type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];
export type SettledAttemptStatus = Exclude<AttemptStatus, "pending">;

const ATTEMPT_NEXT: { readonly [S in AttemptStatus]: readonly AttemptStatus[] } = {
  pending: ["succeeded", "failed"],
  succeeded: [],
  failed: ["succeeded"],
};

export function canSettleAttempt(from: AttemptStatus, to: AttemptStatus): boolean {
  return ATTEMPT_NEXT[from].includes(to);
}

/** The statuses an attempt may still have for a verdict `to` to apply: the guard of the attempt store's conditional UPDATE. */
export function attemptGuard(to: SettledAttemptStatus): AttemptStatus[] {
  return ATTEMPT_STATUSES.filter((status) => canSettleAttempt(status, to));
}
