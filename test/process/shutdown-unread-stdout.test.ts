import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { freePort } from "../support/local-server.ts";
import { repoRoot } from "../support/process.ts";
import { EVENTUALLY_MS, PROCESS_OUTPUT_MS } from "../support/timing.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * A gateway whose stdout nobody reads (a full pipe) still serves and still stops on SIGTERM: log lines
 * must never block the event loop, or the shutdown handler (and its forced-exit deadline) never runs.
 */
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

it("serves and stops on SIGTERM while its stdout pipe is full and unread", async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      NODE_ENV: "test",
      ...database.env,
      ENCRYPTION_KEY: database.encryptionKeyHex,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      RATE_LIMIT_ENABLED: "false",
    },
    // stdout is a pipe this test never reads: once its buffer (64 KB) is full, every further write would block.
    stdio: ["ignore", "pipe", "ignore"],
  });
  child.stdout!.pause();
  const exited = new Promise<{ code: number | null }>((resolve) => child.on("exit", (code) => resolve({ code })));
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitUntil(() => fetch(`${base}/health`).then((r) => r.ok, () => false), "the gateway to start", PROCESS_OUTPUT_MS);
    // About 400 bytes of log lines per request: 600 requests write well over the pipe's 64 KB. A gateway blocked on
    // its pipe never answers again; one merely busy answers within EVENTUALLY_MS.
    let served = 0;
    for (let i = 0; i < 600; i++) {
      const ok = await fetch(`${base}/health`, { signal: AbortSignal.timeout(EVENTUALLY_MS) }).then((r) => r.ok, () => false);
      if (!ok) break;
      served++;
    }
    expect(served).toBe(600);
    child.kill("SIGTERM");
    // Exit 0 is a shutdown that ran and finished (its SHUTDOWN_TIMEOUT_MS deadline would exit 1); a blocked event
    // loop never exits at all, which the bound turns into a failure that says so.
    const stopped = await Promise.race([exited, sleep(EVENTUALLY_MS, undefined, { ref: false })]);
    expect(stopped, "exited after SIGTERM").toBeDefined();
    expect(stopped!.code).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});
