import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, paidTransaction } from "../support/gateway.ts";
import { startArchivedPostgres, STANZA, type ArchivedPostgres } from "../support/pgbackrest.ts";
import { printedTestKey, runCli, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { until } from "../support/wait.ts";

/**
 * The point-in-time restore drill (issue 43): PostgreSQL 15 archiving its WAL to pgBackRest
 * (deploy/pgbackrest/pgbackrest.conf), a gateway process taking payments, refunds and payouts; a full backup; more
 * money movements; the time T; one more payment and then a destructive mistake (the transactions table dropped);
 * `backup status` and /metrics say how recent the backup and the archived WAL are; the server is lost; pgBackRest
 * restores to T into a fresh data directory; a gateway starts on it: every payment, refund and payout acknowledged
 * before T is there with its ledger entries, nothing after T is, and `ledger check` is clean.
 */
const PAID_PHONE = "254708374149";

interface MoneySnapshot {
  transactions: string[];
  refunds: string[];
  payouts: string[];
  entries: string[];
}

describe("point-in-time restore with pgBackRest", () => {
  let archived: ArchivedPostgres;
  let dataDir: string;
  let env: Record<string, string>;
  let gateway: StartedGatewayProcess | undefined;
  let apiKey: string;
  let channelId: number;

  const startGateway = async () => (gateway = await startGatewayProcess({ ...env, DATABASE_URL: archived.url, ...archived.env }));
  const query = async <T extends pg.QueryResultRow>(text: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: archived.url });
    await client.connect();
    try {
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "restore-drill-"));
    archived = await startArchivedPostgres();
    env = {
      ENCRYPTION_KEY: randomBytes(32).toString("hex"),
      DATA_DIR: dataDir,
      RATE_LIMIT_ENABLED: "false",
      JOB_POLL_INTERVAL_MS: "200",
      SANDBOX_REFUND_DELAY_MS: "50",
      SANDBOX_STK_DELAY_MS: "50",
      PGBACKREST_STANZA: STANZA,
    };
    await startGateway();
    apiKey = await printedTestKey(gateway!);
    const channel = await apiClient(gateway!.url, apiKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    expect(channel.status, channel.text).toBe(201);
    channelId = channel.body.channel.id;
  });

  afterAll(async () => {
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill("SIGKILL");
    await gateway?.exited;
    await archived?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  /** Money moving as merchants move it: card payments, a refund of one of them and a payout, each until settled. */
  async function moveMoney(round: string) {
    const api = apiClient(gateway!.url, apiKey);
    const paid = await Promise.all([1_000, 2_550, 4_000].map((amount) => paidTransaction(gateway!.url, apiKey, { amount, email: `${round}@restore.test`, payment_channel_id: channelId })));
    const refund = await api.post("/v1/refunds", { transaction: paid[0], amount: 500 });
    expect(refund.status, refund.text).toBe(201);
    const payout = await api.post("/v1/payouts", { amount: 1_000, phone_number: PAID_PHONE, payment_channel_id: channelId, description: round });
    expect(payout.status, payout.text).toBe(201);
    await until(() => api.get(`/v1/refunds/${refund.body.data.id}`), (r) => r.body.data.status === "completed");
    await until(() => api.get(`/v1/payouts/${payout.body.data.id}`), (r) => r.body.data.status === "completed");
    return paid;
  }

  /** Every money row and ledger entry, as comparable lines. */
  async function snapshot(): Promise<MoneySnapshot> {
    const lines = async (sql: string) => (await query<{ line: string }>(sql)).map((r) => r.line);
    return {
      transactions: await lines("SELECT reference || ' ' || status || ' ' || amount || ' refunded ' || amount_refunded AS line FROM transactions ORDER BY id"),
      refunds: await lines("SELECT id || ' ' || status || ' ' || amount AS line FROM refunds ORDER BY id"),
      payouts: await lines("SELECT reference || ' ' || status || ' ' || amount AS line FROM payouts ORDER BY id"),
      entries: await lines("SELECT type || ' ' || source_type || ' ' || source_reference || ' ' || amount AS line FROM ledger_entries ORDER BY id"),
    };
  }

  it("restores to T after a dropped table: everything acknowledged before T, nothing after, ledger clean", async () => {
    await moveMoney("before-backup");
    const backup = await archived.pgbackrest(["--type=full", "backup"]);
    expect(backup).not.toMatch(/ERROR/);
    const [{ done }] = (await query<{ done: string }>("SELECT clock_timestamp()::text AS done")) as [{ done: string }];
    await moveMoney("after-backup");

    const before = await snapshot();
    expect(before.transactions).toHaveLength(6);
    expect(new Set(before.entries.map((line) => line.split(" ")[0]))).toEqual(new Set(["payment", "refund", "refund_reservation", "payout", "payout_reservation"]));
    // T at least two seconds after the backup ended: pgBackRest keeps a backup's stop time in whole seconds, and a
    // restore to a T within the backup's last second finds no backup that stopped before it (seen on a busy machine).
    await until(() => query<{ ok: boolean }>(`SELECT clock_timestamp() > '${done}'::timestamptz + interval '2 seconds' AS ok`), (rows) => rows[0]?.ok === true);
    const [{ t }] = (await query<{ t: string }>("SELECT clock_timestamp()::text AS t")) as [{ t: string }];
    // After T: one more payment, acknowledged, then the mistake.
    const after = await paidTransaction(gateway!.url, apiKey, { amount: 9_900, email: "after@restore.test", payment_channel_id: channelId });
    await query("DROP TABLE transactions CASCADE");
    // `pgbackrest check` switches to a new WAL segment and waits until it is archived: everything up to now is in the repository.
    await archived.pgbackrest(["check"]);

    // What an operator (and the alerts) see about the backups.
    const status = await runCli(["backup", "status"], { DATABASE_URL: archived.url, ENCRYPTION_KEY: env.ENCRYPTION_KEY!, DATA_DIR: dataDir, ...archived.env, PGBACKREST_STANZA: STANZA });
    expect(status.code, status.output).toBe(0);
    const report = JSON.parse(status.output) as { stanza: string; last_backup: { type: string; age_seconds: number }; last_archived_wal: { segment: string; age_seconds: number }; archive_failing: unknown; repository: string };
    expect(report).toMatchObject({ stanza: STANZA, last_backup: { type: "full" }, archive_failing: null, repository: "ok" });
    expect(report.last_archived_wal.segment).toMatch(/^[0-9A-F]{24}$/);
    const metrics = await (await fetch(`${gateway!.url}/metrics`)).text();
    expect(metrics).toMatch(/^gateway_backup_age_seconds \d+(\.\d+)?$/m);
    expect(metrics).toMatch(/^gateway_wal_archive_age_seconds \d+(\.\d+)?$/m);
    expect(metrics).toMatch(/^gateway_wal_archive_failing 0$/m);

    // The machine is lost; restore to T into a fresh data directory and start the gateway on it.
    gateway!.child.kill("SIGTERM");
    await gateway!.exited;
    await archived.stopServer();
    await archived.restoreTo(t);
    await startGateway();

    expect(await snapshot()).toEqual(before);
    const api = apiClient(gateway!.url, apiKey);
    const lastBefore = before.transactions.at(-1)!.split(" ")[0]!;
    expect((await api.get(`/api/transactions/verify/${lastBefore}`)).body.transaction).toMatchObject({ reference: lastBefore, status: "completed" });
    expect((await api.get(`/api/transactions/verify/${after}`)).status).toBe(404);
    const ledger = await runCli(["ledger", "check"], { DATABASE_URL: archived.url, ENCRYPTION_KEY: env.ENCRYPTION_KEY!, DATA_DIR: dataDir });
    expect(ledger.code, ledger.output).toBe(0);
  });
});
