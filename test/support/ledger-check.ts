import type { TestDatabase } from "./backend.ts";
import type { TestGateway } from "./gateway.ts";
import { runCli } from "./process.ts";

/**
 * `npm run cli -- ledger check`, the real CLI as its own process, against a test database. On PostgreSQL the CLI
 * connects with DATABASE_URL; on PGlite a running gateway (in this process or another) holds DATA_DIR, so the CLI
 * hands the command to it over DATA_DIR/cli.sock (src/cli/handoff.ts) and the gateway runs the same check on its
 * database: one path for both backends, the CLI's own.
 */
export async function runLedgerCheck(database: Pick<TestDatabase, "env">): Promise<{ code: number | string; output: string }> {
  return runCli(["ledger", "check"], database.env);
}

/**
 * For the afterAll of a money test file, registered after the hook that closes the gateway (vitest runs afterAll
 * hooks in reverse order, so this one runs first): fails the file when the ledger is not clean. A failing hook
 * stops the hooks after it, so the gateway (and its database) is closed here before the failure is thrown.
 */
export async function expectCleanLedger(gw: TestGateway | undefined): Promise<void> {
  if (!gw) return;
  const { code, output } = await runLedgerCheck(gw.database);
  if (code === 0) return;
  await gw.close().catch(() => undefined);
  throw new Error(`npm run cli -- ledger check exited ${code}:\n${output}`);
}
