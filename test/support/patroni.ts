/**
 * A throwaway Patroni cluster for the failover drill, from Debian's packages: one etcd member, two PostgreSQL 15
 * nodes each managed by its own Patroni (deploy/patroni/patroni.yml as it ships, with loopback addresses and this
 * test's folders), and HAProxy with deploy/patroni/haproxy.cfg routing a primary port (Patroni's GET /primary) and
 * a replicas port (GET /replica). Every port is on 127.0.0.1.
 *
 * PostgreSQL refuses to run as root, so when the test runs as root Patroni runs as the `postgres` account
 * (setpriv, which execs: the pid we hold is Patroni's). The kernel kills etcd, Patroni and HAProxy if the test
 * process dies (`--pdeathsig`); postmasters outlive Patroni by design, so stop() and an exit handler stop them with
 * `pg_ctl stop -m immediate`, and folders of test processes that died are swept at the next start.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { onProcessExit } from "./cleanup-on-exit.ts";
import { abandonedFolders, bestEffort, freePort, onPath, ownedTempFolder, removeFolderSync } from "./local-server.ts";
import { repoRoot } from "./process.ts";
import { EVENTUALLY_MS } from "./timing.ts";
import { until, waitUntil } from "./wait.ts";

export interface PatroniNode {
  name: string;
  pgPort: number;
  apiPort: number;
  dataDir: string;
}

/** A member as Patroni's GET /cluster lists it. */
export interface Member {
  name: string;
  role: "leader" | "replica" | "sync_standby" | string;
  state: string;
  timeline?: number;
  lag?: number | string;
}

export interface PatroniCluster {
  nodes: PatroniNode[];
  /** The primary port of HAProxy (writes: DATABASE_URL) and its replicas port (DATABASE_READ_URL). */
  primaryPort: number;
  replicaPort: number;
  /** A connection URL through HAProxy's primary (or replicas) port to `database`, as the superuser. */
  url(database: string, via?: "primary" | "replicas"): string;
  /** A connection URL straight to one node, bypassing HAProxy. */
  nodeUrl(name: string, database: string): string;
  /** GET /cluster from any node's Patroni that answers. */
  members(): Promise<Member[]>;
  /** Waits until there is a leader running and a synchronous standby streaming from it; answers the leader's name. */
  healthy(timeoutMs?: number): Promise<string>;
  /** SIGKILLs the postmaster of the named node (its Patroni stays). */
  killPostmaster(name: string): void;
  /** SIGKILLs the named node's Patroni (its PostgreSQL goes on running, unmanaged). */
  killPatroni(name: string): Promise<void>;
  /**
   * The named node's machine is back: stops a PostgreSQL Patroni left running (SIGKILL as a dead machine would) and
   * starts Patroni again, which rejoins it as a replica (pg_rewind when its timeline diverged).
   */
  restartNode(name: string): Promise<void>;
  /** Patroni's, etcd's and HAProxy's output so far (for failure messages). */
  logs(): string;
  /** Kills everything and removes the folder. Idempotent. */
  stop(): Promise<void>;
}

const DIR_PREFIX = "patroni-test-";
const PASSWORD = "drill-superuser-password";
const PG_BIN = "/usr/lib/postgresql/15/bin";

type Running = { dir: string; children: Set<ChildProcess>; dataDirs: string[]; runAs: RunAs };
/** As root: setpriv's options to run as the postgres account (pg_ctl and Patroni). */
type RunAs = { uid?: number; gid?: number; setpriv: string[] };
const liveClusters = new Set<Running>();

export async function startPatroniCluster(size = 2): Promise<PatroniCluster> {
  const runAs = resolveRunAs();
  for (const dir of abandonedFolders("/tmp", DIR_PREFIX)) destroySync({ dir, children: new Set(), dataDirs: [join(dir, "pg1"), join(dir, "pg2"), join(dir, "pg3")], runAs });
  const dir = ownedTempFolder("/tmp", DIR_PREFIX);
  if (runAs.uid !== undefined) chownSync(dir, runAs.uid, runAs.gid!);
  const running: Running = { dir, children: new Set(), dataDirs: [], runAs };
  liveClusters.add(running);
  onProcessExit(destroyAllSync);
  let output = "";
  const spawnLogged = (label: string, file: string, args: string[], env: NodeJS.ProcessEnv, as: RunAs | undefined) => {
    const setpriv = onPath("setpriv");
    const argv = setpriv ? [setpriv, "--pdeathsig", "KILL", ...(as?.setpriv ?? []), "--", file, ...args] : [file, ...args];
    const child = spawn(argv[0]!, argv.slice(1), { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
    const collect = (chunk: Buffer) => {
      output += chunk.toString().replace(/^/gm, `[${label}] `);
      if (output.length > 400_000) output = output.slice(-200_000);
    };
    child.stdout!.on("data", collect);
    child.stderr!.on("data", collect);
    running.children.add(child);
    child.on("exit", () => running.children.delete(child));
    return child;
  };

  try {
    const [etcdClient, etcdPeer, primaryPort, replicaPort, statsPort] = await ports(5);
    const etcd = spawnLogged("etcd", "etcd", [
      "--name", "drill", "--data-dir", join(dir, "etcd"),
      "--listen-client-urls", `http://127.0.0.1:${etcdClient}`, "--advertise-client-urls", `http://127.0.0.1:${etcdClient}`,
      "--listen-peer-urls", `http://127.0.0.1:${etcdPeer}`, "--initial-advertise-peer-urls", `http://127.0.0.1:${etcdPeer}`,
      "--initial-cluster", `drill=http://127.0.0.1:${etcdPeer}`, "--log-level", "warn",
    ], { PATH: process.env.PATH ?? "" }, undefined);
    await waitUntil(async () => (await fetch(`http://127.0.0.1:${etcdClient}/health`).then((r) => r.ok).catch(() => false)) || etcd.exitCode !== null, "etcd to answer");
    if (etcd.exitCode !== null) throw new Error(`etcd exited:\n${output}`);

    // The shipped configuration; only what cannot come from PATRONI_* variables changes: the socket folder, and
    // WAL archiving (the restore drill covers pgBackRest; this one has no repository to push to).
    const shipped = readFileSync(join(repoRoot, "deploy/patroni/patroni.yml"), "utf8");
    const config = shipped
      .replace(/^( +unix_socket_directories:) .*$/m, `$1 ${dir}`)
      .replace(/^( +archive_command:) .*$/m, "$1 /bin/true");
    if (config === shipped) throw new Error("deploy/patroni/patroni.yml changed shape: the drill could not adapt it");
    const configFile = join(dir, "patroni.yml");
    writeFileSync(configFile, config);

    const nodes: PatroniNode[] = [];
    for (let i = 1; i <= size; i++) {
      const [pgPort, apiPort] = await ports(2);
      nodes.push({ name: `pg${i}`, pgPort: pgPort!, apiPort: apiPort!, dataDir: join(dir, `pg${i}`) });
    }
    running.dataDirs = nodes.map((n) => n.dataDir);
    const patronis = new Map<string, ChildProcess>();
    const startPatroni = (node: PatroniNode) => {
      const env = {
        PATH: process.env.PATH ?? "",
        HOME: dir,
        LC_ALL: "C.UTF-8",
        LANG: "C.UTF-8",
        PATRONI_NAME: node.name,
        PATRONI_RESTAPI_LISTEN: `127.0.0.1:${node.apiPort}`,
        PATRONI_RESTAPI_CONNECT_ADDRESS: `127.0.0.1:${node.apiPort}`,
        PATRONI_POSTGRESQL_LISTEN: `127.0.0.1:${node.pgPort}`,
        PATRONI_POSTGRESQL_CONNECT_ADDRESS: `127.0.0.1:${node.pgPort}`,
        PATRONI_POSTGRESQL_DATA_DIR: node.dataDir,
        PATRONI_POSTGRESQL_PGPASS: join(dir, `pgpass-${node.name}`),
        PATRONI_ETCD3_HOSTS: `127.0.0.1:${etcdClient}`,
        PATRONI_SUPERUSER_PASSWORD: PASSWORD,
        PATRONI_REPLICATION_PASSWORD: "drill-replication-password",
        PATRONI_REWIND_PASSWORD: "drill-rewind-password",
        PATRONI_LOG_LEVEL: "ERROR",
      };
      patronis.set(node.name, spawnLogged(node.name, "patroni", [configFile], env, runAs));
    };
    // The first bootstraps (initdb), the others then copy it (pg_basebackup).
    startPatroni(nodes[0]!);
    const api = (node: PatroniNode, path: string) => fetch(`http://127.0.0.1:${node.apiPort}${path}`, { signal: AbortSignal.timeout(2000) });
    await waitUntil(async () => (await api(nodes[0]!, "/primary").then((r) => r.status === 200).catch(() => false)), () => `pg1 to bootstrap as the primary:\n${output.slice(-3000)}`, 90_000);
    for (const node of nodes.slice(1)) startPatroni(node);

    spawnLogged("haproxy", "haproxy", ["-db", "-f", join(repoRoot, "deploy/patroni/haproxy.cfg")], {
      PATH: process.env.PATH ?? "",
      PG_PRIMARY_BIND: `127.0.0.1:${primaryPort}`,
      PG_REPLICA_BIND: `127.0.0.1:${replicaPort}`,
      PG_STATS: `127.0.0.1:${statsPort}`,
      ...Object.fromEntries(nodes.flatMap((n, i) => [[`PG${i + 1}`, `127.0.0.1:${n.pgPort}`], [`PG${i + 1}_API`, String(n.apiPort)]])),
    }, undefined);

    const members = async (): Promise<Member[]> => {
      for (const node of nodes) {
        try {
          const res = await api(node, "/cluster");
          if (res.ok) return ((await res.json()) as { members: Member[] }).members;
        } catch {
          // that node's Patroni is down: ask the next
        }
      }
      return [];
    };
    const healthy = async (timeoutMs = 120_000) => {
      const seen = await until(
        members,
        (m) => m.some((x) => x.role === "leader" && x.state === "running") && m.some((x) => x.role === "sync_standby" && x.state === "running"),
        timeoutMs,
      ).catch((error: Error) => {
        throw new Error(`${error.message}\n${output.slice(-4000)}`);
      });
      return seen.find((x) => x.role === "leader")!.name;
    };
    const node = (name: string) => {
      const found = nodes.find((n) => n.name === name);
      if (!found) throw new Error(`no node ${name}`);
      return found;
    };
    const url = (database: string, via: "primary" | "replicas" = "primary") =>
      `postgres://postgres:${PASSWORD}@127.0.0.1:${via === "primary" ? primaryPort : replicaPort}/${database}`;
    const stopPostgres = (target: PatroniNode) => {
      const pid = postmasterPid(target.dataDir);
      if (pid) bestEffort(() => process.kill(pid, "SIGKILL"));
    };
    let stopped = false;
    const cluster: PatroniCluster = {
      nodes,
      primaryPort: primaryPort!,
      replicaPort: replicaPort!,
      url,
      nodeUrl: (name, database) => `postgres://postgres:${PASSWORD}@127.0.0.1:${node(name).pgPort}/${database}`,
      members,
      healthy,
      killPostmaster(name) {
        const pid = postmasterPid(node(name).dataDir);
        if (!pid) throw new Error(`${name} has no running postmaster`);
        process.kill(pid, "SIGKILL");
      },
      async killPatroni(name) {
        const child = patronis.get(name)!;
        const exited = new Promise((resolve) => child.once("exit", resolve));
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        await exited;
      },
      async restartNode(name) {
        const target = node(name);
        const child = patronis.get(name)!;
        if (child.exitCode === null && child.signalCode === null) await cluster.killPatroni(name);
        stopPostgres(target);
        await waitUntil(() => !postmasterAlive(target.dataDir), `${name}'s postmaster to exit`);
        startPatroni(target);
      },
      logs: () => output,
      async stop() {
        if (stopped) return;
        stopped = true;
        await destroy(running);
      },
    };
    await healthy();
    // The gateway's database, made on the primary (and so on the standby).
    const admin = new pg.Client({ connectionString: url("postgres") });
    await admin.connect();
    await admin.query("CREATE DATABASE gateway");
    await admin.end();
    return cluster;
  } catch (error) {
    await destroy(running);
    throw new Error(`${(error as Error).message}\n--- cluster output ---\n${output.slice(-6000)}`);
  }
}

async function ports(count: number): Promise<number[]> {
  const found = new Set<number>();
  while (found.size < count) found.add(await freePort());
  return [...found];
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]!, 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function postmasterAlive(dataDir: string): boolean {
  const pid = postmasterPid(dataDir);
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function resolveRunAs(): RunAs {
  if (process.getuid?.() !== 0) return { setpriv: [] };
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid, setpriv: [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups"] };
}

async function destroy(running: Running): Promise<void> {
  liveClusters.delete(running);
  const exits = [...running.children].map((child) => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once("exit", resolve))));
  for (const child of running.children) child.kill("SIGKILL");
  await Promise.race([Promise.all(exits), new Promise((resolve) => setTimeout(resolve, EVENTUALLY_MS))]);
  destroySync(running);
}

/** Kills what is left (postmasters outlive Patroni) and removes the folder; for stop() and process exit. */
function destroySync(running: Running): void {
  liveClusters.delete(running);
  for (const child of running.children) bestEffort(() => child.kill("SIGKILL"));
  for (const dataDir of running.dataDirs) {
    if (!existsSync(join(dataDir, "postmaster.pid"))) continue;
    const pgCtl = [join(PG_BIN, "pg_ctl"), "-D", dataDir, "-m", "immediate", "-w", "-t", "10", "stop"];
    const [file, ...args] = running.runAs.uid === undefined ? pgCtl : ["setpriv", ...running.runAs.setpriv, "--", ...pgCtl];
    bestEffort(() => spawnSync(file!, args, { stdio: "ignore", timeout: 15_000 }));
  }
  // A postmaster Patroni was just starting when it was killed has no postmaster.pid yet for pg_ctl: found by its -D.
  killPostmastersUnder(running.dir);
  removeFolderSync(running.dir);
  killPostmastersUnder(running.dir);
}

/** SIGKILLs every process whose command line names a folder under `dir` (postmasters run as `postgres -D <dir>/pgN`). */
function killPostmastersUnder(dir: string): void {
  let pids: string[] = [];
  bestEffort(() => (pids = readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))));
  for (const pid of pids) {
    bestEffort(() => {
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (args.some((arg) => arg.startsWith(`${dir}/`)) && args[0]?.endsWith("postgres")) process.kill(Number(pid), "SIGKILL");
    });
  }
}

function destroyAllSync(): void {
  for (const running of [...liveClusters]) destroySync(running);
}
