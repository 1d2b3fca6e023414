import type { TestProject } from "vitest/node";
import { buildPgliteTemplate } from "./database-templates.ts";

declare module "vitest" {
  export interface ProvidedContext {
    pgliteTemplateDir: string;
  }
}

/** One migrated PGlite folder for the whole pglite project; each test database starts as a copy of it. */
export default async function setup(project: TestProject) {
  const template = await buildPgliteTemplate();
  project.provide("pgliteTemplateDir", template.dir);
  return () => template.remove();
}
