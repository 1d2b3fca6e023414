/**
 * Throwaway Redis server for tests.
 *
 * `startRedis()` either
 *  - uses the server in `TEST_REDIS_URL` (stop() does nothing; pause()/resume() are not supported), or
 *  - spawns `redis-server` (from PATH, or REDIS_SERVER_BIN) on a free 127.0.0.1 port with a temp working folder and
 *    no persistence, and waits until it answers. stop() kills it and removes the folder.
 *
 * pause() kills the process but keeps the port reserved in the handle; resume() starts a new process on the same
 * port. Like a real restart without persistence, the data is gone after resume().
 *
 * Safety nets: children are killed when the test process exits (exit handler, SIGINT/SIGTERM/SIGHUP) and, on Linux,
 * through the kernel's parent-death signal (`setpriv --pdeathsig`), which also covers a test process killed with
 * SIGKILL.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { onProcessExit } from "./cleanup-on-exit.ts";
import { abandonedFolders, bestEffort, freePort, isExecutable, onPath, ownedTempFolder, removeFolderSync, sleep } from "./local-server.ts";
import { EVENTUALLY_MS } from "./timing.ts";

export type RedisServer = {
  /** `redis://127.0.0.1:<port>` (or TEST_REDIS_URL as given). */
  url: string;
  port: number;
  /** Kills the server and removes its folder. Idempotent. */
  stop(): Promise<void>;
  /** Stops the server process (clients see connection errors); the port stays this server's. Data is lost. */
  pause(): Promise<void>;
  /** Starts the server again on the same port and waits until it answers. */
  resume(): Promise<void>;
};

const NOT_FOUND = 'redis-server not found: install it with "apt-get install -y redis-server" or set TEST_REDIS_URL';
const DIR_PREFIX = "redis-test-";
// A redis-server answering PING after it was spawned: generous for a busy machine (test/support/timing.ts).
const START_TIMEOUT_MS = EVENTUALLY_MS;

export async function startRedis(): Promise<RedisServer> {
  const external = process.env.TEST_REDIS_URL;
  if (external) return useExternalServer(external);
  return startLocalServer();
}

function useExternalServer(url: string): RedisServer {
  const parsed = new URL(url);
  const unsupported = (what: string) => async () => {
    throw new Error(`${what}() is not supported with TEST_REDIS_URL (it needs a redis-server started by the tests)`);
  };
  return {
    url,
    port: parsed.port ? Number(parsed.port) : 6379,
    stop: async () => {},
    pause: unsupported("pause"),
    resume: unsupported("resume"),
  };
}

// ---------------------------------------------------------------------------------------------------------------

type Instance = { child: ChildProcess; exited: Promise<void>; output: () => string };
type Server = { dir: string; instance: Instance | undefined };
const liveServers = new Set<Server>();

async function startLocalServer(): Promise<RedisServer> {
  const bin = findRedisServer();
  sweepAbandonedFolders();
  const dir = ownedTempFolder(tmpdir(), DIR_PREFIX);
  const server: Server = { dir, instance: undefined };
  liveServers.add(server);
  onProcessExit(killAllSync);

  let port = 0;
  try {
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      try {
        server.instance = await launch(bin, port, dir);
        break;
      } catch (err) {
        // Someone grabbed the port between freePort() and the bind: try another one.
        if (attempt < 5 && (err as { portInUse?: boolean }).portInUse) continue;
        throw err;
      }
    }
  } catch (err) {
    liveServers.delete(server);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  let stopped = false;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      if (stopped) return;
      stopped = true;
      liveServers.delete(server);
      const instance = server.instance;
      server.instance = undefined;
      try {
        if (instance) await kill(instance);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    async pause() {
      if (stopped) throw new Error("pause() called after stop()");
      const instance = server.instance;
      server.instance = undefined;
      if (instance) await kill(instance);
    },
    async resume() {
      if (stopped) throw new Error("resume() called after stop()");
      if (server.instance) return;
      try {
        server.instance = await launch(bin, port, dir);
      } catch (err) {
        throw new Error(`could not restart redis-server on port ${port}: ${(err as Error).message}`);
      }
    },
  };
}

/** Spawns redis-server on `port` and resolves once it answers with its own process id. */
async function launch(bin: string, port: number, dir: string): Promise<Instance> {
  const args = [
    "--port", String(port),
    "--bind", "127.0.0.1",
    "--save", "",
    "--appendonly", "no",
    "--daemonize", "no",
    "--dir", dir,
    "--logfile", "",
    "--loglevel", "warning",
  ];
  // Let the kernel kill redis-server if we die without cleaning up (setpriv execs, so the pid stays the same).
  const setpriv = process.platform === "linux" ? onPath("setpriv") : undefined;
  const [file, argv] = setpriv ? [setpriv, ["--pdeathsig", "KILL", "--", bin, ...args]] : [bin, args];
  const child = spawn(file, argv, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });

  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-8000);
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  let exitInfo: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exitInfo = signal ? `killed by ${signal}` : `exit code ${code}`;
      resolve();
    });
    child.once("error", (err) => {
      exitInfo = err.message;
      resolve();
    });
  });
  const instance: Instance = { child, exited, output: () => output };
  // A forgotten stop() must not keep the test process alive; the exit handler still kills the server.
  child.unref();
  (child.stdout as unknown as { unref?: () => void }).unref?.();
  (child.stderr as unknown as { unref?: () => void }).unref?.();

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exitInfo !== undefined) {
      const error = new Error(`redis-server did not start (${exitInfo})${output.trim() ? `:\n${output.trim()}` : ""}`);
      (error as { portInUse?: boolean }).portInUse = /address already in use/i.test(output);
      throw error;
    }
    const pid = await serverPid(port).catch(() => undefined);
    if (pid === child.pid) return instance;
    if (pid !== undefined && exitInfo === undefined && pid !== child.pid) {
      // Another server answers on this port: ours will fail to bind and exit. Wait for that.
      await Promise.race([exited, sleep(2000)]);
      if (exitInfo === undefined) {
        await kill(instance);
        throw Object.assign(new Error(`port ${port} is used by another redis-server`), { portInUse: true });
      }
      continue;
    }
    if (Date.now() > deadline) {
      await kill(instance);
      throw new Error(`redis-server did not answer on port ${port} within ${START_TIMEOUT_MS} ms${output.trim() ? `:\n${output.trim()}` : ""}`);
    }
    await sleep(20);
  }
}

async function kill(instance: Instance): Promise<void> {
  const { child, exited } = instance;
  if (child.exitCode === null && child.signalCode === null) {
    child.ref(); // keep the event loop alive until the exit is reported
    child.kill("SIGKILL");
    await exited;
  }
}

/** `INFO server` over a raw socket; resolves with the answering server's process id. */
function serverPid(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let data = "";
    const done = (err: Error | undefined, pid?: number) => {
      socket.destroy();
      if (err) reject(err);
      else resolve(pid!);
    };
    socket.setTimeout(1000, () => done(new Error("timeout")));
    socket.once("error", (err) => done(err));
    socket.once("close", () => done(new Error("connection closed")));
    socket.once("connect", () => socket.write("INFO server\r\n"));
    socket.on("data", (chunk) => {
      data += chunk.toString("utf8");
      if (data.startsWith("-")) return done(new Error(data.trim())); // e.g. -LOADING
      const header = /^\$(\d+)\r\n/.exec(data);
      if (!header) return;
      if (Buffer.byteLength(data) < header[0].length + Number(header[1])) return;
      const pid = /process_id:(\d+)/.exec(data);
      if (pid) done(undefined, Number(pid[1]));
      else done(new Error("no process_id in INFO reply"));
    });
  });
}

// ---------------------------------------------------------------------------------------------------------------

function killAllSync(): void {
  for (const server of [...liveServers]) {
    liveServers.delete(server);
    bestEffort(() => server.instance?.child.kill("SIGKILL"));
    removeFolderSync(server.dir);
  }
}

/** Removes temp folders left by test processes that died without cleaning up (their servers died with them). */
function sweepAbandonedFolders(): void {
  for (const dir of abandonedFolders(tmpdir(), DIR_PREFIX)) removeFolderSync(dir);
}


function findRedisServer(): string {
  const fromEnv = process.env.REDIS_SERVER_BIN;
  if (fromEnv) {
    if (!isExecutable(fromEnv)) throw new Error(`REDIS_SERVER_BIN=${fromEnv} is not an executable file`);
    return fromEnv;
  }
  const found = onPath("redis-server");
  if (!found) throw new Error(NOT_FOUND);
  return found;
}




