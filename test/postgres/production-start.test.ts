import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { repoRoot, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { LONG_TEST_TIMEOUT_MS } from "../support/timing.ts";

const run = promisify(execFile);

/** Whether a process with this pid still exists (signal 0 checks without sending anything). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The two ways an operator starts the gateway: `npm start`, and the compiled build under a supervisor.
 * In the postgres project only: it rebuilds the one dist/ folder, which two projects must not do at once.
 */
describe("production start", () => {
  let database: TestDatabase;
  const started: StartedGatewayProcess[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    for (const proc of started) proc.child.kill("SIGKILL");
    await database?.drop();
  });

  it("SIGTERM sent to the npm start process alone shuts the gateway down gracefully, leaving no orphan", async () => {
    const npm = await startGatewayProcess(database.env, { command: "npm", args: ["start", "--silent"] });
    started.push(npm);
    expect((await apiClient(npm.url).get("/health")).status).toBe(200);
    // The listening line is written by the gateway itself: its pid, not npm's.
    const [, pid] = await npm.waitFor(/"pid":(\d+)[^\n]*"msg":"payment gateway listening"/);
    expect(Number(pid)).not.toBe(npm.child.pid);

    npm.child.kill("SIGTERM");
    expect(await npm.exited).toBe(0);
    expect(npm.output()).toContain('"msg":"shutdown complete"');
    expect(alive(Number(pid))).toBe(false);
    await expect(fetch(`${npm.url}/health`)).rejects.toThrow();
  });

  it("npm run build compiles to dist/, and node dist/main.js serves the same gateway: migrations, demo key, REST, dashboard", async () => {
    await run("npm", ["run", "build", "--silent"], { cwd: repoRoot, timeout: 300_000 });
    expect(existsSync(`${repoRoot}dist/main.js`)).toBe(true);

    const fresh = await createTestDatabase({ empty: true });
    try {
      const compiled = await startGatewayProcess(fresh.env, { command: process.execPath, args: ["dist/main.js"] });
      started.push(compiled);
      const [, key] = await compiled.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/);
      const status = await apiClient(compiled.url, key).get("/v1/status");
      expect(status.status, status.text).toBe(200);
      expect(status.body.data).toMatchObject({ merchant: { name: "Demo Merchant" }, mode: "test" });

      const initialized = await apiClient(compiled.url, key).post("/api/transactions/initialize", { amount: 2500, email: "prod@example.com" });
      expect(initialized.status, initialized.text).toBe(200);
      const checkout = await fetch(initialized.body.authorization_url.replace(/^https?:\/\/[^/]+/, compiled.url));
      expect(checkout.status).toBe(200);
      const dashboard = await fetch(`${compiled.url}/dashboard`);
      expect(dashboard.status).toBe(200);
      expect(await dashboard.text()).toContain('<div id="app">');
      const asset = (await (await fetch(`${compiled.url}/dashboard`)).text()).match(/\/dashboard\/assets\/app\.js\?v=\w+/)![0];
      expect((await fetch(`${compiled.url}${asset}`)).status).toBe(200);

      compiled.child.kill("SIGTERM");
      expect(await compiled.exited).toBe(0);
    } finally {
      await fresh.drop();
    }
  }, LONG_TEST_TIMEOUT_MS);
});
