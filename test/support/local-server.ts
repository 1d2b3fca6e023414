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

export function freePort(): Promise<number> {
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
