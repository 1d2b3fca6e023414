/**
 * Throwaway PostgreSQL server for tests.
 *
 * `startPostgres()` either
 *  - uses the server in `TEST_DATABASE_URL` (createDatabase() makes fresh databases on it and stop() drops only
 *    those), or
 *  - initdb's a temporary cluster in a temp folder and starts it with `pg_ctl -w` on a free 127.0.0.1 port, with
 *    settings tuned for tests (no fsync etc.). stop() kills it (`-m immediate`) and removes the folder.
 *
 * Binaries are looked up in `PG_BIN`, then the newest `/usr/lib/postgresql/<version>/bin`, then `pg_ctl` on PATH.
 * PostgreSQL refuses to run as root, so when the test process is root the server runs as the `postgres` account.
 *
 * Safety nets: servers still running when the process exits (or gets SIGINT/SIGTERM/SIGHUP) are killed, and
 * clusters left behind by a test process that was killed with SIGKILL are cleaned up by the next startPostgres().
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync, chownSync, appendFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";
import { onProcessExit } from "./cleanup-on-exit.ts";
import { abandonedFolders, bestEffort, freePort, isExecutable, onPath, ownedTempFolder, removeFolderSync, sleep } from "./local-server.ts";

export type PostgresServer = {
  /** Superuser connection URL to the server's `postgres` database (or TEST_DATABASE_URL as given). */
  adminUrl: string;
  /** Creates an empty database (named `name`, or a unique `t_<random>`) and returns its connection URL. */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server and removes its folder (with TEST_DATABASE_URL: drops the databases it created). Idempotent. */
  stop(): Promise<void>;
};

const NOT_FOUND =
  'PostgreSQL server binaries not found: install them with "apt-get install -y postgresql" or set TEST_DATABASE_URL';
const DIR_PREFIX = "pg-test-";

type Binaries = { initdb: string; pgCtl: string };
/** How to run server binaries: directly, or through `runuser` when we are root. */
type RunAs = { wrap: (cmd: string, args: string[]) => [string, string[]]; uid?: number; gid?: number };

export async function startPostgres(): Promise<PostgresServer> {
  const external = process.env.TEST_DATABASE_URL;
  if (external) return useExternalServer(external);
  return startLocalServer();
}

// ---------------------------------------------------------------------------------------------------------------
// TEST_DATABASE_URL

async function useExternalServer(adminUrl: string): Promise<PostgresServer> {
  const admin = new AdminConnection({ connectionString: adminUrl });
  const created: string[] = [];
  let stopped = false;
  return {
    adminUrl,
    async createDatabase(name) {
      if (stopped) throw new Error("createDatabase() called after stop()");
      const db = await admin.createDatabase(name);
      created.push(db);
      return withDatabase(adminUrl, db);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        for (const db of created.splice(0)) await admin.dropDatabase(db);
      } finally {
        await admin.close();
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Local throwaway cluster

async function startLocalServer(): Promise<PostgresServer> {
  const bins = findBinaries();
  const runAs = resolveRunAs();
  sweepAbandonedClusters(bins, runAs);

  const base = tempBase(runAs);
  const dir = ownedTempFolder(base, DIR_PREFIX);
  const dataDir = join(dir, "data");
  const logFile = join(dir, "server.log");
  const cluster: Cluster = { dir, dataDir, bins, runAs, running: false };
  liveClusters.add(cluster);
  onProcessExit(destroyAllClustersSync);

  try {
    if (runAs.uid !== undefined) chownSync(dir, runAs.uid, runAs.gid!);

    await run(runAs, bins.initdb, [
      "-D", dataDir,
      "-U", "postgres",
      "--auth-local=trust",
      "--auth-host=trust",
      "-E", "UTF8",
      "--no-locale",
      "--no-sync",
    ], { cwd: dir, timeoutMs: 120_000, what: "initdb" });

    // Unix socket inside our folder so we never collide with a system cluster's /var/run/postgresql.
    // Socket paths are limited to ~107 bytes; if ours would be too long, just go TCP-only.
    const socketDir = dir.length + "/.s.PGSQL.65535".length < 100 ? dir : "";
    appendFileSync(join(dataDir, "postgresql.conf"), [
      "",
      "# --- test settings (test/support/postgres.ts) ---",
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${socketDir}'`,
      "fsync = off",
      "synchronous_commit = off",
      "full_page_writes = off",
      "max_connections = 300",
      ...(process.env.PG_STAT_STATEMENTS ? ["shared_preload_libraries = 'pg_stat_statements'", "pg_stat_statements.track = all", "pg_stat_statements.track_planning = on"] : []),
      "",
    ].join("\n"));

    let port = 0;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      writeFileSync(logFile, "");
      if (runAs.uid !== undefined) chownSync(logFile, runAs.uid, runAs.gid!);
      try {
        cluster.running = true; // from here on a failed start may still have left a postmaster behind
        await run(runAs, bins.pgCtl, ["-D", dataDir, "-l", logFile, "-w", "-t", "60", "-o", `-p ${port}`, "start"], {
          cwd: dir,
          timeoutMs: 90_000,
          what: "pg_ctl start",
        });
        break;
      } catch (err) {
        const log = readTail(logFile);
        // Someone grabbed the port between freePort() and the bind: try another one.
        if (attempt < 5 && /could not bind|address already in use|could not create any TCP\/IP sockets/i.test(log)) {
          continue;
        }
        throw new Error(`${(err as Error).message}\n--- server log (${logFile}) ---\n${log}`);
      }
    }

    const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const admin = new AdminConnection({ host: "127.0.0.1", port, user: "postgres", database: "postgres", ssl: false });
    let stopped = false;
    return {
      adminUrl,
      async createDatabase(name) {
        if (stopped) throw new Error("createDatabase() called after stop()");
        return withDatabase(adminUrl, await admin.createDatabase(name));
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        await admin.close();
        await destroyCluster(cluster);
      },
    };
  } catch (err) {
    await destroyCluster(cluster).catch(() => {});
    throw err;
  }
}

type Cluster = { dir: string; dataDir: string; bins: Binaries; runAs: RunAs; running: boolean };
const liveClusters = new Set<Cluster>();

async function destroyCluster(cluster: Cluster): Promise<void> {
  liveClusters.delete(cluster);
  try {
    if (cluster.running && existsSync(join(cluster.dataDir, "postmaster.pid"))) {
      await run(cluster.runAs, cluster.bins.pgCtl, ["-D", cluster.dataDir, "-m", "immediate", "-w", "-t", "30", "stop"], {
        cwd: cluster.dir,
        timeoutMs: 60_000,
        what: "pg_ctl stop",
      });
    }
  } finally {
    cluster.running = false;
    rmSync(cluster.dir, { recursive: true, force: true });
  }
}

/** Synchronous variant for process exit. */
function destroyClusterSync(cluster: Cluster): void {
  liveClusters.delete(cluster);
  bestEffort(() => {
    if (existsSync(join(cluster.dataDir, "postmaster.pid"))) {
      const [cmd, args] = cluster.runAs.wrap(cluster.bins.pgCtl, ["-D", cluster.dataDir, "-m", "immediate", "-w", "-t", "10", "stop"]);
      spawnSync(cmd, args, { cwd: cluster.dir, env: childEnv(), stdio: "ignore", timeout: 15_000 });
    }
  });
  removeFolderSync(cluster.dir);
}

/** At exit (once per process: onProcessExit keeps one of each function). */
function destroyAllClustersSync(): void {
  for (const cluster of [...liveClusters]) destroyClusterSync(cluster);
}

/** Removes clusters whose owning test process died without cleaning up (e.g. killed with SIGKILL). */
function sweepAbandonedClusters(bins: Binaries, runAs: RunAs): void {
  for (const base of new Set([tmpdir(), "/tmp"])) {
    for (const dir of abandonedFolders(base, DIR_PREFIX)) destroyClusterSync({ dir, dataDir: join(dir, "data"), bins, runAs, running: true });
  }
}


// ---------------------------------------------------------------------------------------------------------------
// SQL

class AdminConnection {
  #config: pg.ClientConfig;
  #client: Promise<pg.Client> | undefined;
  #queue: Promise<void> = Promise.resolve();

  constructor(config: pg.ClientConfig) {
    this.#config = config;
  }

  async createDatabase(name?: string): Promise<string> {
    const db = name ?? `t_${randomBytes(8).toString("hex")}`;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#query(`CREATE DATABASE ${quoteIdent(db)}`);
        return db;
      } catch (err) {
        // 55006 object_in_use: "source database template1 is being accessed by other users" (concurrent creates).
        if ((err as { code?: string }).code === "55006" && attempt < 20) {
          await sleep(50 * attempt);
          continue;
        }
        throw err;
      }
    }
  }

  async dropDatabase(name: string): Promise<void> {
    try {
      await this.#query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
    } catch (err) {
      if ((err as { code?: string }).code !== "42601") throw err; // syntax error: server older than 13
      await this.#query(`DROP DATABASE IF EXISTS ${quoteIdent(name)}`);
    }
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    if (client) await (await client.catch(() => undefined))?.end().catch(() => {});
  }

  /** One statement at a time: pg.Client deprecates overlapping query() calls. */
  #query(sql: string): Promise<void> {
    const result = this.#queue.then(() => this.#run(sql));
    this.#queue = result.catch(() => {});
    return result;
  }

  async #run(sql: string): Promise<void> {
    this.#client ??= (async () => {
      const client = new pg.Client(this.#config);
      client.on("error", () => {}); // the server going away must not crash the test process
      await client.connect();
      return client;
    })();
    let client: pg.Client;
    try {
      client = await this.#client;
    } catch (err) {
      this.#client = undefined;
      throw err;
    }
    await client.query(sql);
  }
}

function quoteIdent(name: string): string {
  if (!name || name.includes("\0")) throw new Error(`invalid database name: ${JSON.stringify(name)}`);
  return `"${name.replaceAll('"', '""')}"`;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(db)}`;
  return u.toString();
}

// ---------------------------------------------------------------------------------------------------------------
// Processes and files

function findBinaries(): Binaries {
  const complete = (dir: string): Binaries | undefined => {
    const initdb = join(dir, "initdb");
    const pgCtl = join(dir, "pg_ctl");
    return isExecutable(initdb) && isExecutable(pgCtl) && isExecutable(join(dir, "postgres")) ? { initdb, pgCtl } : undefined;
  };

  const fromEnv = process.env.PG_BIN;
  if (fromEnv) {
    const found = complete(fromEnv);
    if (!found) throw new Error(`PostgreSQL server binaries not found in PG_BIN=${fromEnv}: point PG_BIN at the folder with initdb, pg_ctl and postgres, or set TEST_DATABASE_URL`);
    return found;
  }

  const root = "/usr/lib/postgresql";
  let versions: string[] = [];
  try {
    versions = readdirSync(root).filter((v) => /^\d+(\.\d+)?$/.test(v));
  } catch {
    // not a Debian-style install
  }
  versions.sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  for (const version of versions) {
    const found = complete(join(root, version, "bin"));
    if (found) return found;
  }

  const pgCtl = onPath("pg_ctl");
  if (pgCtl) {
    const found = complete(dirname(realpathSync(pgCtl)));
    if (found) return found;
    const initdb = onPath("initdb");
    if (initdb) return { initdb, pgCtl };
  }
  throw new Error(NOT_FOUND);
}



function resolveRunAs(): RunAs {
  if (process.getuid?.() !== 0) return { wrap: (cmd, args) => [cmd, args] };
  let uid: number;
  let gid: number;
  try {
    uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
    gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
  } catch {
    throw new Error(
      'PostgreSQL cannot run as root and there is no "postgres" account: create it (useradd --system postgres), run the tests as another user, or set TEST_DATABASE_URL',
    );
  }
  return { uid, gid, wrap: (cmd, args) => ["runuser", ["-u", "postgres", "--", cmd, ...args]] };
}

/** The temp folder to use; when the server runs as another user, every parent folder must be searchable by it. */
function tempBase(runAs: RunAs): string {
  const base = tmpdir();
  if (runAs.uid === undefined) return base;
  try {
    for (let dir = realpathSync(base); ; dir = dirname(dir)) {
      if ((statSync(dir).mode & 0o001) === 0) return "/tmp";
      if (dir === dirname(dir)) return base;
    }
  } catch {
    return "/tmp";
  }
}

/** Environment for server binaries: no PG* variables that could redirect them, and messages in plain English. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("PG")) env[key] = value;
  env.LC_ALL = "C";
  env.LANG = "C";
  return env;
}

function run(runAs: RunAs, cmd: string, args: string[], opts: { cwd: string; timeoutMs: number; what: string }): Promise<string> {
  const [file, argv] = runAs.wrap(cmd, args);
  return new Promise((resolve, reject) => {
    execFile(file, argv, { cwd: opts.cwd, env: childEnv(), timeout: opts.timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const output = `${stdout}${stderr}`.trim();
      reject(new Error(`${opts.what} failed (${err.killed ? "timed out" : `exit code ${err.code}`})${output ? `:\n${output}` : ""}`));
    });
  });
}

function readTail(file: string, bytes = 4000): string {
  try {
    const text = readFileSync(file, "utf8");
    return text.length > bytes ? text.slice(-bytes) : text;
  } catch {
    return "(no log)";
  }
}


