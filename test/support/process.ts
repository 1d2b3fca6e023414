import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { onTestFinished } from "vitest";
import type { TestDatabase } from "./backend.ts";
import { registerSecret, watchOutput } from "./secrets-in-logs.ts";
import { PROCESS_OUTPUT_MS } from "./timing.ts";

export const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of pattern in the output, or rejects after timeoutMs. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

/** Runs a TypeScript entry of this repo (src/main.ts, src/cli/main.ts) as its own process. */
export function runEntry(entry: string, args: string[], env: Record<string, string>, stdin?: string): RunningProcess {
  // One process, as `npm start` runs it (node --import tsx), so pids and signals reach the gateway itself.
  return runCommand(process.execPath, ["--import", "tsx", entry, ...args], env, stdin);
}

/** `npm start`, src/main.ts or dist/main.js: a gateway (or the primary of its workers). */
function isGateway(command: string, args: string[]): boolean {
  return args.some((arg) => arg === "src/main.ts" || arg === "dist/main.js") || (/(^|\/)npm$/.test(command) && args[0] === "start");
}

/** Runs any command from the repository root (npm start, node dist/main.js) with a minimal environment. */
export function runCommand(command: string, args: string[], env: Record<string, string>, stdin?: string): RunningProcess {
  const child = spawn(command, args, {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", NODE_ENV: "test", ...env },
    stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (stdin !== undefined) child.stdin!.end(stdin);
  let buffer = "";
  const listeners = new Set<() => void>();
  // A gateway's output is searched for secrets (secrets-in-logs.ts); the CLI prints keys it makes on purpose.
  const watched = isGateway(command, args) ? watchOutput(`gateway ${[command, ...args].join(" ")} (pid ${child.pid})`) : undefined;
  const onData = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    buffer += text;
    watched?.write(text);
    for (const listener of listeners) listener();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | string>((resolve) => {
    child.on("exit", (code, signal) => {
      watched?.end();
      resolve(code ?? signal ?? "unknown");
      for (const listener of listeners) listener();
    });
  });
  return {
    child,
    output: () => buffer,
    exited,
    waitFor(pattern, timeoutMs = PROCESS_OUTPUT_MS) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = buffer.match(pattern);
          if (match) {
            cleanup();
            resolve(match);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            cleanup();
            reject(new Error(`process exited before ${pattern} appeared; output:\n${buffer}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${pattern}; output:\n${buffer}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
  };
}

export interface StartedGatewayProcess extends RunningProcess {
  url: string;
}

/** `npm start` as a process: resolves once it listens, with its URL. */
export async function startGatewayProcess(
  env: Record<string, string>,
  command: { command: string; args: string[] } = { command: process.execPath, args: ["--import", "tsx", "src/main.ts"] },
): Promise<StartedGatewayProcess> {
  const proc = runCommand(command.command, command.args, { PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", ...env });
  try {
    const match = await proc.waitFor(/"address":"(http:\/\/[^"]+)"/);
    return { ...proc, url: match[1]! };
  } catch (error) {
    // Not listening in time: stop it, or it goes on holding its DATA_DIR and fails the next test's start too.
    proc.child.kill("SIGKILL");
    throw error;
  }
}

/** Runs the operator CLI to completion (killed if its test ends first, so it holds no DATA_DIR into the next test). */
export async function runCli(args: string[], env: Record<string, string>, stdin?: string) {
  // What a command reads with --password-stdin is a password: no gateway may print it (the handoff carries it).
  if (args.includes("--password-stdin")) registerSecret(stdin?.replace(/\r?\n$/, ""));
  const proc = runEntry("src/cli/main.ts", args, { LOG_LEVEL: "warn", ...env }, stdin);
  try {
    onTestFinished(() => void (proc.child.exitCode === null && proc.child.signalCode === null && proc.child.kill("SIGKILL")));
  } catch {
    // Not inside a test (a hook): the caller waits for it.
  }
  const code = await proc.exited;
  return { code, output: proc.output() };
}

/**
 * The gateway processes of a crash test, started one after another (`npm start` as a process, on the test's
 * database); `killAll()`, for afterAll, SIGKILLs whichever still run and waits for every one to exit.
 */
export function gatewayProcesses() {
  const running: StartedGatewayProcess[] = [];
  return {
    async start(env: Record<string, string>): Promise<StartedGatewayProcess> {
      const gateway = await startGatewayProcess(env);
      running.push(gateway);
      return gateway;
    },
    async killAll(): Promise<void> {
      for (const gateway of running) {
        if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill("SIGKILL");
        await gateway.exited;
      }
    },
  };
}

/** The demo merchant's test key, which a gateway started on an empty database prints once. */
export async function printedTestKey(gateway: RunningProcess): Promise<string> {
  const [, key] = await gateway.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/);
  return key!;
}

/**
 * The environment of a test's gateway processes on its database: the database and its encryption key, no rate
 * limit, the job runner polling every 200 ms; then the test's own settings (which may override any of these).
 */
export function processEnv(database: TestDatabase, env: Record<string, string>): Record<string, string> {
  return { ...database.env, ENCRYPTION_KEY: database.encryptionKeyHex, RATE_LIMIT_ENABLED: "false", JOB_POLL_INTERVAL_MS: "200", ...env };
}
