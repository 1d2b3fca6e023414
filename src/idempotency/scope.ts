import { AsyncLocalStorage } from "node:async_hooks";
import type { Prisma } from "../db/generated/prisma/client.ts";

/**
 * Recovery points (Brandur Leach's "Implementing Stripe-like Idempotency Keys in Postgres"): the request
 * that holds an Idempotency-Key runs inside this scope, and whatever it creates writes
 * "<kind>:<id>" onto the key's record in the same database transaction as the object itself. When that
 * request dies before its response is stored, the retry that takes the key over finds the point and
 * returns the committed object instead of creating a second one.
 *
 * Carried in AsyncLocalStorage so services need no knowledge of HTTP: the transports open the scope
 * around the work, the payments core reads it where it creates rows.
 */
export interface IdempotencyScope {
  claimId: bigint;
  /** What an earlier, interrupted attempt with this key already created, e.g. "transaction:12". */
  recoveryPoint: string | null;
}

export type RecoverableKind = "transaction" | "payout" | "refund" | "adjustment" | "payment_link";

const storage = new AsyncLocalStorage<IdempotencyScope>();

export function runInIdempotencyScope<T>(scope: IdempotencyScope | undefined, work: () => T): T {
  return scope ? storage.run(scope, work) : work();
}

/** Whether the current work runs for a request holding an Idempotency-Key (its writes carry a recovery point). */
export function inIdempotencyScope(): boolean {
  return storage.getStore() !== undefined;
}

/** The id of the `kind` object an interrupted earlier attempt of this keyed request committed, if any. */
export function recoveredObjectId(kind: RecoverableKind): number | null {
  const point = storage.getStore()?.recoveryPoint;
  if (!point?.startsWith(`${kind}:`)) return null;
  const id = Number(point.slice(kind.length + 1));
  return Number.isSafeInteger(id) ? id : null;
}

/**
 * The object an interrupted earlier attempt of this keyed request committed (looked up with `find`, which
 * scopes it to the caller), or null: the request then creates it. What keeps a retry from sending twice.
 */
export async function recoveredObject<T>(kind: RecoverableKind, find: (id: number) => Promise<T | null>): Promise<T | null> {
  const id = recoveredObjectId(kind);
  return id === null ? null : find(id);
}

/** Writes the recovery point in the caller's database transaction; a no-op outside a keyed request. */
export async function recordRecoveryPoint(tx: Prisma.TransactionClient, kind: RecoverableKind, id: number): Promise<void> {
  const scope = storage.getStore();
  if (!scope) return;
  await tx.idempotencyKey.updateMany({ where: { id: scope.claimId }, data: { recoveryPoint: `${kind}:${id}` } });
}
