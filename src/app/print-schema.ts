import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { printSortedSchema } from "./schema.ts";

/** npm run schema:print — rewrites schema.graphql from the Pothos builder. */
export const schemaFile = fileURLToPath(new URL("../../schema.graphql", import.meta.url));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(schemaFile, printSortedSchema());
  console.log(`wrote ${schemaFile}`);
}
