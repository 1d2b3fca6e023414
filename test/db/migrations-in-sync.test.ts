import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createMigration,
  DEFAULT_MIGRATIONS_DIR,
  DEFAULT_SCHEMA_PATH,
  pendingSchemaChanges,
} from "../../prisma/create-migration.ts";

// Each run boots throwaway in-memory PGlite databases (the first one of the process runs initdb).
const TIMEOUT = 60_000;

describe("prisma migrations", () => {
  it(
    "match prisma/schema.prisma (after editing the schema, run `npm run db:migrate:create -- <name>`)",
    async () => {
      const pending = await pendingSchemaChanges();
      expect(pending, `prisma/schema.prisma has changes with no migration:\n${pending}`).toBeNull();
    },
    TIMEOUT,
  );

  it(
    "db:migrate:create writes a new migration for a schema change, and nothing when in sync",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "create-migration-"));
      try {
        const schemaPath = join(dir, "schema.prisma");
        const migrationsDir = join(dir, "migrations");
        writeFileSync(
          schemaPath,
          `${readFileSync(DEFAULT_SCHEMA_PATH, "utf8")}
model Voucher {
  id         Int    @id @default(autoincrement())
  merchantId Int    @map("merchant_id")
  amount     BigInt
  reference  String @unique

  @@map("vouchers")
}
`,
        );
        cpSync(DEFAULT_MIGRATIONS_DIR, migrationsDir, { recursive: true });
        const before = readdirSync(migrationsDir);

        const { created } = await createMigration({
          name: "add_vouchers",
          schemaPath,
          migrationsDir,
          now: new Date(Date.UTC(2099, 0, 2, 3, 4, 5)),
        });

        expect(created).toBe(join(migrationsDir, "20990102030405_add_vouchers"));
        expect(readdirSync(migrationsDir).filter((name) => !before.includes(name))).toEqual([
          "20990102030405_add_vouchers",
        ]);
        const sql = readFileSync(join(created!, "migration.sql"), "utf8");
        expect(sql).toContain(`CREATE TABLE "vouchers"`);
        expect(sql).toContain(`CREATE UNIQUE INDEX "vouchers_reference_key"`);
        // Only the new model: the existing tables come from the copied migrations.
        expect(sql).not.toContain(`CREATE TABLE "merchants"`);
        expect(readFileSync(join(migrationsDir, "migration_lock.toml"), "utf8")).toContain(`provider = "postgresql"`);

        const again = await createMigration({ name: "add_vouchers_again", schemaPath, migrationsDir });
        expect(again.created).toBeNull();
        expect(readdirSync(migrationsDir).filter((name) => !before.includes(name))).toHaveLength(1);
        expect(existsSync(join(migrationsDir, "20990102030405_add_vouchers", "migration.sql"))).toBe(true);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    TIMEOUT,
  );

  it("rejects migration names that are not letters, digits and underscores", async () => {
    await expect(createMigration({ name: "add-payouts" })).rejects.toThrow(/Invalid migration name/);
    await expect(createMigration({ name: "" })).rejects.toThrow(/Invalid migration name/);
  });
});
