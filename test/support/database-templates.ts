import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";
import pg from "pg";
import { applyMigrations, type SqlConnection } from "../../src/db/migrate.ts";

/**
 * Migrated template databases, built once per test run, so that each test gateway starts from a copy
 * instead of running initdb (PGlite: seconds of WebAssembly per start) and every migration again. The
 * gateway still runs its migrations at start; they find everything applied. Tests about a first start
 * on an empty database ask for one (createTestDatabase({ empty: true })).
 */
export const POSTGRES_TEMPLATE = "gateway_template";

/** A PGlite data folder (the `pglite` folder inside a DATA_DIR) with every migration applied; copy it, never open it. */
export async function buildPgliteTemplate(): Promise<{ dir: string; remove(): void }> {
  const root = mkdtempSync(join(tmpdir(), "pglite-template-"));
  const dir = join(root, "pglite");
  const db = await PGlite.create(dir, { extensions: { pg_trgm } });
  try {
    await applyMigrations(connection(async (sql, params) => (await db.query(sql, params)).rows, (script) => db.exec(script)));
  } finally {
    await db.close();
  }
  return { dir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** Creates (or replaces) the migrated template database on the suite's PostgreSQL server. */
export async function buildPostgresTemplate(adminUrl: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${POSTGRES_TEMPLATE}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${POSTGRES_TEMPLATE}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${POSTGRES_TEMPLATE}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await applyMigrations(connection(async (sql, params) => (await client.query(sql, params)).rows, (script) => client.query(script)));
  } finally {
    // CREATE DATABASE ... TEMPLATE refuses a template that has open connections.
    await client.end();
  }
}

function connection(query: (sql: string, params?: unknown[]) => Promise<unknown[]>, exec: (script: string) => Promise<unknown>): SqlConnection {
  return {
    query: async <T,>(sql: string, params?: unknown[]) => (await query(sql, params)) as T[],
    exec: async (script) => {
      await exec(script);
    },
  };
}
