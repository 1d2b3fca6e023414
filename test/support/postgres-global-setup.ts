import type { TestProject } from "vitest/node";
import pg from "pg";
import { buildPostgresTemplate, POSTGRES_TEMPLATE } from "./database-templates.ts";
import { startPostgres } from "./postgres.ts";

declare module "vitest" {
  export interface ProvidedContext {
    postgresAdminUrl: string;
  }
}

/**
 * One throwaway PostgreSQL server for the whole postgres project, with a migrated template database;
 * each test file makes its own databases from that template.
 */
export default async function setup(project: TestProject) {
  const server = await startPostgres();
  await buildPostgresTemplate(server.adminUrl);
  project.provide("postgresAdminUrl", server.adminUrl);
  return async () => {
    // A throwaway cluster goes with stop(); on a TEST_DATABASE_URL server, leave nothing behind.
    const admin = new pg.Client({ connectionString: server.adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${POSTGRES_TEMPLATE}" WITH (FORCE)`).finally(() => admin.end());
    await server.stop();
  };
}
