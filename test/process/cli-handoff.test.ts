import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, currentBackend, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { runCli, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";

/**
 * The CLI while a gateway runs, both as processes, as an operator follows the first-start banner: on the embedded
 * database the gateway holds DATA_DIR, so the CLI hands its command to it over DATA_DIR/cli.sock; on PostgreSQL
 * the CLI connects on its own and no socket exists.
 */
describe("the CLI while the gateway runs", () => {
  let database: TestDatabase;
  let server: StartedGatewayProcess;
  const socketPath = () => join(database.dataDir, "cli.sock");

  beforeAll(async () => {
    database = await createTestDatabase();
    // On PostgreSQL the CLI revokes in its own process: without Redis the gateway notices when its cache expires.
    server = await startGatewayProcess({ ...database.env, ...(currentBackend() === "postgres" ? { API_KEY_CACHE_TTL_MS: "0" } : {}) });
    // The banner of a first start: the demo merchant exists before the CLI asks for it.
    await server.waitFor(/Lost it\? npm run cli -- demo/);
  });

  afterAll(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill("SIGTERM");
      await server.exited;
    }
    await database?.drop();
  });

  it("demo prints a new test key that the running gateway accepts at once", async () => {
    const { code, output } = await runCli(["demo"], database.env);
    expect(code, output).toBe(0);
    const printed = JSON.parse(output.trim());
    expect(printed).toEqual({ merchant_id: expect.any(Number), mode: "test", prefix: expect.any(String), key: expect.stringMatching(/^sk_test_/) });
    const status = await apiClient(server.url, printed.key).get("/v1/status");
    expect(status.status, status.text).toBe(200);
  });

  it("user create (password on stdin), a failing command and key revoke work too, with the same output and exit codes", async () => {
    const merchants = JSON.parse((await runCli(["merchant", "list"], database.env)).output.trim()).merchants;
    const merchantId = merchants[0].id as number;
    const password = "correct horse battery staple";
    const created = await runCli(["user", "create", "--merchant", String(merchantId), "--email", "ops@demo.test", "--role", "viewer", "--password-stdin"], database.env, password);
    expect(created.code, created.output).toBe(0);
    expect(JSON.parse(created.output.trim())).toEqual({ user: { id: expect.any(Number), email: "ops@demo.test", role: "viewer", merchant_id: merchantId } });
    const login = await apiClient(server.url).post("/v1/auth/login", { email: "ops@demo.test", password });
    expect(login.status, login.text).toBe(200);

    // Errors cross the handoff as they print locally: one line and exit 1, usage mistakes exit 2.
    const unknown = await runCli(["key", "create", "--merchant", "9999", "--mode", "test"], database.env);
    expect(unknown).toEqual({ code: 1, output: "Merchant 9999 not found\n" });
    const badMode = await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "prod"], database.env);
    expect(badMode.code).toBe(2);
    expect(badMode.output).toMatch(/^--mode must be test or live\nUsage: npm run cli/);

    // The gateway revokes with its own key cache, so the key is refused at once.
    const key = JSON.parse((await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "test"], database.env)).output.trim());
    expect((await apiClient(server.url, key.key).get("/v1/status")).status).toBe(200);
    const revoked = await runCli(["key", "revoke", key.prefix], database.env);
    expect(revoked.code, revoked.output).toBe(0);
    expect((await apiClient(server.url, key.key).get("/v1/status")).status).toBe(401);
  });

  it("the socket exists on the embedded database only, is its user's alone (0600) and goes away with the gateway", async () => {
    if (currentBackend() === "postgres") {
      // With DATABASE_URL every process connects to PostgreSQL itself: no socket, and the CLI needs none.
      expect(existsSync(socketPath())).toBe(false);
    } else {
      const stat = statSync(socketPath());
      expect(stat.isSocket()).toBe(true);
      expect(stat.mode & 0o777).toBe(0o600);
    }
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    expect(existsSync(socketPath())).toBe(false);
    // With the gateway gone the CLI opens the database itself, as before.
    const local = await runCli(["jobs"], database.env);
    expect(local.code, local.output).toBe(0);
    expect(JSON.parse(local.output.trim())).toEqual({ jobs: expect.any(Array), recent_failures: expect.any(Array) });
  });
});
