import { defineConfig } from "vitest/config";

/**
 * Three projects: `unit` (no server), and the integration suite twice, once on the embedded PGlite and
 * once on a real PostgreSQL that test/support/postgres-global-setup.ts starts from the machine's binaries.
 */
const integration = ["test/integration/**/*.test.ts", "test/process/**/*.test.ts"];

export default defineConfig({
  // Pothos loads graphql's CommonJS build; make the tests use that one copy too ("another module or realm").
  resolve: { alias: { graphql: "graphql/index.js" } },
  test: {
    root: new URL("..", import.meta.url).pathname,
    // Generous: a process test starts child gateways that compile TypeScript, on a CPU shared with 3 other files.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    pool: "forks",
    // Most of a test file's time is spent waiting on servers, sockets and Chromium, not on the CPU, so several
    // files run at once even on 2 cores (vitest's default would be cores - 1 = 1). Each file has its own
    // databases, ports and folders. Measured in README#tests.
    maxWorkers: Number(process.env.TEST_WORKERS ?? 4),
    reporters: ["default", "./test/support/slowest-files-reporter.ts"],
    // A worker keeps its imported modules from one file to the next (each file still gets its own gateways,
    // databases and ports): importing the gateway afresh per file was a quarter of the suite's CPU time.
    isolate: false,
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/unit/**/*.test.ts", "test/db/**/*.test.ts", "test/support/**/*.test.ts"] },
      },
      {
        extends: true,
        test: {
          name: "pglite",
          include: [...integration, "test/pglite/**/*.test.ts"],
          env: { TEST_BACKEND: "pglite" },
          globalSetup: ["test/support/pglite-global-setup.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "postgres",
          include: [...integration, "test/postgres/**/*.test.ts"],
          env: { TEST_BACKEND: "postgres" },
          globalSetup: ["test/support/postgres-global-setup.ts"],
        },
      },
    ],
  },
});
