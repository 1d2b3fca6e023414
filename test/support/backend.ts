import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { inject } from "vitest";

export type TestBackend = "pglite" | "postgres";

export function currentBackend(): TestBackend {
  const backend = process.env.TEST_BACKEND;
  if (backend !== "pglite" && backend !== "postgres") throw new Error("TEST_BACKEND must be pglite or postgres (set by test/vitest.config.ts)");
  return backend;
}

export interface TestDatabase {
  /** Set on PostgreSQL; unset means the embedded PGlite in dataDir. */
  databaseUrl: string | undefined;
  dataDir: string;
  encryptionKeyHex: string;
  /** Environment for a child gateway process using this database. */
  env: Record<string, string>;
  drop(): Promise<void>;
}

/** A fresh, empty database for one test file: a new PGlite folder, or a new database on the suite's server. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-test-"));
  const encryptionKeyHex = randomBytes(32).toString("hex");
  if (currentBackend() === "pglite") {
    return {
      databaseUrl: undefined,
      dataDir,
      encryptionKeyHex,
      env: { DATA_DIR: dataDir },
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const adminUrl = inject("postgresAdminUrl");
  const name = `t_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const databaseUrl = url.toString();
  return {
    databaseUrl,
    dataDir,
    encryptionKeyHex,
    env: { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: encryptionKeyHex, DATA_DIR: dataDir },
    drop: async () => {
      rmSync(dataDir, { recursive: true, force: true });
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await client.end();
    },
  };
}
