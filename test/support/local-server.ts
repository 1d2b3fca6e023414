import { accessSync, constants, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter, join } from "node:path";

/** Small process and port helpers shared by the throwaway test servers. */

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * A port no one listens on, for a test server to bind next. It is drawn below the kernel's ephemeral range (where
 * port 0 would land): a port from that range can be taken meanwhile as the local end of any outgoing connection,
 * and a long-lived one (Patroni's watch on etcd, a pooled client) then keeps it taken. That happened in CI: the
 * standby's port, picked before the 90 s bootstrap of the primary, was in use for as long as the drill waited.
 */
export async function freePort(): Promise<number> {
  const [low, high] = unassignedRange();
  for (let attempt = 0; attempt < 50 && high > low; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (handedOut.has(port)) continue;
    if (await canListen(port)) {
      handedOut.add(port);
      return port;
    }
  }
  return anyPort();
}

/** Ports this process handed out already: a test that asks for several gets different ones. */
const handedOut = new Set<number>();

/** [10000, the first ephemeral port), or an empty range where the kernel's ephemeral range starts lower. */
function unassignedRange(): [number, number] {
  let ephemeralLow = 32768;
  try {
    ephemeralLow = Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]!, 10) || ephemeralLow;
  } catch {
    // not Linux: the common default
  }
  return [10_000, ephemeralLow];
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

function anyPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error("could not find a free port"))));
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The file in a test server's temp folder that names the process owning it. */
const OWNER_FILE = "owner.pid";

/** A new temp folder `<base>/<prefix>XXXXXX` for a test server, marked as this process's (see abandonedFolders). */
export function ownedTempFolder(base: string, prefix: string): string {
  const dir = mkdtempSync(join(base, prefix));
  writeFileSync(join(dir, OWNER_FILE), `${process.pid}\n`);
  return dir;
}

/**
 * The `<base>/<prefix>*` folders whose owning test process died without cleaning up (e.g. killed with SIGKILL);
 * a folder with no readable owner (not ours, or still being set up) is passed over, as is an unreadable base.
 */
export function abandonedFolders(base: string, prefix: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(base).filter((e) => e.startsWith(prefix));
  } catch {
    return [];
  }
  return entries
    .map((entry) => join(base, entry))
    .filter((dir) => {
      let owner: number;
      try {
        owner = Number.parseInt(readFileSync(join(dir, OWNER_FILE), "utf8"), 10);
      } catch {
        return false;
      }
      return Number.isInteger(owner) && owner > 0 && !isAlive(owner);
    });
}

/** A cleanup step at exit that may fail (a process already gone, a folder already removed) without stopping the next. */
export function bestEffort(step: () => void): void {
  try {
    step();
  } catch {
    // best effort
  }
}

/** Removes a test server's temp folder and everything in it, best effort. */
export function removeFolderSync(dir: string): void {
  bestEffort(() => rmSync(dir, { recursive: true, force: true }));
}
