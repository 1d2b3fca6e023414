/**
 * A throwaway PostgreSQL 15 whose WAL pgBackRest archives, for the restore drill: deploy/pgbackrest/pgbackrest.conf
 * as it ships, with the repository, spool, log and lock folders (and the data directory) pointed at this test's
 * folder through PGBACKREST_* variables, which pgBackRest reads over its configuration file.
 *
 * PostgreSQL and pgBackRest run as the `postgres` account when the test runs as root (setpriv); the server listens on
 * 127.0.0.1 only. stop() and an exit handler stop every server with `pg_ctl stop -m immediate` and remove the folder;
 * folders of test processes that died are swept at the next start.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, chownSync, copyFileSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { onProcessExit } from "./cleanup-on-exit.ts";
import { abandonedFolders, bestEffort, freePort, ownedTempFolder, removeFolderSync } from "./local-server.ts";
import { repoRoot } from "./process.ts";
import { waitUntil } from "./wait.ts";

const DIR_PREFIX = "pgbackrest-test-";
const PG_BIN = "/usr/lib/postgresql/15/bin";
export const STANZA = "gateway";

export interface ArchivedPostgres {
  /** The gateway's database on the running server. */
  url: string;
  /** What pgBackRest needs to find this repository and server: for the CLI's `backup status` and the gateway. */
  env: Record<string, string>;
  /** Runs `pgbackrest --stanza=gateway <args>` as the server's account; resolves with its output. */
  pgbackrest(args: string[]): Promise<string>;
  /** Stops the running server at once (`-m immediate`, as a lost machine). */
  stopServer(): Promise<void>;
  /**
   * Restores the repository to `target` (a timestamp PostgreSQL reads) into a fresh data directory, starts a server
   * on it and resolves once it has replayed up to the target and been promoted; `url` then names it.
   */
  restoreTo(target: string): Promise<void>;
  /** Stops every server and removes the folder. Idempotent. */
  stop(): Promise<void>;
}

type Account = { uid?: number; gid?: number };
type Running = { dir: string; dataDirs: string[]; account: Account };
const live = new Set<Running>();

export async function startArchivedPostgres(): Promise<ArchivedPostgres> {
  const account = postgresAccount();
  for (const dir of abandonedFolders("/tmp", DIR_PREFIX)) destroySync({ dir, dataDirs: [join(dir, "data"), join(dir, "restored")], account });
  const dir = ownedTempFolder("/tmp", DIR_PREFIX);
  const running: Running = { dir, dataDirs: [], account };
  live.add(running);
  onProcessExit(destroyAllSync);
  const own = (path: string) => account.uid !== undefined && chownSync(path, account.uid, account.gid!);
  own(dir);
  for (const sub of ["repo", "spool", "log", "lock"]) {
    mkdirSync(join(dir, sub));
    own(join(dir, sub));
  }
  copyFileSync(join(repoRoot, "deploy/pgbackrest/pgbackrest.conf"), join(dir, "pgbackrest.conf"));
  const repositoryEnv = {
    PGBACKREST_CONFIG: join(dir, "pgbackrest.conf"),
    PGBACKREST_REPO1_PATH: join(dir, "repo"),
    PGBACKREST_SPOOL_PATH: join(dir, "spool"),
    PGBACKREST_LOG_PATH: join(dir, "log"),
    PGBACKREST_LOCK_PATH: join(dir, "lock"),
    PGBACKREST_PG1_SOCKET_PATH: dir,
  };
  let server = { dataDir: join(dir, "data"), port: 0 };
  const serverEnv = () => ({ ...repositoryEnv, PGBACKREST_PG1_PATH: server.dataDir, PGBACKREST_PG1_PORT: String(server.port) });
  const run = (file: string, args: string[], timeoutMs = 120_000) => runAs(account, file, args, { cwd: dir, env: serverEnv(), timeoutMs });
  const pgbackrest = (args: string[]) => run("pgbackrest", [`--stanza=${STANZA}`, ...args]);
  const urlOf = (port: number) => `postgres://postgres@127.0.0.1:${port}/gateway`;

  const startServer = async () => {
    running.dataDirs.push(server.dataDir);
    await run(join(PG_BIN, "pg_ctl"), ["-D", server.dataDir, "-l", join(dir, `${server.port}.log`), "-w", "-t", "60", "-o", `-p ${server.port}`, "start"]);
  };

  try {
    server.port = await freePort();
    await run(join(PG_BIN, "initdb"), ["-D", server.dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"]);
    appendFileSync(join(server.dataDir, "postgresql.conf"), [
      "",
      "# --- the restore drill (test/support/pgbackrest.ts); archiving as deploy/patroni/patroni.yml sets it ---",
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${dir}'`,
      "wal_level = replica",
      "archive_mode = on",
      `archive_command = 'pgbackrest --stanza=${STANZA} archive-push %p'`,
      "fsync = off",
      "max_connections = 100",
      "",
    ].join("\n"));
    await startServer();
    await pgbackrest(["stanza-create"]);
    await pgbackrest(["check"]);
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${server.port}/postgres` });
    await admin.connect();
    await admin.query("CREATE DATABASE gateway");
    await admin.end();
  } catch (error) {
    destroySync(running);
    throw error;
  }

  const archived: ArchivedPostgres = {
    get url() {
      return urlOf(server.port);
    },
    get env() {
      return serverEnv();
    },
    pgbackrest,
    async stopServer() {
      await run(join(PG_BIN, "pg_ctl"), ["-D", server.dataDir, "-m", "immediate", "-w", "-t", "30", "stop"]);
    },
    async restoreTo(target) {
      server = { dataDir: join(dir, "restored"), port: await freePort() };
      mkdirSync(server.dataDir, { mode: 0o700 });
      own(server.dataDir);
      await pgbackrest(["--type=time", `--target=${target}`, "--target-action=promote", "restore"]);
      await startServer();
      const client = new pg.Client({ connectionString: urlOf(server.port) });
      await client.connect();
      try {
        await waitUntil(async () => !(await client.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r")).rows[0]!.r, "the restored server to replay to the target and be promoted", 120_000);
      } finally {
        await client.end();
      }
    },
    async stop() {
      destroySync(running);
    },
  };
  return archived;
}

function postgresAccount(): Account {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

function asAccount(account: Account, file: string, args: string[]): [string, string[]] {
  return account.uid === undefined ? [file, args] : ["setpriv", [`--reuid=${account.uid}`, `--regid=${account.gid}`, "--clear-groups", "--", file, ...args]];
}

function runAs(account: Account, file: string, args: string[], options: { cwd: string; env: Record<string, string>; timeoutMs: number }): Promise<string> {
  const [command, argv] = asAccount(account, file, args);
  const env = { PATH: process.env.PATH ?? "", LC_ALL: "C", LANG: "C", ...options.env };
  return new Promise((resolve, reject) => {
    execFile(command, argv, { cwd: options.cwd, env, timeout: options.timeoutMs, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      reject(new Error(`${file} ${args.join(" ")} failed (${error.killed ? "timed out" : `exit code ${error.code}`}):\n${stdout}${stderr}`));
    });
  });
}

function destroySync(running: Running): void {
  live.delete(running);
  for (const dataDir of running.dataDirs) {
    if (!existsSync(join(dataDir, "postmaster.pid"))) continue;
    const [command, argv] = asAccount(running.account, join(PG_BIN, "pg_ctl"), ["-D", dataDir, "-m", "immediate", "-w", "-t", "10", "stop"]);
    bestEffort(() => spawnSync(command, argv, { stdio: "ignore", timeout: 15_000 }));
  }
  removeFolderSync(running.dir);
}

function destroyAllSync(): void {
  for (const running of [...live]) destroySync(running);
}
