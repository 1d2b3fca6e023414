import type { Prisma } from "../db/generated/prisma/client.ts";

/**
 * Recovery points (Brandur Leach's "Implementing Stripe-like Idempotency Keys in Postgres"): the request
 * that holds an Idempotency-Key carries its claim on its principal, and whatever it creates writes
 * "<kind>:<id>" onto the key's record in the same database transaction as the object itself. When that
 * request dies before its response is stored, the retry that takes the key over finds the point and
 * returns the committed object instead of creating a second one.
 *
 * Carried on the principal (src/auth.ts), which every service call already takes, rather than in
 * AsyncLocalStorage: from its first use, such a store makes Node 20 hook every promise of every request
 * (about 8 % of verify's throughput, bench/README.md).
 */
export interface IdempotencyScope {
  claimId: bigint;
  /** What an earlier, interrupted attempt with this key already created, e.g. "transaction:12". */
  recoveryPoint: string | null;
}

/** A caller (a Principal) and, when its request holds an Idempotency-Key, that key's claim. */
export interface MaybeKeyed {
  idempotency?: IdempotencyScope | undefined;
}

export type RecoverableKind = "transaction" | "payout" | "refund" | "adjustment" | "payment_link";

/** Whether the caller's request holds an Idempotency-Key (its writes carry a recovery point). */
export function inIdempotencyScope(caller: MaybeKeyed): boolean {
  return caller.idempotency !== undefined;
}

/** The id of the `kind` object an interrupted earlier attempt of this keyed request committed, if any. */
export function recoveredObjectId(caller: MaybeKeyed, kind: RecoverableKind): number | null {
  const point = caller.idempotency?.recoveryPoint;
  if (!point?.startsWith(`${kind}:`)) return null;
  const id = Number(point.slice(kind.length + 1));
  return Number.isSafeInteger(id) ? id : null;
}

/**
 * The object an interrupted earlier attempt of this keyed request committed (looked up with `find`, which
 * scopes it to the caller), or null: the request then creates it. What keeps a retry from sending twice.
 */
export async function recoveredObject<T>(caller: MaybeKeyed, kind: RecoverableKind, find: (id: number) => Promise<T | null>): Promise<T | null> {
  const id = recoveredObjectId(caller, kind);
  return id === null ? null : find(id);
}

/** Writes the recovery point in the caller's database transaction; a no-op for a request without a key. */
export async function recordRecoveryPoint(tx: Prisma.TransactionClient, caller: MaybeKeyed, kind: RecoverableKind, id: number): Promise<void> {
  const scope = caller.idempotency;
  if (!scope) return;
  await tx.idempotencyKey.updateMany({ where: { id: scope.claimId }, data: { recoveryPoint: `${kind}:${id}` } });
}
