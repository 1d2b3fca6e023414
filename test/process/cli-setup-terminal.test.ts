import { spawn, spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { gatewayProcesses, processEnv, repoRoot } from "../support/process.ts";
import { registerSecret } from "../support/secrets-in-logs.ts";
import { PROCESS_OUTPUT_MS } from "../support/timing.ts";

/**
 * `npm run cli -- setup` at a terminal (issue 37: "interactive in a terminal ... setup asks" the time zone): run in a
 * pseudo-terminal made by util-linux `script`, each answer typed once its question shows. What the flags leave out is
 * asked, with the country's defaults offered (KE: Africa/Nairobi and KES; elsewhere UTC); a bad answer is said and
 * asked again; the password is asked twice without echo and never shown; the owner then signs in with it.
 */

/** A CLI run in a terminal: answers each prompt (a pattern of the output so far) as it appears. */
async function atTerminal(args: string[], env: Record<string, string>, dialogue: [RegExp, string][]): Promise<{ code: number | string; output: string }> {
  const command = [process.execPath, "--import", "tsx", "src/cli/main.ts", ...args].map((word) => `'${word.replace(/'/g, `'\\''`)}'`).join(" ");
  // -e: script exits with the command's status; /dev/null: no typescript file.
  const child = spawn("script", ["-q", "-e", "-c", command, "/dev/null"], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", NODE_ENV: "test", LOG_LEVEL: "warn", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
  try {
    let from = 0;
    for (const [question, answer] of dialogue) {
      const deadline = Date.now() + PROCESS_OUTPUT_MS;
      let match: RegExpExecArray | null = null;
      while (!(match = question.exec(output.slice(from)))) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${question} in:\n${output}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      from += match.index + match[0].length;
      child.stdin.write(`${answer}\r`);
    }
    return { code: await exited, output };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
}

/** The command's JSON answer (its one line starting with "{"). */
const answer = (output: string) => JSON.parse(output.split(/\r?\n/).find((line) => line.startsWith("{"))!);

describe("cli setup at a terminal", () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  const gateways = gatewayProcesses();
  const password = "typed-at-terminal-1";
  registerSecret(password);

  beforeAll(async () => {
    expect(spawnSync("sh", ["-c", "command -v script"]).status, "the terminal is util-linux's script (Debian: bsdutils, always installed)").toBe(0);
    database = await createTestDatabase({ empty: true });
    env = processEnv(database, { NODE_ENV: "production", PUBLIC_BASE_URL: "https://pay.duka.test" });
  });
  afterAll(async () => {
    await gateways.killAll();
    await database?.drop();
  });

  it("asks what the flags leave out, offers Kenya's time zone and currency, hides the password, and the owner signs in with it", async () => {
    const run = await atTerminal(["setup"], env, [
      [/Business name: /, "Duka la Mama"],
      [/Owner's e-mail: /, "Owner@Duka.test"],
      [/Country \(two letters, e\.g\. KE\) \[KE\]: /, ""],
      [/Time zone \[Africa\/Nairobi\]: /, "Mars/Olympus"],
      // Said, and asked again.
      [/must be an IANA time zone name[\s\S]*Time zone \[Africa\/Nairobi\]: /, ""],
      [/Default currency \[KES\]: /, ""],
      [/Password: /, password],
      [/Repeat password: /, password],
    ]);
    expect(run.code, run.output).toBe(0);
    expect(run.output).not.toContain(password);
    expect(answer(run.output)).toMatchObject({
      merchant: { name: "Duka la Mama", email: "owner@duka.test", country: "KE", timezone: "Africa/Nairobi", default_currency: "KES" },
      owner: { email: "owner@duka.test", role: "owner" },
      dashboard_url: "https://pay.duka.test/dashboard",
    });

    const gateway = await gateways.start(env);
    const login = await apiClient(gateway.url).post("/v1/auth/login", { email: "owner@duka.test", password, mode: "test" });
    expect(login.status, login.text).toBe(200);
    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
  });

  it("asks only what --another and the flags leave out; outside Kenya the zone offered is UTC; passwords that differ are refused", async () => {
    const run = await atTerminal(["setup", "--another", "--name", "Lagos Shop", "--email", "ops@lagos.test"], env, [
      [/Country \(two letters, e\.g\. KE\) \[KE\]: /, "NG"],
      [/Time zone \[UTC\]: /, ""],
      [/Default currency \[NGN\]: /, ""],
      [/Password: /, "first-try-password"],
      [/Repeat password: /, "second-try-password"],
    ]);
    expect(run.code).toBe(2);
    expect(run.output).toContain("The passwords do not match");
    expect(run.output).not.toMatch(/Business name|Owner's e-mail/);
    expect(run.output).not.toMatch(/first-try-password|second-try-password/);
  });
});
