import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { schemaFile } from "../../src/app/print-schema.ts";
import { printSortedSchema } from "../../src/app/schema.ts";

describe("schema.graphql", () => {
  it("matches the schema printed from the Pothos builder (run `npm run schema:print` after changing types)", () => {
    expect(readFileSync(schemaFile, "utf8")).toBe(printSortedSchema());
  });
});
