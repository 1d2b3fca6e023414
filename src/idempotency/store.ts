import type { PrismaClient, Sql } from "../db/database.ts";
import type { KeyMode } from "../security/api-keys.ts";
import { groupCommit } from "../infra/group-commit.ts";
import type { SecretBox } from "../security/encryption.ts";

/** How long a key's record is kept and replayed (Stripe keeps them 24 h). */
export const IDEMPOTENCY_RETENTION_HOURS = 24;

export interface ClaimRequest {
  merchantId: number;
  mode: KeyMode;
  /** The caller the key belongs to, "key:<id>" or "user:<id>" (see principalScope in hooks.ts). */
  principal: string;
  key: string;
  fingerprint: string;
}

export type ClaimResult =
  /**
   * This request owns the key: execute it, then complete() or release(). `recoveryPoint` is set when it
   * took over the key of an attempt that died after committing what it created (see scope.ts).
   */
  | { outcome: "claimed"; id: bigint; recoveryPoint: string | null }
  | { outcome: "replay"; status: number; body: string; contentType: string | null }
  | { outcome: "in_flight" }
  | { outcome: "mismatch" };

export interface StoredResponse {
  status: number;
  body: string;
  contentType: string | null;
}

/**
 * Idempotency records in the database, so they hold across instances and restarts. An in-flight claim
 * is a lease (`leaseMs`, longer than any request runs): a retry after it has lapsed (the instance
 * holding it crashed) takes the key over instead of being refused for the record's whole 24 h.
 *
 * Response bodies are sealed with `secrets` (AES-256-GCM, the key that protects channel credentials): a
 * keyed createApiKey or webhook create/rotate answer holds a secret that must not sit in plaintext for 24 h.
 * All bodies are sealed rather than those a detector recognises, so a new kind of secret cannot slip past.
 */
// Claims and completions go in batches (src/infra/group-commit.ts): the keyed writes arriving while one batch is in
// flight share the next statement. Rows are inserted in key order, so two instances' batches meet them in one order.
const CLAIM = `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(merchant_id int, mode text, principal text, key text, fingerprint text))
   INSERT INTO idempotency_keys (merchant_id, mode, principal, key, request_fingerprint, status, created_at, expires_at, locked_until)
   SELECT merchant_id, mode::"Mode", principal, key, fingerprint, 'in_flight', now(), now() + make_interval(hours => $2::int),
     now() + make_interval(secs => $3::double precision)
   FROM input ORDER BY merchant_id, mode, principal, key
   ON CONFLICT (merchant_id, mode, principal, key) DO UPDATE SET
     request_fingerprint = EXCLUDED.request_fingerprint, status = 'in_flight', response_status = NULL,
     response_body = NULL, response_content_type = NULL, created_at = EXCLUDED.created_at,
     expires_at = EXCLUDED.expires_at, locked_until = EXCLUDED.locked_until, recovery_point = NULL
   WHERE idempotency_keys.expires_at <= now()
   RETURNING id::text, merchant_id, mode::text, principal, key`;

const COMPLETE = `UPDATE idempotency_keys SET status = 'completed', response_status = r.status, response_body = r.body, response_content_type = r.content_type
   FROM jsonb_to_recordset($1::jsonb) AS r(id bigint, status int, body text, content_type text)
   WHERE idempotency_keys.id = r.id`;

/** At most this many keyed writes share one claim or completion statement. */
const BATCH_MAX = 200;

type KeyOf = Pick<ClaimRequest, "merchantId" | "mode" | "principal" | "key">;
const keyOf = (k: { merchant_id: number; mode: string; principal: string; key: string }) => JSON.stringify([k.merchant_id, k.mode, k.principal, k.key]);
const sameKey = (a: KeyOf, b: KeyOf) => a.merchantId === b.merchantId && a.mode === b.mode && a.principal === b.principal && a.key === b.key;

// A claim whose request committed nothing is forgotten; one with a recovery point stays, its lease ended, so the retry
// takes it over at once and answers with what was committed.
const RELEASE = `WITH forgotten AS (
     DELETE FROM idempotency_keys WHERE id = $1::bigint AND status = 'in_flight' AND recovery_point IS NULL RETURNING id)
   UPDATE idempotency_keys SET locked_until = now()
   WHERE id = $1::bigint AND status = 'in_flight' AND recovery_point IS NOT NULL`;

export function createIdempotencyStore(prisma: PrismaClient, sql: Sql, options: { leaseMs: number; secrets: SecretBox }) {
  const { leaseMs, secrets } = options;
  /** Each request's claim: the new record's id, or null when the key already has a live record. */
  const claimNew = groupCommit<ClaimRequest, bigint | null>(
    async (requests) => {
      const input = requests.map((r) => ({ merchant_id: r.merchantId, mode: r.mode, principal: r.principal, key: r.key, fingerprint: r.fingerprint }));
      const rows = await sql.query<{ id: string; merchant_id: number; mode: string; principal: string; key: string }>(CLAIM, [
        JSON.stringify(input),
        IDEMPOTENCY_RETENTION_HOURS,
        leaseMs / 1000,
      ]);
      const claimed = new Map(rows.map((row) => [keyOf(row), BigInt(row.id)]));
      return input.map((r) => claimed.get(keyOf(r)) ?? null);
    },
    { max: BATCH_MAX, conflicts: sameKey },
  );
  const store = groupCommit<{ id: bigint; response: StoredResponse }, void>(
    async (completions) => {
      const input = completions.map(({ id, response }) => ({ id: id.toString(), status: response.status, body: secrets.encrypt(response.body), content_type: response.contentType }));
      // Planned each time: a plan cached while the table was small would match the batch by scanning all of it.
      await sql.query(COMPLETE, [JSON.stringify(input)], { planEachTime: true });
      return completions.map(() => undefined);
    },
    { max: BATCH_MAX },
  );
  return {
    /**
     * One atomic statement claims a key that is new or whose record has expired; the unique index on
     * (merchant, mode, principal, key) makes concurrent claims, on any instance, race for the same row. Times come
     * from the database's clock, so instances with skewed clocks agree. The claim, completion and release are plain
     * SQL (src/db/sql.ts): they run on every keyed write.
     */
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      const { merchantId, mode, principal, key, fingerprint } = request;
      // A record released between our failed claim and our read is simply claimed on the next turn.
      for (let attempt = 0; attempt < 3; attempt++) {
        const claimed = await claimNew(request);
        if (claimed !== null) return { outcome: "claimed", id: claimed, recoveryPoint: null };

        const existing = await prisma.idempotencyKey.findUnique({ where: { merchantId_mode_principal_key: { merchantId, mode, principal, key } } });
        if (!existing) continue;
        if (existing.requestFingerprint !== fingerprint) return { outcome: "mismatch" };
        if (existing.status === "in_flight") {
          // The same request again: take the key over if its holder's lease lapsed; only one retry wins.
          const takenOver = await prisma.$queryRaw<{ id: bigint; recovery_point: string | null }[]>`
            UPDATE idempotency_keys SET locked_until = now() + make_interval(secs => ${leaseMs / 1000}::double precision)
            WHERE id = ${existing.id} AND status = 'in_flight' AND (locked_until IS NULL OR locked_until <= now())
            RETURNING id, recovery_point`;
          if (takenOver[0]) return { outcome: "claimed", id: takenOver[0].id, recoveryPoint: takenOver[0].recovery_point };
          return { outcome: "in_flight" };
        }
        return {
          outcome: "replay",
          status: existing.responseStatus ?? 500,
          body: existing.responseBody ? secrets.decrypt(existing.responseBody) : "",
          contentType: existing.responseContentType,
        };
      }
      return { outcome: "in_flight" };
    },

    async complete(id: bigint, response: StoredResponse): Promise<void> {
      await store({ id, response });
    },

    /**
     * Gives the key back when the answer is not to be replayed (a refusal before execution, a 429, the database's 503): a corrected
     * retry with the same key runs, and one after an outage recovers what was committed (the record stays for that).
     */
    async release(id: bigint): Promise<void> {
      await sql.query(RELEASE, [id.toString()]);
    },
  };
}

export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
