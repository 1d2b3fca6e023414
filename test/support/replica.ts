/**
 * A PostgreSQL primary with one streaming replica, both throwaway, for tests of reads off the primary.
 *
 * The primary is initdb'd in a temp folder with replication allowed (wal_level = replica, WAL senders, a
 * `replicator` role with REPLICATION, which initdb's pg_hba.conf already lets in from 127.0.0.1); the replica is
 * `pg_basebackup -R` of it (standby.signal and primary_conninfo written by pg_basebackup), started on a port of its
 * own. Both listen on 127.0.0.1 only, run as the `postgres` account when the tests run as root (PostgreSQL refuses
 * root), and are killed and removed by stop(), or at process exit if a test never got there.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, chownSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { onProcessExit } from "./cleanup-on-exit.ts";
import { freePort, isExecutable, ownedTempFolder, removeFolderSync } from "./local-server.ts";

export interface ReplicatedPostgres {
  /** The gateway's database on the primary (superuser, no password). */
  primaryUrl: string;
  /** The same database on the replica. */
  replicaUrl: string;
  /** Runs SQL on the replica's copy of the database (as superuser): pg_wal_replay_pause(), reading what it has. */
  onReplica<T extends pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Stops the replica (fast shutdown: its connections are cut). */
  stopReplica(): Promise<void>;
  /** Starts it again on the same port; it catches up from the primary. */
  startReplica(): Promise<void>;
  stop(): Promise<void>;
}

const DATABASE = "gateway";

/** The newest /usr/lib/postgresql/<version>/bin with the tools needed (PG_BIN first). */
function binaries(): string {
  const has = (dir: string) => ["initdb", "pg_ctl", "pg_basebackup", "postgres"].every((tool) => isExecutable(join(dir, tool)));
  if (process.env.PG_BIN && has(process.env.PG_BIN)) return process.env.PG_BIN;
  const root = "/usr/lib/postgresql";
  const versions = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const version of versions) if (has(join(root, version, "bin"))) return join(root, version, "bin");
  throw new Error("PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) not found: install postgresql or set PG_BIN");
}

/** As root, server tools run as `postgres`; otherwise as we are. */
function runAs(): { wrap(cmd: string, args: string[]): [string, string[]]; uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return { wrap: (cmd, args) => [cmd, args] };
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g"), wrap: (cmd, args) => ["runuser", ["-u", "postgres", "--", cmd, ...args]] };
}

/** Server tools without PG* variables that could point them elsewhere. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { LC_ALL: "C", LANG: "C" };
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("PG") && !(key in env)) env[key] = value;
  return env;
}

export async function startReplicatedPostgres(): Promise<ReplicatedPostgres> {
  const bin = binaries();
  const as = runAs();
  const dir = ownedTempFolder(tmpdir(), "pg-replica-test-");
  if (as.uid !== undefined) chownSync(dir, as.uid, as.gid!);
  const primaryData = join(dir, "primary");
  const replicaData = join(dir, "replica");
  const running = new Set<string>();

  const run = (tool: string, args: string[], what = tool) =>
    new Promise<void>((resolve, reject) => {
      const [file, argv] = as.wrap(join(bin, tool), args);
      execFile(file, argv, { cwd: dir, env: childEnv(), timeout: 90_000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`${what} failed: ${`${stdout}${stderr}`.trim()}`)) : resolve(),
      );
    });
  const start = async (data: string, port: number) => {
    running.add(data);
    await run("pg_ctl", ["-D", data, "-l", join(dir, `${port}.log`), "-w", "-t", "60", "-o", `-p ${port}`, "start"], `pg_ctl start (${data})`);
  };
  const stopServer = async (data: string, mode: "fast" | "immediate") => {
    await run("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "30", "stop"], `pg_ctl stop (${data})`);
    running.delete(data);
  };
  // At exit, whatever a test left running is killed and the folder removed.
  const destroySync = () => {
    for (const data of running) {
      const [file, argv] = as.wrap(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "-t", "10", "stop"]);
      spawnSync(file, argv, { env: childEnv(), stdio: "ignore", timeout: 15_000 });
    }
    running.clear();
    removeFolderSync(dir);
  };
  onProcessExit(destroySync);

  try {
    await run("initdb", ["-D", primaryData, "-U", "postgres", "--auth-local=trust", "--auth-host=trust", "-E", "UTF8", "--no-locale", "--no-sync"]);
    appendFileSync(
      primaryData + "/postgresql.conf",
      [
        "",
        "# test/support/replica.ts: a primary that streams to a standby",
        "listen_addresses = '127.0.0.1'",
        "unix_socket_directories = ''",
        "wal_level = replica",
        "max_wal_senders = 4",
        "hot_standby = on",
        "fsync = off",
        "synchronous_commit = off",
        "full_page_writes = on", // a base backup taken while the primary writes needs full-page images
        "max_connections = 100",
        "",
      ].join("\n"),
    );
    const primaryPort = await freePort();
    await start(primaryData, primaryPort);
    const admin = new pg.Client({ host: "127.0.0.1", port: primaryPort, user: "postgres", database: "postgres" });
    await admin.connect();
    await admin.query("CREATE ROLE replicator WITH REPLICATION LOGIN");
    await admin.query(`CREATE DATABASE ${DATABASE}`);
    await admin.end();

    // -R writes standby.signal and primary_conninfo; -X stream copies the WAL written meanwhile.
    await run("pg_basebackup", ["-D", replicaData, "-h", "127.0.0.1", "-p", String(primaryPort), "-U", "replicator", "-R", "-X", "stream", "-c", "fast", "--no-sync"]);
    const replicaPort = await freePort();
    await start(replicaData, replicaPort);

    const url = (port: number) => `postgres://postgres@127.0.0.1:${port}/${DATABASE}`;
    let stopped = false;
    return {
      primaryUrl: url(primaryPort),
      replicaUrl: url(replicaPort),
      async onReplica<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []) {
        const client = new pg.Client({ connectionString: url(replicaPort) });
        client.on("error", () => {});
        await client.connect();
        try {
          return (await client.query<T>(sql, params)).rows;
        } finally {
          await client.end();
        }
      },
      stopReplica: () => stopServer(replicaData, "fast"),
      startReplica: () => start(replicaData, replicaPort),
      async stop() {
        if (stopped) return;
        stopped = true;
        try {
          for (const data of [...running]) await stopServer(data, "immediate");
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    destroySync();
    throw error;
  }
}
