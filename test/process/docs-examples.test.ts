import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anchor } from "../../src/config-docs.ts";
import { createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { repoRoot } from "../support/process.ts";

/**
 * The runnable examples of README.md and docs/ (fences marked ```sh runnable or ```js runnable, docs/testing.md), each
 * run as a merchant would run it against a started gateway, with GATEWAY and SECRET_KEY set: a shell block with
 * bash -e -o pipefail, a JavaScript block as an .mjs module in a folder inside the repository (so the installed
 * packages resolve) with this node. Each must exit 0. And every relative link of those files names a file that exists.
 */

interface Example {
  file: string;
  line: number;
  language: "sh" | "js";
  code: string;
}

const DOC_FILES = ["README.md", ...readdirSync(join(repoRoot, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const LANGUAGES: Record<string, "sh" | "js"> = { sh: "sh", bash: "sh", js: "js", javascript: "js" };

function examples(file: string): Example[] {
  const lines = readFileSync(join(repoRoot, file), "utf8").split("\n");
  const found: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)(`{3,})/.exec(lines[i]!);
    if (!fence) continue;
    // A fence closes at the first line of its own backticks alone: a ```` block may show ``` blocks (docs/testing.md).
    const end = lines.findIndex((l, j) => j > i && l.trim() === fence[2]);
    const open = /^(\s*)```(\w+)((?:\s+\S+)*)\s*$/.exec(lines[i]!);
    if (!open || fence[2] !== "```") {
      i = end;
      continue;
    }
    const indent = open[1]!;
    const words = open[3]!.trim().split(/\s+/);
    if (words.includes("runnable")) {
      const language = LANGUAGES[open[2]!];
      if (!language) throw new Error(`${file}:${i + 1}: a runnable block must be sh, bash, js or javascript, not ${open[2]}`);
      found.push({ file, line: i + 1, language, code: lines.slice(i + 1, end).map((l) => l.slice(indent.length)).join("\n") });
    }
    i = end;
  }
  return found;
}

const EXAMPLES = DOC_FILES.flatMap(examples);

/** Runs one example to its end: exit code and everything it printed. */
function run(example: Example, cwd: string, env: Record<string, string>, index: number): Promise<{ code: number | string; output: string }> {
  const [command, args] =
    example.language === "sh"
      ? ["bash", ["--norc", "-e", "-o", "pipefail", "-c", example.code]]
      : (() => {
          const path = join(cwd, `example-${index}.mjs`);
          writeFileSync(path, example.code);
          return [process.execPath, [path]] as const;
        })();
  return new Promise((resolve) => {
    // No stdin: bash takes a socket on stdin (which Node's pipes are) for an ssh login and reads ~/.bashrc, whose
    // set-up on a CI machine (pyenv's rehash lock) held every block for 60 s.
    const child = spawn(command, args as string[], {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    // A hung example (a subscription that never hears its event) fails instead of holding the suite.
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal ?? "unknown", output });
    });
  });
}

describe("the docs' runnable examples", () => {
  let gw: TestGateway;
  let env: Record<string, string>;
  let folder: string;

  beforeAll(async () => {
    for (const tool of ["curl", "jq"]) {
      expect(spawnSync("sh", ["-c", `command -v ${tool}`]).status, `the examples need ${tool} (apt-get install -y curl jq)`).toBe(0);
    }
    // As a developer runs one: the hosted checkout's default attempts, test-mode URLs on localhost allowed (the
    // examples register a local webhook receiver and C2B URLs); the sandbox answers quickly.
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3", ALLOW_PRIVATE_URLS: "true", SANDBOX_STK_DELAY_MS: "300", SANDBOX_REFUND_DELAY_MS: "300" } });
    const merchant = await createSandboxMerchant(gw, "Docs Shop");
    env = { GATEWAY: gw.url, SECRET_KEY: merchant.testKey };
    folder = mkdtempSync(join(repoRoot, ".docs-examples-"));
  });
  afterAll(async () => {
    if (folder) rmSync(folder, { recursive: true, force: true });
    await gw?.close();
  });

  it("finds them: the README's quick start, and sh and js examples in the guides", () => {
    expect(EXAMPLES.filter((e) => e.file === "README.md").length).toBeGreaterThanOrEqual(2);
    expect(EXAMPLES.some((e) => e.language === "js" && e.code.includes("graphql-ws"))).toBe(true);
    expect(EXAMPLES.length).toBeGreaterThanOrEqual(10);
    // The key and address come from the environment, never written in a block.
    for (const example of EXAMPLES) expect(example.code, `${example.file}:${example.line}`).not.toMatch(/sk_(test|live)_[A-Za-z0-9]|localhost:3000/);
  });

  EXAMPLES.forEach((example, index) => {
    it(`${example.file}:${example.line} (${example.language}) runs and exits 0`, async () => {
      const { code, output } = await run(example, folder, env, index);
      expect(code, `${example.file}:${example.line} printed:\n${output}`).toBe(0);
    });
  });

  it("every REST answer they got matched the OpenAPI document", () => {
    expect(gw.openApi.violations).toEqual([]);
  });
});

/** The anchors GitHub gives a Markdown file's headings. */
function headingAnchors(path: string): Set<string> {
  const text = readFileSync(path, "utf8").replace(/```[\s\S]*?```/g, "");
  return new Set([...text.matchAll(/^#+ (.+)$/gm)].map(([, heading]) => anchor(heading!)));
}

describe("the docs' links", () => {
  it("every relative link or image in README.md and docs/ names a file of the repository (and a heading of it)", () => {
    const broken: string[] = [];
    for (const file of DOC_FILES) {
      const text = readFileSync(join(repoRoot, file), "utf8").replace(/```[\s\S]*?```/g, "");
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
        const [pathPart, hash] = target!.split("#") as [string, string | undefined];
        const path = pathPart ? join(dirname(join(repoRoot, file)), decodeURIComponent(pathPart)) : join(repoRoot, file);
        if (!existsSync(path)) broken.push(`${file}: ${target} (${relative(repoRoot, path)})`);
        else if (hash && path.endsWith(".md") && !headingAnchors(path).has(hash)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
