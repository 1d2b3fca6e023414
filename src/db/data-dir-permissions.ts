import { chmodSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * DATA_DIR holds the embedded database (users' password hashes, provider credentials), its encryption key and
 * the CLI's socket: only the user running the gateway may read or change any of it. Directories are 0700 and
 * files 0600 (owner bits kept, group and other bits removed).
 */
const OWNER_ONLY_UMASK = 0o077;

/** What the gateway keeps in DATA_DIR; anything else an operator put there is shielded by DATA_DIR's own 0700. */
const GATEWAY_ENTRIES = ["pglite", "encryption.key", "gateway.pid", "cli.sock"];

/**
 * Before anything in DATA_DIR is opened: a umask so that every file and directory this process creates from now on
 * is owner-only, DATA_DIR created 0700, and an existing tree that is more open corrected. Answers how many entries
 * were corrected.
 */
export function makeDataDirPrivate(dataDir: string): number {
  process.umask(process.umask() | OWNER_ONLY_UMASK);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  return restrictDataDir(dataDir);
}

/**
 * Removes group and other permissions from DATA_DIR and the gateway's entries in it, walking the database folder
 * without recursion; symbolic links are left alone (chmod would follow them out of DATA_DIR). PGlite writes some
 * files with modes of its own (0666 on its first start, whatever the umask), so this runs again once it is open.
 */
export function restrictDataDir(dataDir: string): number {
  let corrected = restrict(dataDir) ? 1 : 0;
  const pending = GATEWAY_ENTRIES.map((name) => join(dataDir, name));
  while (pending.length > 0) {
    const path = pending.pop()!;
    let isDirectory: boolean;
    try {
      const stat = lstatSync(path);
      if (stat.isSymbolicLink()) continue;
      isDirectory = stat.isDirectory();
      if (restrict(path, stat.mode)) corrected++;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue; // not created yet, or gone meanwhile
      throw error;
    }
    if (isDirectory) for (const name of readdirSync(path)) pending.push(join(path, name));
  }
  return corrected;
}

function restrict(path: string, mode = lstatSync(path).mode): boolean {
  if ((mode & 0o077) === 0) return false;
  chmodSync(path, mode & 0o700);
  return true;
}
