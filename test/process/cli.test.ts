import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { runCli, startGatewayProcess } from "../support/process.ts";

describe("operator CLI", () => {
  let database: TestDatabase;
  let merchantId: number;
  let testKey: string;
  let extraKey: string;

  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database?.drop());

  it("merchant create prints one JSON object with the merchant and both keys", async () => {
    const { code, output } = await runCli(["merchant", "create", "--name", "Acme", "--email", "ops@acme.test"], database.env);
    expect(code).toBe(0);
    const parsed = JSON.parse(output.trim());
    expect(Object.keys(parsed)).toEqual(["merchant", "keys"]);
    expect(parsed.merchant).toEqual({ id: expect.any(Number), name: "Acme" });
    expect(parsed.keys.test).toMatch(/^sk_test_/);
    expect(parsed.keys.live).toMatch(/^sk_live_/);
    merchantId = parsed.merchant.id;
    testKey = parsed.keys.test;
  });

  it("refuses a duplicate e-mail and bad input with one line and a non-zero exit", async () => {
    const dup = await runCli(["merchant", "create", "--name", "Again", "--email", "ops@acme.test"], database.env);
    expect(dup.code).toBe(1);
    expect(dup.output.trim()).toBe("A merchant with email ops@acme.test already exists");
    const bad = await runCli(["merchant", "create", "--name", "X", "--email", "not-an-email"], database.env);
    expect(bad.code).toBe(1);
    expect(bad.output).toMatch(/^email: must be a valid e-mail address/);
    const missing = await runCli(["merchant", "create", "--name", "X"], database.env);
    expect(missing.code).toBe(2);
    expect(missing.output).toMatch(/--email is required/);
  });

  it("merchant list shows key prefixes, never whole keys", async () => {
    const { code, output } = await runCli(["merchant", "list"], database.env);
    expect(code).toBe(0);
    const { merchants } = JSON.parse(output.trim());
    expect(merchants).toHaveLength(1);
    expect(merchants[0]).toMatchObject({ id: merchantId, name: "Acme", email: "ops@acme.test" });
    expect(merchants[0].keys.map((k: { mode: string }) => k.mode).sort()).toEqual(["live", "test"]);
    expect(output).not.toContain(testKey);
    expect(testKey.startsWith(merchants[0].keys.find((k: { mode: string }) => k.mode === "test").prefix)).toBe(true);
  });

  it("key create issues another key for the merchant", async () => {
    const { code, output } = await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "test"], database.env);
    expect(code).toBe(0);
    const parsed = JSON.parse(output.trim());
    expect(parsed).toMatchObject({ merchant_id: merchantId, mode: "test", role: "owner" });
    expect(parsed.key.startsWith(parsed.prefix)).toBe(true);
    extraKey = parsed.key;
    // A key may be given a lesser role: a viewer key made here reads only (the authorization table).
    const viewer = await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "test", "--role", "viewer"], database.env);
    expect(viewer.code, viewer.output).toBe(0);
    expect(JSON.parse(viewer.output.trim())).toMatchObject({ mode: "test", role: "viewer" });
    const badRole = await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "test", "--role", "admin"], database.env);
    expect(badRole.code).toBe(2);
    const unknown = await runCli(["key", "create", "--merchant", "9999", "--mode", "test"], database.env);
    expect(unknown.code).toBe(1);
    expect(unknown.output.trim()).toBe("Merchant 9999 not found");
    const badMode = await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "prod"], database.env);
    expect(badMode.code).toBe(2);
  });

  it("user create reads the password from stdin (never an argument); the user signs in; mistakes exit non-zero", async () => {
    const password = "correct horse battery staple";
    const args = ["user", "create", "--merchant", String(merchantId), "--email", "Ops@Acme.test", "--role", "developer", "--password-stdin"];
    const { code, output } = await runCli(args, database.env, `${password}\n`);
    expect(code, output).toBe(0);
    expect(JSON.parse(output.trim())).toEqual({ user: { id: expect.any(Number), email: "ops@acme.test", role: "developer", merchant_id: merchantId } });
    expect(output).not.toContain(password);
    const again = await runCli(args, database.env, password);
    expect(again.code).toBe(1);
    expect(again.output.trim()).toBe("This merchant already has a user with e-mail ops@acme.test");
    const noTerminal = await runCli(args.slice(0, -1), database.env);
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.output).toContain("--password-stdin");
    const badRole = await runCli(["user", "create", "--merchant", String(merchantId), "--email", "x@acme.test", "--role", "admin", "--password-stdin"], database.env, password);
    expect(badRole.code).toBe(1);
    expect(badRole.output).toContain("role");
    const server = await startGatewayProcess(database.env);
    try {
      const login = await apiClient(server.url).post("/v1/auth/login", { email: "ops@acme.test", password });
      expect(login.status, login.text).toBe(200);
      expect(login.body.data.user).toMatchObject({ email: "ops@acme.test", role: "developer", merchant_id: merchantId });
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  }); // four CLI processes and a gateway, each a cold start: the suite's TEST_TIMEOUT_MS (test/support/timing.ts) allows for a loaded machine

  it("key revoke <prefix> makes that key fail with 401 while the others keep working", async () => {
    const prefix = extraKey.slice(0, "sk_test_".length + 8);
    const { code, output } = await runCli(["key", "revoke", prefix], database.env);
    expect(code).toBe(0);
    expect(JSON.parse(output.trim())).toEqual({ revoked: prefix, merchant_id: merchantId, mode: "test" });
    const server = await startGatewayProcess(database.env);
    try {
      expect((await apiClient(server.url, extraKey).get("/v1/status")).status).toBe(401);
      expect((await apiClient(server.url, testKey).get("/v1/status")).status).toBe(200);
      // A database that already has merchants gets no demo merchant.
      expect(server.output()).not.toMatch(/Test API key/);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });

  it("jobs shows the queue by kind and status, with the errors of jobs that gave up", async () => {
    // Seeded directly: a failed delivery and two due reconciliations, as a stuck queue would look.
    const { openDatabase } = await import("../../src/db/database.ts");
    const { createLogger } = await import("../../src/logger.ts");
    const db = await openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir }, createLogger("silent"));
    try {
      await db.prisma.job.createMany({
        data: [
          { kind: "transaction.reconcile", payload: { transactionId: 1 }, runAt: new Date("2030-01-01T00:00:00Z") },
          { kind: "transaction.reconcile", payload: { transactionId: 2 }, runAt: new Date("2030-01-02T00:00:00Z") },
          { kind: "webhook.deliver", payload: { deliveryId: 1 }, status: "failed", attempts: 8, lastError: "HTTP 500" },
        ],
      });
    } finally {
      await db.close();
    }
    const { code, output } = await runCli(["jobs"], database.env);
    expect(code).toBe(0);
    const parsed = JSON.parse(output.trim());
    // The seeded kinds (a gateway started on this database earlier has queued its daily reconciliation schedule too).
    const seeded = (parsed.jobs as { kind: string }[]).filter((j) => j.kind === "transaction.reconcile" || j.kind === "webhook.deliver");
    expect(seeded).toEqual([
      { kind: "transaction.reconcile", status: "queued", count: 2, earliest_run_at: "2030-01-01T00:00:00.000Z" },
      { kind: "webhook.deliver", status: "failed", count: 1, earliest_run_at: expect.any(String) },
    ]);
    expect(parsed.recent_failures).toEqual([{ id: expect.any(String), kind: "webhook.deliver", attempts: 8, last_error: "HTTP 500", failed_at: expect.any(String) }]);
  });

  it("--help prints usage (for the CLI and for one command) on stdout and exits 0; an unknown option exits 2 in one line", async () => {
    const all = await runCli(["--help"], database.env);
    expect(all.code).toBe(0);
    expect(all.output).toMatch(/^Usage: npm run cli -- <command> \[--help\]\n/);
    for (const command of ["merchant create", "user create", "demo", "webhooks listen", "jobs"]) expect(all.output).toContain(`\n  ${command}`);
    const one = await runCli(["user", "create", "--help"], database.env);
    expect(one.code).toBe(0);
    expect(one.output).toContain("Usage: npm run cli -- user create --merchant <id> --email <email> --role owner|developer|viewer [--password-stdin]\nAdds a dashboard user.");
    // Every command explains itself and each of its flags.
    const flagsOf: Record<string, string[]> = {
      "merchant create": ["--name <name>", "--email <email>", "--currency <code>"],
      "merchant list": [],
      "key create": ["--merchant <id>", "--mode test|live", "--role owner|developer|viewer"],
      "key revoke": ["<prefix>"],
      "user create": ["--merchant <id>", "--email <email>", "--role owner|developer|viewer", "--password-stdin"],
      demo: [],
      "db deploy": [],
      jobs: [],
      "webhooks listen": ["--forward-to <url>", "--key <sk_test_...>", "--url <url>"],
      "webhooks trigger": ["<event>", "--key <sk_test_...>", "--url <url>", "--timeout <seconds>"],
    };
    for (const [command, flags] of Object.entries(flagsOf)) {
      const help = await runCli([...command.split(" "), "--help"], database.env);
      expect(help.code, command).toBe(0);
      expect(help.output, command).toMatch(new RegExp(`^Usage: npm run cli -- ${command}( .*)?\\n[A-Z].+\\nFlags:\\n`));
      for (const flag of [...flags, "--help, -h"]) expect(help.output, command).toMatch(new RegExp(`\\n  ${flag.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} +\\S`));
    }
    // The old name of webhooks trigger still works, and explains the same command.
    expect((await runCli(["trigger", "-h"], database.env)).output).toMatch(/^Usage: npm run cli -- webhooks trigger </);
    const bogus = await runCli(["merchant", "list", "--bogus"], database.env);
    expect(bogus.code).toBe(2);
    expect(bogus.output.split("\n")[0]).toBe("Unknown option '--bogus'");
  });

  it("demo without a demo merchant says so and exits 1", async () => {
    const { code, output } = await runCli(["demo"], database.env);
    expect(code).toBe(1);
    expect(output.trim()).toBe("No demo merchant in this database: it is created at the first start against an empty database");
  });

  it("unknown commands print usage and exit 2", async () => {
    const { code, output } = await runCli(["merchant", "delete"], database.env);
    expect(code).toBe(2);
    expect(output).toMatch(/Unknown command: merchant delete/);
    expect(output).toMatch(/Usage: npm run cli/);
  });
});
