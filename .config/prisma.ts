import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig } from "prisma/config";

// Prisma's CLI downloads a native schema engine before `generate` unless this variable points at a file.
// `generate` only checks that the file exists (migrations run through our own runner, see src/db/migrate.ts),
// so on machines without Prisma's binary host we point it at this config file itself.
if (!process.env.PRISMA_SCHEMA_ENGINE_BINARY && !process.env.PRISMA_DOWNLOAD_ENGINES) {
  const self = fileURLToPath(import.meta.url);
  if (existsSync(self)) process.env.PRISMA_SCHEMA_ENGINE_BINARY = self;
}

export default defineConfig({
  schema: "../prisma/schema.prisma",
  migrations: { path: "../prisma/migrations" },
});
