import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { runEntry, startGatewayProcess } from "../support/process.ts";

describe("embedded PGlite data folder", () => {
  it("refuses a second process on the same DATA_DIR with a clear message", async () => {
    // A copy of the migrated template (an empty folder would spend each start on initdb); the lock is the folder's.
    const { dataDir } = await createTestDatabase();
    const first = await startGatewayProcess({ DATA_DIR: dataDir });
    try {
      const second = runEntry("src/main.ts", [], { DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1" });
      expect(await second.exited).toBe(1);
      expect(second.output()).toMatch(new RegExp(`DATA_DIR .* is in use by another gateway process \\(pid ${first.child.pid}\\)`));
      // The first instance is unharmed.
      expect((await apiClient(first.url).get("/ready")).status).toBe(200);
    } finally {
      first.child.kill("SIGTERM");
      await first.exited;
    }
  });

  it("takes over a stale lock left by a process that died without cleaning up", async () => {
    const { dataDir } = await createTestDatabase();
    // A pid that existed and is gone now.
    const dead = spawn(process.execPath, ["-e", ""]);
    await new Promise((resolve) => dead.on("exit", resolve));
    writeFileSync(join(dataDir, "gateway.pid"), String(dead.pid));
    const gateway = await startGatewayProcess({ DATA_DIR: dataDir });
    try {
      expect(readFileSync(join(dataDir, "gateway.pid"), "utf8")).toBe(String(gateway.child.pid));
      expect((await apiClient(gateway.url).get("/ready")).status).toBe(200);
    } finally {
      gateway.child.kill("SIGTERM");
      await gateway.exited;
    }
  });

  it("keeps data across restarts and survives kill -9", async () => {
    const { dataDir } = await createTestDatabase();
    const first = await startGatewayProcess({ DATA_DIR: dataDir });
    const [, key] = await first.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/);
    first.child.kill("SIGKILL");
    await first.exited;
    const second = await startGatewayProcess({ DATA_DIR: dataDir });
    try {
      expect((await apiClient(second.url, key).get("/v1/status")).status).toBe(200);
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });
});
