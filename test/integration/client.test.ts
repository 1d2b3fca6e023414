import { execFile } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateClientTypes, generatedTypesFile } from "../../src/client/generate.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { repoRoot } from "../support/process.ts";

const run = promisify(execFile);

/** The typed client in src/client: its generated types are current, and its README example runs as written. */
describe("the typed client", () => {
  let gw: TestGateway;
  let key: string;

  beforeAll(async () => {
    gw = await startTestGateway();
    const merchant = await gw.createMerchant("Client Shop");
    key = merchant.testKey;
    await apiClient(gw.url, key).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  });
  afterAll(() => gw?.close());

  it("rest-api.ts is what npm run client:generate makes from the current OpenAPI document", async () => {
    expect(readFileSync(generatedTypesFile, "utf8"), "run npm run client:generate").toBe(await generateClientTypes());
  });

  it("the README example type-checks and runs against a real gateway", async () => {
    const example = /```ts\n([\s\S]*?)```/.exec(readFileSync(join(repoRoot, "src/client/README.md"), "utf8"))![1]!;
    // Run from the repository root, where the example's ./src/client import points.
    const dir = mkdtempSync(join(repoRoot, ".client-example-"));
    try {
      const file = join(dir, "example.ts");
      writeFileSync(file, example.replace("./src/client/index.ts", "../src/client/index.ts"));
      // The compiler first: the example's calls must match the generated types.
      await run(
        process.execPath,
        [join(repoRoot, "node_modules/typescript/bin/tsc"), "--noEmit", "--strict", "--skipLibCheck", "--target", "es2023", "--module", "nodenext", "--moduleResolution", "nodenext", "--allowImportingTsExtensions", "--types", "node", file],
        { cwd: repoRoot, timeout: 60_000 },
      );
      const { stdout } = await run(process.execPath, ["--import", "tsx", file], {
        cwd: repoRoot,
        env: { ...process.env, GATEWAY_URL: gw.url, GATEWAY_API_KEY: key },
        timeout: 60_000,
      });
      expect(stdout).toMatch(/^pay at http:\/\/\S+\/payment\/checkout\/\S+$/m);
      expect(stdout).toContain("status pending amount 150000");
      expect(stdout).toContain("merchant Client Shop in test mode");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
