import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openReadReplicas } from "../../src/db/replicas.ts";
import { createLogger } from "../../src/logger.ts";
import type { TestDatabase } from "../support/backend.ts";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { startReplicatedPostgres, type ReplicatedPostgres } from "../support/replica.ts";
import { until } from "../support/wait.ts";

/**
 * Reads off the primary (DATABASE_READ_URL), against a real streaming replica the test makes (pg_basebackup -R):
 * lists, the CSV export, connections and the dashboard's figures come from the replica, verify from the primary;
 * a replica that lags past DATABASE_READ_MAX_LAG_MS or is down leaves rotation and the primary answers, counted
 * in /metrics; a replica that comes back is read from again.
 *
 * Replay is paused on the replica (pg_wal_replay_pause()) to make it lag on purpose: a row written then is on the
 * primary only, so where a read was served shows in its answer.
 */

let cluster: ReplicatedPostgres;
let database: TestDatabase;
/** Lag limit a minute: the paused replica stays in rotation, so what it lacks shows. */
let patient: TestGateway;
/** Lag limit 300 ms: the same pause takes the replica out of rotation within a second or so. */
let strict: TestGateway;
let merchant: { testKey: string };

beforeAll(async () => {
  cluster = await startReplicatedPostgres();
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-replica-test-"));
  const encryptionKeyHex = randomBytes(32).toString("hex");
  database = {
    databaseUrl: cluster.primaryUrl,
    dataDir,
    encryptionKeyHex,
    env: { DATABASE_URL: cluster.primaryUrl, ENCRYPTION_KEY: encryptionKeyHex, DATA_DIR: dataDir },
    drop: async () => rmSync(dataDir, { recursive: true, force: true }),
  };
  // The first start migrates the primary; the tables reach the replica by streaming.
  patient = await startTestGateway({ database, env: { DATABASE_READ_URL: cluster.replicaUrl, DATABASE_READ_MAX_LAG_MS: "60000" } });
  strict = await startTestGateway({ database, env: { DATABASE_READ_URL: cluster.replicaUrl, DATABASE_READ_MAX_LAG_MS: "300" } });
  merchant = await createSandboxMerchant(patient);
});

afterAll(async () => {
  await strict?.close();
  await patient?.close();
  await cluster?.stop();
  await database?.drop();
});

/** The gateway's /metrics samples whose name and labels start with `series` (e.g. `gateway_db_replica_state{`), summed. */
async function metric(gw: TestGateway, series: string): Promise<number> {
  const text = (await apiClient(gw.url).get("/metrics")).text;
  return text
    .split("\n")
    .filter((line) => line.startsWith(series))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
}
const replicaState = (gw: TestGateway, state: string) => metric(gw, `gateway_db_replica_state{replica="127.0.0.1:${new URL(cluster.replicaUrl).port}",state="${state}"}`);
const fallbacks = (gw: TestGateway) => metric(gw, "gateway_db_read_fallbacks_total{");
const replicaReads = (gw: TestGateway) => metric(gw, "gateway_db_replica_reads_total{");

const listed = async (gw: TestGateway) => {
  const list = await apiClient(gw.url, merchant.testKey).get("/api/transactions/list?limit=100");
  expect(list.status).toBe(200);
  return (list.body.data as { reference: string }[]).map((t) => t.reference);
};

/** Until the replica has replayed the payment up to its completion (read on the replica itself). */
const replicated = (reference: string) =>
  until(
    () => cluster.onReplica<{ n: number }>("SELECT count(*)::int AS n FROM transactions WHERE reference = $1 AND status = 'completed'", [reference]),
    (rows) => rows[0]!.n === 1,
  );

async function paused<T>(work: () => Promise<T>): Promise<T> {
  await cluster.onReplica("SELECT pg_wal_replay_pause()");
  try {
    return await work();
  } finally {
    await cluster.onReplica("SELECT pg_wal_replay_resume()");
  }
}

describe("reads off the primary", () => {
  it("serves lists (payments, balance transactions, customers), the CSV export, connections and stats from the replica, and verify from the primary", async () => {
    const api = apiClient(patient.url, merchant.testKey);
    // Just after start the replica may still be replaying the migrations (its lag unknown until it reaches a position checked).
    await until(() => replicaState(patient, "ok"), (ok) => ok === 1, 30_000);
    const before = await paidTransaction(patient.url, merchant.testKey, { amount: 1500, email: "before@example.com" });
    await replicated(before);
    const readsBefore = await replicaReads(patient);

    await paused(async () => {
      const during = await paidTransaction(patient.url, merchant.testKey, { amount: 2500, email: "during@example.com" });
      // Verify reads its own writes: the primary has the payment, completed.
      const verify = await api.get(`/api/transactions/verify/${during}`);
      expect(verify.status).toBe(200);
      expect(verify.body.transaction).toMatchObject({ reference: during, status: "completed" });

      // Every reader below answers from the paused replica: the earlier payment, not this one.
      expect(await listed(patient)).toContain(before);
      expect(await listed(patient)).not.toContain(during);
      const csv = await api.get("/v1/reports/transactions.csv");
      expect(csv.status).toBe(200);
      expect(csv.text).toContain(before);
      expect(csv.text).not.toContain(during);
      const connection = await api.post("/graphql", { query: "{ transactions(first: 50) { totalCount edges { node { reference } } } }" });
      const references = connection.body.data.transactions.edges.map((e: { node: { reference: string } }) => e.node.reference);
      expect(references).toContain(before);
      expect(references).not.toContain(during);
      const ledger = await api.get("/v1/balance/transactions?limit=100");
      const sources = ledger.body.data.map((e: { source_reference: string }) => e.source_reference);
      expect(sources).toContain(before);
      expect(sources).not.toContain(during);
      const customers = await api.get("/api/customers/list?limit=100");
      expect(JSON.stringify(customers.body)).toContain("before@example.com");
      expect(JSON.stringify(customers.body)).not.toContain("during@example.com");
      const stats = await api.post("/graphql", { query: "{ paymentStats(days: 1, periods: [1]) { ... on PaymentStats { periods { completedCount } } } }" });
      expect(stats.body.data.paymentStats.periods[0].completedCount).toBe(1);
      expect(await replicaReads(patient)).toBeGreaterThan(readsBefore);
      expect(await fallbacks(patient)).toBe(0);
    });

    // Replay resumed: the replica catches up and lists show the payment.
    await until(() => listed(patient), (refs) => refs.length === 2);
  });

  it("takes a replica that lags past the limit out of rotation: lists come from the primary, counted", async () => {
    await until(() => replicaState(strict, "ok"), (ok) => ok === 1);
    const fallbacksBefore = await fallbacks(strict);
    await paused(async () => {
      const during = await paidTransaction(strict.url, merchant.testKey, { amount: 3500, email: "lagging@example.com" });
      // Within a check or two the replica is found 300 ms behind and leaves rotation.
      await until(() => replicaState(strict, "lagging"), (lagging) => lagging === 1);
      expect(await listed(strict)).toContain(during);
      expect(await fallbacks(strict)).toBeGreaterThan(fallbacksBefore);
      expect(await metric(strict, "gateway_db_replica_lag_seconds{")).toBeGreaterThan(0.3);
    });
    // Caught up again, it is back in rotation.
    await until(() => replicaState(strict, "ok"), (ok) => ok === 1);
  });

  it("answers lists from the primary while the replica is down, and reads from it again once it is back", async () => {
    const newest = await paidTransaction(patient.url, merchant.testKey, { amount: 4500, email: "down@example.com" });
    await replicated(newest);
    const fallbacksBefore = await fallbacks(patient);

    await cluster.stopReplica();
    // The replica's connections are cut: the first read fails over to the primary, none fails the client.
    for (let i = 0; i < 3; i++) expect(await listed(patient)).toContain(newest);
    expect(await fallbacks(patient)).toBeGreaterThanOrEqual(fallbacksBefore + 3);
    await until(() => replicaState(patient, "down"), (down) => down === 1);
    const csv = await apiClient(patient.url, merchant.testKey).get("/v1/reports/transactions.csv");
    expect(csv.status).toBe(200);
    expect(csv.text).toContain(newest);

    await cluster.startReplica();
    await until(() => replicaState(patient, "ok"), (ok) => ok === 1);
    const readsBefore = await replicaReads(patient);
    const fallbacksAfter = await fallbacks(patient);
    expect(await listed(patient)).toContain(newest);
    expect(await replicaReads(patient)).toBeGreaterThan(readsBefore);
    expect(await fallbacks(patient)).toBe(fallbacksAfter);
  });

  it("retries a read the replica failed once on the primary; a statement's own error, or a write, is not retried", async () => {
    const primary = new pg.Pool({ connectionString: cluster.primaryUrl, max: 2 });
    // Checked once, at open: what follows is the router's doing, not a check's.
    const replicas = await openReadReplicas(primary, { urls: [cluster.replicaUrl], maxLagMs: 60_000, poolSize: 2, checkEveryMs: 3_600_000 }, createLogger("silent"));
    const onStandby = async () => (await replicas.pool.query<{ standby: boolean }>("SELECT pg_is_in_recovery() AS standby")).rows[0]!.standby;
    try {
      expect(await onStandby()).toBe(true);
      // Transactions (a client of their own) are the primary's.
      const client = await replicas.pool.connect();
      expect((await client.query("SELECT pg_is_in_recovery() AS standby")).rows[0].standby).toBe(false);
      client.release();
      await expect(replicas.pool.query("SELECT 1/0")).rejects.toMatchObject({ code: "22012" });
      await expect(replicas.pool.query("CREATE TABLE not_here (a int)")).rejects.toMatchObject({ code: "25006" });
      expect(replicas.stats().fallbacks).toEqual({ noReplica: 0, replicaFailed: 0 });

      await cluster.stopReplica();
      try {
        expect(await onStandby()).toBe(false);
        expect(replicas.stats()).toMatchObject({ fallbacks: { noReplica: 0, replicaFailed: 1 }, replicas: [{ state: "down", lagMs: null }] });
        expect(await onStandby()).toBe(false);
        expect(replicas.stats().fallbacks).toEqual({ noReplica: 1, replicaFailed: 1 });
      } finally {
        await cluster.startReplica();
      }
    } finally {
      await replicas.close();
      await primary.end();
    }
  });
});
