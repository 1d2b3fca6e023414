import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { inject } from "vitest";
import { POSTGRES_TEMPLATE } from "./database-templates.ts";

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

export interface CreateOptions {
  /** No tables at all, for tests of a first start that migrates; by default a copy of the migrated template. */
  empty?: boolean;
}

/**
 * A database of its own for one test file (or gateway): a new PGlite folder, or a new database on the suite's
 * server. Both start as a copy of the migrated template the project's global setup built (see database-templates.ts).
 */
export async function createTestDatabase(options: CreateOptions = {}): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-test-"));
  const encryptionKeyHex = randomBytes(32).toString("hex");
  if (currentBackend() === "pglite") {
    if (!options.empty) cpSync(inject("pgliteTemplateDir"), join(dataDir, "pglite"), { recursive: true });
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
  await admin.query(options.empty ? `CREATE DATABASE "${name}"` : `CREATE DATABASE "${name}" TEMPLATE "${POSTGRES_TEMPLATE}"`);
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
