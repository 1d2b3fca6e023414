import { defineConfig } from "vitest/config";
import { EVENTUALLY_MS, HOOK_TIMEOUT_MS, TEST_TIMEOUT_MS } from "./support/timing.ts";

/**
 * Four projects: `unit` (no server), the integration suite twice, once on the embedded PGlite and once on a real
 * PostgreSQL that test/support/postgres-global-setup.ts starts from the machine's binaries, and `failover`, the
 * database drills (test/failover/), which start PostgreSQL clusters of their own.
 */
const integration = ["test/integration/**/*.test.ts", "test/process/**/*.test.ts"];
/**
 * Process tests that run on PostgreSQL only: the kill -9 drills of each money flow but the core's (payments-crash
 * keeps PGlite, the bare machine's store) and the CLI's commands (cli-handoff and cli-setup-terminal keep the
 * CLI on a gateway's PGlite folder). PostgreSQL is what production runs on; on PGlite they repeated the same
 * gateway code at about 37 minutes of worker time (a quarter of the suite's), which CI's 90 minutes cannot spare.
 */
const postgresOnly = [
  "test/process/cli.test.ts",
  "test/process/cli-webhooks.test.ts",
  "test/process/billing-crash.test.ts",
  "test/process/ledger-crash.test.ts",
  "test/process/mpesa-refunds-crash.test.ts",
  "test/process/charges-crash.test.ts",
  "test/process/mail-crash.test.ts",
  "test/process/payouts-crash.test.ts",
  "test/process/paystack-refunds-crash.test.ts",
  "test/process/webhooks-batch-crash.test.ts",
];

export default defineConfig({
  // Pothos loads graphql's CommonJS build; make the tests use that one copy too ("another module or realm").
  resolve: { alias: { graphql: "graphql/index.js" } },
  test: {
    root: new URL("..", import.meta.url).pathname,
    // Generous (test/support/timing.ts): a process test starts child gateways that compile TypeScript, on a CPU shared
    // with 3 other files and whatever else the machine runs. A timeout only guards against a hang.
    testTimeout: TEST_TIMEOUT_MS,
    hookTimeout: HOOK_TIMEOUT_MS,
    teardownTimeout: 60_000,
    // expect.poll waits for an outcome (a page's text, a count) up to this, not vitest's default of one second.
    expect: { poll: { timeout: EVENTUALLY_MS } },
    // No gateway process a test starts may print a key, a webhook secret or a password it set.
    setupFiles: ["test/support/secrets-in-logs.setup.ts"],
    pool: "forks",
    // Most of a test file's time is spent waiting on servers, sockets and Chromium, not on the CPU, so several
    // files run at once even on 2 cores (vitest's default would be cores - 1 = 1). Each file has its own
    // databases, ports and folders. Measured in docs/testing.md.
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
          exclude: postgresOnly,
          env: { TEST_BACKEND: "pglite" },
          globalSetup: ["test/support/pglite-global-setup.ts"],
        },
      },
      {
        extends: true,
        test: { name: "failover", include: ["test/failover/**/*.test.ts"] },
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
