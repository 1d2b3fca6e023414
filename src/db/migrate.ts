import { createHash, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Applies prisma/migrations/<name>/migration.sql in order and records them in Prisma's own
 * _prisma_migrations table (checksum = sha256 of the file), so the official `prisma migrate deploy`
 * elsewhere sees the same history. Runs on one dedicated connection under an advisory lock, so
 * several instances starting together apply each migration once.
 */
export interface SqlConnection {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Runs a multi-statement script as one simple-protocol query. */
  exec(script: string): Promise<void>;
}

export const migrationsDir = fileURLToPath(new URL("../../prisma/migrations", import.meta.url));

/** Arbitrary constant shared by every gateway instance: "pgw" migrations. */
const MIGRATION_LOCK_ID = 0x70677701;

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export function readMigrations(dir = migrationsDir): Migration[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(dir, d.name, "migration.sql")))
    .map((d) => d.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    });
}

export class MigrationError extends Error {
  override name = "MigrationError";
}

export async function applyMigrations(conn: SqlConnection, migrations = readMigrations()): Promise<string[]> {
  // The lock first: two instances starting at once on an empty database would otherwise both create the
  // history table, and CREATE TABLE IF NOT EXISTS is not safe against that (pg_type's unique index fails).
  await conn.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_ID]);
  try {
    return await applyLocked(conn, migrations);
  } finally {
    await conn.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_ID]);
  }
}

async function applyLocked(conn: SqlConnection, migrations: ReturnType<typeof readMigrations>): Promise<string[]> {
  await conn.exec(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id" VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum" VARCHAR(64) NOT NULL,
    "finished_at" TIMESTAMPTZ,
    "migration_name" VARCHAR(255) NOT NULL,
    "logs" TEXT,
    "rolled_back_at" TIMESTAMPTZ,
    "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count" INTEGER NOT NULL DEFAULT 0
  )`);
  const rows = await conn.query<{ migration_name: string; checksum: string; finished_at: unknown }>(
    `SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" WHERE rolled_back_at IS NULL`,
  );
  const applied = new Map(rows.map((r) => [r.migration_name, r]));
  const done: string[] = [];
  for (const migration of migrations) {
    const row = applied.get(migration.name);
    if (row) {
      if (row.finished_at === null) {
        throw new MigrationError(`Migration ${migration.name} failed earlier and must be resolved by hand`);
      }
      if (row.checksum !== migration.checksum) {
        throw new MigrationError(`Migration ${migration.name} was modified after it was applied`);
      }
      continue;
    }
    await conn.query("BEGIN");
    try {
      await conn.exec(migration.sql);
      await conn.query(
        `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
         VALUES ($1, $2, $3, now(), now(), 1)`,
        [randomUUID(), migration.checksum, migration.name],
      );
      await conn.query("COMMIT");
    } catch (error) {
      await conn.query("ROLLBACK");
      throw new MigrationError(`Migration ${migration.name} failed: ${(error as Error).message}`);
    }
    done.push(migration.name);
  }
  return done;
}
