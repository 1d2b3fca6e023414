import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startPostgres, type PostgresServer } from "./postgres.ts";
import { startRedis, type RedisServer } from "./redis.ts";
import { EVENTUALLY_MS } from "./timing.ts";

const START_TIMEOUT = 60_000;

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

/** Resolves true if something accepts TCP connections on 127.0.0.1:port. */
function isListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

describe("startPostgres", () => {
  let server: PostgresServer;

  beforeAll(async () => {
    server = await startPostgres();
  }, START_TIMEOUT);

  afterAll(async () => {
    await server?.stop();
  }, START_TIMEOUT);

  it("answers queries on the admin URL", async () => {
    const [row] = await query<{ one: number; encoding: string }>(
      server.adminUrl,
      "SELECT 1 AS one, pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = current_database()",
    );
    expect(row).toEqual({ one: 1, encoding: "UTF8" });
  });

  it("creates distinct, empty databases", async () => {
    const a = await server.createDatabase();
    const b = await server.createDatabase();
    expect(a).not.toBe(b);
    expect(a).toMatch(/^postgres:\/\/[^/]+\/t_[0-9a-f]+$/);

    await query(a, "CREATE TABLE payments (id int PRIMARY KEY); INSERT INTO payments VALUES (1)");
    const [inA] = await query<{ n: string }>(a, "SELECT count(*) AS n FROM payments");
    expect(inA?.n).toBe("1");
    const [inB] = await query<{ n: string | null }>(b, "SELECT to_regclass('payments')::text AS n");
    expect(inB?.n).toBeNull();

    const [named] = await query<{ db: string }>(a, "SELECT current_database() AS db");
    expect(a.endsWith(`/${named?.db}`)).toBe(true);
  });

  it("creates a database with a given name", async () => {
    const name = `t_named_${process.pid}_${Date.now()}`;
    const url = await server.createDatabase(name);
    const [row] = await query<{ db: string }>(url, "SELECT current_database() AS db");
    expect(row?.db).toBe(name);
  });

  it.skipIf(!!process.env.TEST_DATABASE_URL)(
    "stop() shuts the server down",
    async () => {
      const port = Number(new URL(server.adminUrl).port);
      expect(await isListening(port)).toBe(true);
      await server.stop();
      expect(await isListening(port)).toBe(false);
      await server.stop(); // idempotent
    },
    START_TIMEOUT,
  );

  it("reports missing binaries in one line", async () => {
    vi.stubEnv("TEST_DATABASE_URL", "");
    vi.stubEnv("PG_BIN", join(tmpdir(), "no-such-postgres-bin"));
    try {
      const err: Error = await startPostgres().then(
        () => { throw new Error("expected startPostgres() to fail"); },
        (e: Error) => e,
      );
      expect(err.message).toMatch(/^PostgreSQL server binaries not found.*TEST_DATABASE_URL$/);
      expect(err.message).not.toContain("\n");
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe("startRedis", () => {
  let server: RedisServer;
  let client: Redis | undefined;

  beforeAll(async () => {
    server = await startRedis();
  }, START_TIMEOUT);

  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  }, START_TIMEOUT);

  it("answers SET and GET", async () => {
    client = new Redis(server.url, {
      // Fail fast while the server is down instead of queueing commands.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      connectTimeout: 1000,
    });
    client.on("error", () => {}); // connection errors are expected while paused
    await vi.waitFor(() => expect(client?.status).toBe("ready"), { timeout: EVENTUALLY_MS, interval: 10 });
    expect(await client.set("greeting", "hello")).toBe("OK");
    expect(await client.get("greeting")).toBe("hello");
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
  });

  it.skipIf(!!process.env.TEST_REDIS_URL)(
    "pause() takes the server away and resume() brings it back on the same port",
    async () => {
      const redis = client!;
      await server.pause();
      expect(await isListening(server.port)).toBe(false);
      await expect(redis.get("greeting")).rejects.toThrow();

      await server.resume();
      expect(await isListening(server.port)).toBe(true);
      // The client reconnects on its own (retryStrategy: every 50 ms).
      await vi.waitFor(() => expect(redis.status).toBe("ready"), { timeout: EVENTUALLY_MS, interval: 20 });
      expect(await redis.set("greeting", "again")).toBe("OK");
      expect(await redis.get("greeting")).toBe("again");
    },
    START_TIMEOUT,
  );

  it.skipIf(!!process.env.TEST_REDIS_URL)(
    "stop() shuts the server down",
    async () => {
      client?.disconnect();
      client = undefined;
      await server.stop();
      expect(await isListening(server.port)).toBe(false);
      await server.stop(); // idempotent
    },
    START_TIMEOUT,
  );

  it("reports a missing redis-server in one line", async () => {
    const emptyDir = mkdtempSync(join(tmpdir(), "no-redis-"));
    vi.stubEnv("TEST_REDIS_URL", "");
    vi.stubEnv("REDIS_SERVER_BIN", "");
    vi.stubEnv("PATH", emptyDir);
    try {
      await expect(startRedis()).rejects.toThrow(
        /^redis-server not found: install it with "apt-get install -y redis-server" or set TEST_REDIS_URL$/,
      );
    } finally {
      vi.unstubAllEnvs();
      rmSync(emptyDir, { recursive: true, force: true });
    }
  });
});
