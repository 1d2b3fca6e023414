import type { TestProject } from "vitest/node";
import { startPostgres } from "./postgres.ts";

declare module "vitest" {
  export interface ProvidedContext {
    postgresAdminUrl: string;
  }
}

/** One throwaway PostgreSQL server for the whole postgres project; each test file makes its own database. */
export default async function setup(project: TestProject) {
  const server = await startPostgres();
  project.provide("postgresAdminUrl", server.adminUrl);
  return async () => {
    await server.stop();
  };
}
