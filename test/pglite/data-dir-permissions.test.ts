import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { apiClient } from "../support/gateway.ts";
import { runCli, startGatewayProcess } from "../support/process.ts";

/**
 * Issue 35 item 5: DATA_DIR (the embedded database, the encryption key, the pid file, the CLI's socket) is
 * owner-only: directories 0700, files 0600, for a new folder and for an existing one that was more open (corrected
 * at start, said in one log line), by the gateway and by the CLI; another local user (`nobody`) can neither list
 * nor read it.
 */
const parents: string[] = [];
afterAll(() => {
  for (const parent of parents) rmSync(parent, { recursive: true, force: true });
});

/** A DATA_DIR path inside a folder every user may enter, so only DATA_DIR's own modes stop another user. */
function openParent(): string {
  const parent = mkdtempSync(join(tmpdir(), "gateway-perms-"));
  chmodSync(parent, 0o755);
  parents.push(parent);
  return parent;
}

/** Every entry under dir (dir included) with its permission bits, symbolic links aside. */
function modes(dir: string): { path: string; mode: number; directory: boolean }[] {
  const found: { path: string; mode: number; directory: boolean }[] = [];
  const pending = [dir];
  while (pending.length) {
    const path = pending.pop()!;
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) continue;
    found.push({ path, mode: stat.mode & 0o777, directory: stat.isDirectory() });
    if (stat.isDirectory()) for (const name of readdirSync(path)) pending.push(join(path, name));
  }
  return found;
}

function expectOwnerOnly(dir: string) {
  const entries = modes(dir);
  expect(entries.length).toBeGreaterThan(100); // the database's files are there
  const open = entries.filter((e) => e.mode !== (e.directory ? 0o700 : 0o600)).map((e) => `${e.path} ${e.mode.toString(8)}`);
  expect(open).toEqual([]);
}

/** Runs a command as the unprivileged user `nobody`: answers whether it succeeded. */
function asNobody(command: string, ...args: string[]): boolean {
  return spawnSync("runuser", ["-u", "nobody", "--", command, ...args], { stdio: "ignore" }).status === 0;
}

// Switching users needs root (the suite's container runs as root); as another user the modes are still checked.
const canSwitchUser = process.getuid?.() === 0;

function expectNobodyLockedOut(dataDir: string) {
  if (!canSwitchUser) return;
  expect(asNobody("ls", dataDir)).toBe(false);
  expect(asNobody("cat", join(dataDir, "encryption.key"))).toBe(false);
  expect(asNobody("cat", join(dataDir, "pglite", "PG_VERSION"))).toBe(false);
  expect(asNobody("ls", join(dataDir, "pglite", "base"))).toBe(false);
}

describe("DATA_DIR permissions", () => {
  it("a new DATA_DIR: created 0700, every file PGlite, the key and the lock write 0600, nobody else can list or read it", async () => {
    const dataDir = join(openParent(), "data");
    const gateway = await startGatewayProcess({ DATA_DIR: dataDir });
    try {
      expect((await apiClient(gateway.url).get("/ready")).status).toBe(200);
      expectOwnerOnly(dataDir);
      expect(lstatSync(join(dataDir, "encryption.key")).mode & 0o777).toBe(0o600);
      expectNobodyLockedOut(dataDir);
      // A new database says nothing about corrections: nothing was open before it.
      expect(gateway.output()).not.toMatch(/were made owner-only/);
    } finally {
      gateway.child.kill("SIGTERM");
      expect(await gateway.exited).toBe(0);
    }
    expectOwnerOnly(dataDir);
  });

  it("an existing tree left 0755/0666 is corrected at start, in one log line with the count", async () => {
    const dataDir = join(openParent(), "data");
    mkdirSync(dataDir);
    cpSync(inject("pgliteTemplateDir"), join(dataDir, "pglite"), { recursive: true });
    writeFileSync(join(dataDir, "encryption.key"), `${"ab".repeat(32)}\n`);
    const before = modes(dataDir);
    for (const entry of before) chmodSync(entry.path, entry.directory ? 0o755 : 0o666);
    if (canSwitchUser) expect(asNobody("cat", join(dataDir, "encryption.key"))).toBe(true); // the test's premise: readable by all

    const gateway = await startGatewayProcess({ DATA_DIR: dataDir });
    try {
      const lines = gateway.output().split("\n").filter((line) => /were made owner-only/.test(line));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 30, corrected: before.length });
      expectOwnerOnly(dataDir);
      expectNobodyLockedOut(dataDir);
    } finally {
      gateway.child.kill("SIGTERM");
      expect(await gateway.exited).toBe(0);
    }
  });

  it("the CLI opening DATA_DIR follows the same rule", async () => {
    const dataDir = join(openParent(), "data");
    mkdirSync(dataDir);
    cpSync(inject("pgliteTemplateDir"), join(dataDir, "pglite"), { recursive: true });
    for (const entry of modes(dataDir)) chmodSync(entry.path, entry.directory ? 0o755 : 0o666);
    const { code, output } = await runCli(["merchant", "create", "--name", "Perms Ltd", "--email", "perms@example.com"], { DATA_DIR: dataDir, ENCRYPTION_KEY: "cd".repeat(32) });
    expect(code, output).toBe(0);
    // Its output stays the command's JSON: the correction is an info line, below the CLI's log level.
    expect(JSON.parse(output.trim())).toMatchObject({ merchant: { name: "Perms Ltd" } });
    expectOwnerOnly(dataDir);
    expectNobodyLockedOut(dataDir);
  });
});
