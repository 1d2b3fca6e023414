import type { CodegenConfig } from "@graphql-codegen/cli";

/**
 * Typed documents for the tests: `graphql(...)` calls in test/ are checked against schema.graphql
 * and get their result and variable types from test/gql/. Run by `npm test` (pretest) and `npm run codegen`.
 */
const config: CodegenConfig = {
  schema: "schema.graphql",
  documents: ["test/**/*.ts", "!test/gql/**"],
  ignoreNoDocuments: true,
  importExtension: ".ts",
  generates: {
    "test/gql/": {
      preset: "client",
      presetConfig: { fragmentMasking: false },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { DateTime: "string", BigInt: "number" },
      },
    },
  },
};

export default config;
