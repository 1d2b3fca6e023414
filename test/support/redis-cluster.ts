/**
 * Throwaway Redis Cluster for tests: three masters, no replicas, on loopback ports, from the machine's
 * `redis-server` and `redis-cli` (or REDIS_SERVER_BIN / REDIS_CLI_BIN).
 *
 * Each node runs with `--cluster-enabled yes`, its own nodes-<port>.conf in one temp folder and no persistence;
 * `redis-cli --cluster create` assigns the 16384 slots, and startRedisCluster() resolves once every node reports
 * cluster_state:ok. kill(i) SIGKILLs one master (its slots are unavailable: there is no replica to promote);
 * restart(i) starts it again on the same ports with its nodes.conf, so it rejoins owning the same slots (empty),
 * and waits until the cluster is ok again.
 *
 * cluster-node-timeout is 2 s (the default is 15 s) so the other nodes notice a dead master quickly.
 *
 * Safety nets as in redis.ts: the kernel's parent-death signal (`setpriv --pdeathsig`) and an exit handler kill the
 * nodes; temp folders of test processes that died are swept at the next start.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { Redis } from "ioredis";
import { onProcessExit } from "./cleanup-on-exit.ts";
import { abandonedFolders, bestEffort, freePort, isExecutable, onPath, ownedTempFolder, removeFolderSync } from "./local-server.ts";
import { EVENTUALLY_MS } from "./timing.ts";
import { waitUntil } from "./wait.ts";

export interface RedisCluster {
  /** `127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`, as REDIS_CLUSTER_NODES takes it. */
  nodes: string;
  ports: number[];
  /** SIGKILLs node `index` (a master): its slots are unavailable until restart(index). */
  kill(index: number): Promise<void>;
  /** Starts node `index` again on its ports with its nodes.conf; resolves once every node reports cluster_state:ok. */
  restart(index: number): Promise<void>;
  /** `CLUSTER INFO`'s cluster_state on every running node. */
  states(): Promise<string[]>;
  /** Kills every node and removes the folder. Idempotent. */
  stop(): Promise<void>;
}

const DIR_PREFIX = "redis-cluster-test-";
const NODE_TIMEOUT_MS = 2000;
// Nodes started, the cluster created and every node reporting ok: generous for a busy machine (test/support/timing.ts).
const START_TIMEOUT_MS = EVENTUALLY_MS;

type Node = { port: number; busPort: number; child: ChildProcess | undefined; exited: Promise<void> };
const liveClusters = new Set<{ dir: string; nodes: Node[] }>();

export async function startRedisCluster(size = 3): Promise<RedisCluster> {
  const server = findBinary("redis-server", "REDIS_SERVER_BIN");
  const cli = findBinary("redis-cli", "REDIS_CLI_BIN");
  for (const dir of abandonedFolders(tmpdir(), DIR_PREFIX)) removeFolderSync(dir);
  const dir = ownedTempFolder(tmpdir(), DIR_PREFIX);
  const cluster = { dir, nodes: [] as Node[] };
  liveClusters.add(cluster);
  onProcessExit(killAllSync);

  const launch = async (node: Node) => {
    const args = [
      "--port", String(node.port),
      "--cluster-port", String(node.busPort),
      "--bind", "127.0.0.1",
      "--cluster-enabled", "yes",
      "--cluster-config-file", `nodes-${node.port}.conf`,
      "--cluster-node-timeout", String(NODE_TIMEOUT_MS),
      "--dir", dir,
      "--save", "",
      "--appendonly", "no",
      "--daemonize", "no",
      "--logfile", "",
      "--loglevel", "warning",
    ];
    const setpriv = process.platform === "linux" ? onPath("setpriv") : undefined;
    const [file, argv] = setpriv ? [setpriv, ["--pdeathsig", "KILL", "--", server, ...args]] : [server, args];
    const child = spawn(file, argv, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
    let output = "";
    child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString("utf8")).slice(-4000)));
    node.child = child;
    node.exited = new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    });
    child.unref();
    (child.stderr as unknown as { unref?: () => void }).unref?.();
    await waitUntil(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`redis-server on port ${node.port} exited: ${output.trim()}`);
        return (await command(node.port, (r) => r.ping()).catch(() => "")) === "PONG";
      },
      `redis-server on port ${node.port} to answer`,
      START_TIMEOUT_MS,
    );
  };

  const kill = async (node: Node) => {
    const child = node.child;
    node.child = undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.ref(); // keep the event loop alive until the exit is reported
      child.kill("SIGKILL");
      await node.exited;
    }
  };

  const states = async () => {
    const running = cluster.nodes.filter((n) => n.child);
    return Promise.all(running.map(async (n) => /cluster_state:(\w+)/.exec(await command(n.port, (r) => r.cluster("INFO")).catch(() => ""))?.[1] ?? "unreachable"));
  };
  const allOk = () =>
    waitUntil(async () => (await states()).every((s) => s === "ok") && cluster.nodes.every((n) => n.child), "cluster_state:ok on every node", START_TIMEOUT_MS);

  try {
    for (let i = 0; i < size; i++) {
      const node: Node = { port: await freePort(), busPort: await freePort(), child: undefined, exited: Promise.resolve() };
      cluster.nodes.push(node);
      await launch(node);
    }
    const created = spawnSync(cli, ["--cluster", "create", ...cluster.nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-yes"], { encoding: "utf8", timeout: START_TIMEOUT_MS });
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stderr || created.stdout}`);
    await allOk();
  } catch (err) {
    await Promise.all(cluster.nodes.map(kill));
    liveClusters.delete(cluster);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  let stopped = false;
  return {
    nodes: cluster.nodes.map((n) => `127.0.0.1:${n.port}`).join(","),
    ports: cluster.nodes.map((n) => n.port),
    kill: (index) => kill(cluster.nodes[index]!),
    async restart(index) {
      const node = cluster.nodes[index]!;
      if (!node.child) await launch(node);
      await allOk();
    },
    states,
    async stop() {
      if (stopped) return;
      stopped = true;
      liveClusters.delete(cluster);
      try {
        await Promise.all(cluster.nodes.map(kill));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** One command on a short-lived plain connection to one node (no retries: a dead node fails at once). */
async function command<T>(port: number, run: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  redis.on("error", () => {});
  try {
    await redis.connect();
    return await run(redis);
  } finally {
    redis.disconnect();
  }
}

function killAllSync(): void {
  for (const cluster of [...liveClusters]) {
    liveClusters.delete(cluster);
    for (const node of cluster.nodes) bestEffort(() => node.child?.kill("SIGKILL"));
    removeFolderSync(cluster.dir);
  }
}

function findBinary(name: string, envVar: string): string {
  const fromEnv = process.env[envVar];
  if (fromEnv) {
    if (!isExecutable(fromEnv)) throw new Error(`${envVar}=${fromEnv} is not an executable file`);
    return fromEnv;
  }
  const found = onPath(name);
  if (!found) throw new Error(`${name} not found: install it with "apt-get install -y redis-server" or set ${envVar}`);
  return found;
}
