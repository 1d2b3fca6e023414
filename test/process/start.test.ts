import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { runCli, runEntry, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";

describe("npm start on an empty database", () => {
  let database: TestDatabase;
  let first: StartedGatewayProcess | undefined;

  beforeAll(async () => {
    database = await createTestDatabase({ empty: true });
  });
  afterAll(async () => {
    first?.child.kill("SIGKILL");
    await database?.drop();
  });

  it("creates a demo merchant, prints its test key once, and the key works on GraphQL and REST", async () => {
    first = await startGatewayProcess(database.env);
    const [, key] = await first.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/);
    // The key goes to the terminal, never into a log line.
    const logLines = first.output().split("\n").filter((l) => l.startsWith("{"));
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) expect(line).not.toContain(key!);

    const health = await apiClient(first.url).get("/health");
    expect(health.status).toBe(200);
    const viewer = await apiClient(first.url, key).post("/graphql", { query: "{ viewer { name } }" });
    expect(viewer.body).toEqual({ data: { viewer: { name: "Demo Merchant" } } });
    const wrong = await apiClient(first.url, "sk_test_wrongwrongwrongwrongwrongwrong").post("/graphql", { query: "{ viewer { name } }" });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ status: "error", message: "Invalid API key", code: "invalid_api_key" });
    const status = await apiClient(first.url, key).get("/v1/status");
    expect(status.body.data).toMatchObject({ merchant: { name: "Demo Merchant", default_currency: "KES" }, mode: "test" });
  });

  it("prints the demo owner's dashboard password once (never in a log line), and it signs in", async () => {
    const [, email, password] = await first!.waitFor(/Dashboard: \S+\/dashboard {2}e-mail (\S+) {2}password \(shown once\) (\S+)/);
    for (const line of first!.output().split("\n").filter((l) => l.startsWith("{"))) expect(line).not.toContain(password!);
    const login = await apiClient(first!.url).post("/v1/auth/login", { email, password });
    expect(login.status, login.text).toBe(200);
    expect(login.body.data).toMatchObject({ token_type: "Bearer", mode: "test", user: { email: "demo@example.com", role: "owner" } });
    const viewer = await fetch(`${first!.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${login.body.data.access_token}` },
      body: JSON.stringify({ query: "{ viewer { name } currentUser { email role } }" }),
    });
    expect(await viewer.json()).toEqual({ data: { viewer: { name: "Demo Merchant" }, currentUser: { email: "demo@example.com", role: "owner" } } });
  });

  it("shuts down gracefully on SIGTERM: exit code 0 and the database closed", async () => {
    first!.child.kill("SIGTERM");
    expect(await first!.exited).toBe(0);
    expect(first!.output()).toMatch(/shutdown complete/);
    first = undefined;
  });

  it("npm run cli -- demo prints a new working test key for the demo merchant", async () => {
    const { code, output } = await runCli(["demo"], database.env);
    expect(code, output).toBe(0);
    const demo = JSON.parse(output.trim());
    expect(demo).toMatchObject({ mode: "test", key: expect.stringMatching(/^sk_test_/) });
    const server = await startGatewayProcess(database.env);
    try {
      const status = await apiClient(server.url, demo.key).get("/v1/status");
      expect(status.body.data).toMatchObject({ merchant: { id: demo.merchant_id, name: "Demo Merchant" }, mode: "test" });
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });

  it("does not create or print a demo key again on the next start", async () => {
    const second = await startGatewayProcess(database.env);
    try {
      expect(second.output()).not.toMatch(/Test API key/);
      expect((await apiClient(second.url).get("/ready")).status).toBe(200);
    } finally {
      second.child.kill("SIGINT");
      expect(await second.exited).toBe(0);
    }
  });
});

describe("a first start that cannot listen", () => {
  it("creates no demo merchant, so the next start does and prints its key", async () => {
    const database = await createTestDatabase();
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    try {
      const port = String((busy.address() as { port: number }).port);
      const failed = runEntry("src/main.ts", [], { PORT: port, HOST: "127.0.0.1", LOG_LEVEL: "info", ...database.env });
      expect(await failed.exited).toBe(1);
      expect(failed.output()).toContain("EADDRINUSE");
      expect(failed.output()).not.toMatch(/Test API key/);
      const next = await startGatewayProcess(database.env);
      try {
        await next.waitFor(/Test API key \(shown once, keep it\): sk_test_\S+/);
        expect(next.output()).toContain("Lost it? npm run cli -- demo  prints a new one.");
      } finally {
        next.child.kill("SIGTERM");
        await next.exited;
      }
    } finally {
      busy.close();
      await database.drop();
    }
  });
});
