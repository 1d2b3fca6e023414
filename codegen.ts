import type { CodegenConfig } from "@graphql-codegen/cli";

/**
 * Typed GraphQL documents: every `graphql(...)` call is checked against schema.graphql and gets its result
 * and variable types from the folder generated beside it, so no result shape is written by hand.
 * - test/gql/: the tests' documents (parsed documents, for graphql-ws and the HTTP helpers).
 * - src/rest/gql/: the REST rows' operations and fragments (src/modules/<feature>/routes.ts, src/rest/).
 * - src/dashboard/app/gql/: the dashboard's operations.
 * The two src/ targets emit documents as strings (what the route table and the dashboard send). All three
 * folders are generated, not committed: `npm ci` (postinstall), `npm test` (pretest) and `npm run codegen`.
 */
const config = {
  useTypeImports: true,
  enumsAsTypes: true,
  scalars: { DateTime: "string", BigInt: "number", JSON: "unknown" },
};

const codegen: CodegenConfig = {
  schema: "schema.graphql",
  ignoreNoDocuments: true,
  importExtension: ".ts",
  generates: {
    "test/gql/": {
      documents: ["test/**/*.ts", "!test/gql/**"],
      preset: "client",
      presetConfig: { fragmentMasking: false },
      config: { ...config, scalars: { DateTime: "string", BigInt: "number" } },
    },
    "src/rest/gql/": {
      documents: ["src/modules/*/routes.ts", "src/rest/*.ts"],
      preset: "client",
      presetConfig: { fragmentMasking: false },
      config: { ...config, documentMode: "string" },
    },
    "src/dashboard/app/gql/": {
      documents: ["src/dashboard/app/**/*.{ts,tsx}", "!src/dashboard/app/gql/**"],
      preset: "client",
      presetConfig: { fragmentMasking: false },
      config: { ...config, documentMode: "string" },
    },
  },
};

export default codegen;
