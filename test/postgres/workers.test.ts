import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { runEntry, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { until } from "../support/wait.ts";

/**
 * WORKERS=2: two gateway processes behind one port (node:cluster, src/cluster.ts), sharing limits through
 * Redis; a worker that dies is started again; SIGTERM drains both. (PostgreSQL only: the embedded database
 * cannot be shared between processes, which the first test shows the gateway refusing.)
 */

/** The drain in which the test sees both workers answer 503: a few requests, each of which may take seconds when busy. */
const DRAIN_DELAY_MS = 10_000;

/** A GET on a connection of its own, so the cluster's round robin spreads them over the workers. */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { agent: false, headers }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    })
      .on("error", reject)
      .end();
  });
}

/** Which workers wrote a "request completed" line for `route` so far. */
function workersServing(output: string, route: string): Set<number> {
  const workers = new Set<number>();
  for (const line of output.split("\n")) {
    if (!line.startsWith("{") || !line.includes('"request completed"')) continue;
    const entry = JSON.parse(line) as { worker?: number; route?: string };
    if (entry.route === route && entry.worker !== undefined) workers.add(entry.worker);
  }
  return workers;
}

describe("WORKERS", () => {
  it("WORKERS > 1 stops at start without DATABASE_URL (PGlite is one process's), and without REDIS_URL", async () => {
    const pglite = runEntry("src/main.ts", [], { WORKERS: "2", PORT: "0", DATA_DIR: "/nonexistent-never-created" });
    expect(await pglite.exited).toBe(1);
    expect(pglite.output()).toContain("WORKERS=2 needs DATABASE_URL: the embedded PGlite database belongs to one process and cannot be shared between workers");
    const noRedis = runEntry("src/main.ts", [], { WORKERS: "auto", PORT: "0", DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", ENCRYPTION_KEY: "a".repeat(64) });
    const code = await noRedis.exited;
    // "auto" is one per core: on a one-core machine that is a single process, which needs neither.
    if (Number(execFileSync("nproc", { encoding: "utf8" }).trim()) > 1) {
      expect(code).toBe(1);
      expect(noRedis.output()).toContain("WORKERS=auto needs REDIS_URL");
    }
  });

  describe("two workers on PostgreSQL and Redis", () => {
    let database: TestDatabase;
    let redis: RedisServer;
    let gateway: StartedGatewayProcess;
    let apiKey: string;

    beforeAll(async () => {
      database = await createTestDatabase({ empty: true });
      redis = await startRedis();
      gateway = await startGatewayProcess({
        ...database.env,
        ENCRYPTION_KEY: database.encryptionKeyHex,
        REDIS_URL: redis.url,
        WORKERS: "2",
        RATE_LIMIT_PER_MINUTE: "12",
        // Long enough to see both workers answer 503 on a busy machine: once the port closes, a connection the
        // kernel accepted but whose request was not read yet is reset (the balancer stopped sending before that).
        SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
        SHUTDOWN_TIMEOUT_MS: String(4 * DRAIN_DELAY_MS),
      });
      await gateway.waitFor(/"all gateway workers listening"/);
      [, apiKey] = (await gateway.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/)) as unknown as [string, string];
    });

    afterAll(async () => {
      if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) {
        for (const pid of childPids(gateway.child.pid!)) process.kill(pid, "SIGKILL");
        gateway.child.kill("SIGKILL");
        await gateway.exited;
      }
      await redis?.stop();
      await database?.drop();
    });

    /** The primary's worker processes: its children but tsx's esbuild service, which the primary may also run. */
    function childPids(pid: number): number[] {
      try {
        const children = execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" }).trim().split("\n").filter(Boolean).map(Number);
        return children.filter((child) => {
          try {
            return !readFileSync(`/proc/${child}/cmdline`, "utf8").includes("esbuild");
          } catch {
            return false; // gone meanwhile
          }
        });
      } catch {
        return [];
      }
    }

    it("one demo merchant, both workers serve the port, and the per-key rate limit is exact across them", async () => {
      expect(gateway.output().match(/Test API key/g)).toHaveLength(1);
      expect(childPids(gateway.child.pid!)).toHaveLength(2);
      const answers = [];
      for (let i = 0; i < 16; i++) answers.push(await get(`${gateway.url}/v1/status`, { "x-api-key": apiKey }));
      expect(answers.filter((a) => a.status === 200)).toHaveLength(12);
      expect(answers.filter((a) => a.status === 429)).toHaveLength(4);
      await until(() => workersServing(gateway.output(), "/v1/status"), (workers) => workers.size === 2);
    });

    it("a worker killed with -9 is started again while the other keeps serving", async () => {
      const [victim] = childPids(gateway.child.pid!);
      process.kill(victim!, "SIGKILL");
      await gateway.waitFor(/"gateway worker died; starting it again"/);
      expect((await get(`${gateway.url}/health`)).status).toBe(200);
      await until(() => childPids(gateway.child.pid!), (pids) => pids.length === 2 && !pids.includes(victim!), 30_000);
      const listening = () => gateway.output().split("\n").filter((l) => l.includes('"payment gateway listening"')).length;
      await until(listening, (n) => n === 3, 60_000);
    });

    it("SIGTERM drains every worker: /ready 503 meanwhile, then exit 0", async () => {
      gateway.child.kill("SIGTERM");
      // Every worker answers 503 (new connections go round robin over both).
      // A connection can be reset while a worker closes its idle ones: that answer does not count, ask again.
      const ready = () => get(`${gateway.url}/ready`).catch(() => ({ status: 0, body: "{}" }));
      const readies = await until(
        async () => [await ready(), await ready()],
        (answers) => answers.every((a) => a.status === 503),
        DRAIN_DELAY_MS,
      );
      expect(readies.map((r) => JSON.parse(r.body).message)).toEqual(["Shutting down", "Shutting down"]);
      // Exit 0: within SHUTDOWN_TIMEOUT_MS, which would have cut the workers off (exit 1).
      expect(await gateway.exited).toBe(0);
      expect(gateway.output().match(/"shutdown complete"/g)).toHaveLength(2);
      expect(gateway.output()).toMatch(/"all gateway workers stopped"/);
    });
  });
});
