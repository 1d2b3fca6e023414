import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "../../src/db/database.ts";
import { createIdempotencyStore, type ClaimRequest } from "../../src/idempotency/store.ts";
import { createLogger } from "../../src/logger.ts";
import { SecretBox } from "../../src/security/encryption.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { until } from "../support/wait.ts";

/**
 * The Idempotency-Key store's claims and stored responses go in batches (src/infra/group-commit.ts): keyed writes
 * arriving together share one statement. Here, on PostgreSQL with one pooled connection (so every statement meets the
 * same session and its prepared plans): concurrent claims of distinct keys are each claimed once, in fewer statements
 * than claims; the same key twice at once is claimed once; every stored response replays as sent. And the batch that
 * stores responses matches its rows through the primary key however the table grew after its first runs: planned
 * for its parameters each time, not with a plan cached when the table held a handful of rows (which read the whole
 * table on every batch, 1.2 ms of PostgreSQL's CPU per keyed write at a few hundred thousand keys).
 */
let database: TestDatabase;
let db: Database;
let admin: pg.Client;
const statements: string[] = [];
const secrets = new SecretBox(randomBytes(32));
let store: ReturnType<typeof createIdempotencyStore>;

beforeAll(async () => {
  database = await createTestDatabase();
  db = await openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir }, createLogger("silent"), {
    poolSize: 1,
    onStatement: (text) => statements.push(text),
  });
  store = createIdempotencyStore(db.prisma, db.sql, { leaseMs: 60_000, secrets });
  admin = new pg.Client({ connectionString: database.databaseUrl });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await db?.close();
  await database?.drop();
});

const request = (key: string, fingerprint = "f".repeat(64)): ClaimRequest => ({ merchantId: 7, mode: "test", principal: "key:1", key, fingerprint });
const claimStatements = () => statements.filter((s) => s.includes("INSERT INTO idempotency_keys")).length;
const completeStatements = () => statements.filter((s) => s.includes("SET status = 'completed'")).length;

/** The table's counters, once the store's session has reported its own (it does so on going idle, forced here). */
async function tableStats() {
  await db.sql.query("SELECT pg_stat_force_next_flush()");
  const { rows } = await admin.query<{ seq_tup_read: string; n_tup_upd: string }>(
    "SELECT seq_tup_read, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'idempotency_keys'",
  );
  return { seqRead: Number(rows[0]!.seq_tup_read), updated: Number(rows[0]!.n_tup_upd) };
}

describe("Idempotency-Key claims and stored responses in batches", () => {
  it("claims each of many concurrent keys once in fewer statements, the same key twice at once once, and replays each stored response", async () => {
    const claimsBefore = claimStatements();
    const keys = Array.from({ length: 40 }, (_, i) => `batch-${i}`);
    const claims = await Promise.all([...keys.map((key) => store.claim(request(key))), store.claim(request("batch-0"))]);
    const claimed = claims.filter((c) => c.outcome === "claimed");
    expect(claimed).toHaveLength(40);
    expect(claims.filter((c) => c.outcome === "in_flight")).toHaveLength(1);
    expect(new Set(claimed.map((c) => (c.outcome === "claimed" ? c.id : null))).size).toBe(40);
    expect(claimStatements() - claimsBefore).toBeGreaterThan(1);
    expect(claimStatements() - claimsBefore).toBeLessThan(41);

    const completesBefore = completeStatements();
    await Promise.all(
      claims.slice(0, 40).map((c, i) => (c.outcome === "claimed" ? store.complete(c.id, { status: 200 + (i % 3), body: `{"n":${i}}`, contentType: "application/json" }) : null)),
    );
    expect(completeStatements() - completesBefore).toBeLessThan(40);
    const replays = await Promise.all(keys.map((key) => store.claim(request(key))));
    expect(replays).toEqual(keys.map((_, i) => ({ outcome: "replay", status: 200 + (i % 3), body: `{"n":${i}}`, contentType: "application/json" })));
    // Same key, another request: refused, in a batch of its own or not.
    expect(await Promise.all([store.claim(request("batch-1", "0".repeat(64))), store.claim(request("batch-2", "0".repeat(64)))])).toEqual([
      { outcome: "mismatch" },
      { outcome: "mismatch" },
    ]);
    // The sealed bodies are not stored in plaintext.
    const { rows } = await admin.query<{ response_body: string }>("SELECT response_body FROM idempotency_keys WHERE key = 'batch-5'");
    expect(rows[0]!.response_body).not.toContain('"n":5');
  });

  it("stores a response through the primary key after the table grew from a handful of rows, not by reading the table", async () => {
    // Runs on a nearly empty table first (a cached plan would be made now), one connection so all meet one session.
    await admin.query("ALTER TABLE idempotency_keys SET (autovacuum_enabled = false)");
    await admin.query("DELETE FROM idempotency_keys");
    await admin.query("ANALYZE idempotency_keys");
    for (let i = 0; i < 10; i++) {
      const claim = await store.claim(request(`small-${i}`));
      if (claim.outcome !== "claimed") throw new Error(claim.outcome);
      await store.complete(claim.id, { status: 200, body: "{}", contentType: null });
    }
    await admin.query(
      `INSERT INTO idempotency_keys (merchant_id, mode, principal, key, request_fingerprint, status, expires_at)
       SELECT 8, 'test', 'key:2', 'grown-' || i, 'f', 'completed', now() + interval '1 day' FROM generate_series(1, 100000) i`,
    );
    const before = await until(tableStats, (s) => s.updated >= 10);
    const claim = await store.claim(request("after-growth"));
    if (claim.outcome !== "claimed") throw new Error(claim.outcome);
    await store.complete(claim.id, { status: 201, body: "{}", contentType: null });
    const after = await until(tableStats, (s) => s.updated > before.updated);
    expect(after.seqRead - before.seqRead).toBeLessThan(1000);
    expect(await store.claim(request("after-growth"))).toMatchObject({ outcome: "replay", status: 201 });
    await admin.query("ALTER TABLE idempotency_keys RESET (autovacuum_enabled)");
  });
});
