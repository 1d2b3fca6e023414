import { chmodSync, unlinkSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join, resolve } from "node:path";
import type { Logger } from "../logger.ts";
import { databaseCommands, isDatabaseCommand, outcomeOf, runDatabaseCommand, type CommandDeps, type CommandOutcome, type DatabaseCommand } from "./commands.ts";

/**
 * The embedded database (PGlite) allows one process per DATA_DIR, so while a gateway runs on it the CLI cannot open
 * it. Instead the gateway listens on a Unix socket in DATA_DIR (mode 0600: only the user running it, and root, may
 * connect) and runs the CLI's database commands with its own services. The protocol is one JSON line each way:
 * the CLI sends a DatabaseCommand, the gateway answers a CommandOutcome (what to print, and the exit code).
 */
export const CLI_SOCKET_NAME = "cli.sock";

/** Linux's sun_path holds 108 bytes with the terminating NUL; longer paths cannot be bound or connected to. */
const MAX_SOCKET_PATH_BYTES = 107;
/** A request is a command line and a password: anything longer is not the CLI talking. */
const MAX_REQUEST_BYTES = 64 * 1024;

export function cliSocketPath(dataDir: string): string {
  return join(resolve(dataDir), CLI_SOCKET_NAME);
}

export interface CliHandoffServer {
  path: string;
  close(): Promise<void>;
}

/**
 * Started by a gateway on the embedded database once it holds DATA_DIR. A socket file left by a gateway that was
 * killed is replaced: holding the DATA_DIR lock means its owner is gone. Resolves undefined (with a warning) when
 * the path is too long for a Unix socket; the CLI then says the directory is in use, as before.
 */
export async function serveCliHandoff(dataDir: string, deps: CommandDeps, logger: Logger): Promise<CliHandoffServer | undefined> {
  const path = cliSocketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    logger.warn({ path }, "DATA_DIR path too long for the CLI socket: the CLI cannot reach this gateway");
    return undefined;
  }
  removeSocketFile(path);
  const server = createServer((socket) => serveOne(socket, deps, logger));
  // Created 0600 (umask while binding, which happens synchronously in listen), so there is no moment in which
  // another user could connect; chmod again in case the platform ignores umask for sockets.
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(path, () => {
        server.off("error", fail);
        done();
      });
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(path, 0o600);
  return {
    path,
    close: () =>
      new Promise<void>((done) => {
        // Stops accepting; a command already running finishes (the gateway closes its database after this).
        server.close(() => done());
        removeSocketFile(path);
      }),
  };
}

function removeSocketFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

function serveOne(socket: Socket, deps: CommandDeps, logger: Logger): void {
  let buffered = "";
  socket.setEncoding("utf8");
  socket.on("error", () => {}); // the CLI went away (Ctrl-C): nothing to answer
  // The CLI sends its line at once; a connection that sends nothing must not hold the gateway's shutdown.
  socket.setTimeout(10_000, () => socket.destroy());
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    const newline = buffered.indexOf("\n");
    if (newline === -1) {
      if (buffered.length > MAX_REQUEST_BYTES) socket.destroy();
      return;
    }
    socket.removeAllListeners("data");
    socket.setTimeout(0);
    void answer(buffered.slice(0, newline)).then((outcome) => socket.end(`${JSON.stringify(outcome)}\n`));
  });

  async function answer(line: string): Promise<CommandOutcome> {
    let request: DatabaseCommand;
    try {
      request = parseRequest(JSON.parse(line));
    } catch {
      return { exitCode: 2, stdout: "", stderr: `The gateway could not read the command (supported: ${databaseCommands.join(", ")})\n` };
    }
    logger.info({ command: request.command }, "running a CLI command handed over by the CLI");
    return outcomeOf(runDatabaseCommand(request, deps));
  }
}

function parseRequest(value: unknown): DatabaseCommand {
  const request = value as Partial<DatabaseCommand> | null;
  if (!request || typeof request !== "object" || typeof request.command !== "string" || !isDatabaseCommand(request.command)) throw new Error("bad request");
  const options: DatabaseCommand["options"] = {};
  for (const [name, option] of Object.entries(request.options ?? {})) {
    if (typeof option === "string" || typeof option === "boolean") options[name] = option;
  }
  return {
    command: request.command,
    options,
    ...(typeof request.arg === "string" ? { arg: request.arg } : {}),
    ...(typeof request.password === "string" ? { password: request.password } : {}),
  };
}

/**
 * The CLI's side: sends the command to the gateway holding dataDir and resolves with what it answered, or with
 * undefined when no gateway listens there. A gateway that is still starting (it locks DATA_DIR before it opens the
 * socket) is waited for up to waitMs.
 */
export async function handOffToGateway(dataDir: string, request: DatabaseCommand, waitMs = 10_000): Promise<CommandOutcome | undefined> {
  const path = cliSocketPath(dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return undefined;
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await exchange(path, request);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== "ENOENT" && code !== "ECONNREFUSED") || Date.now() >= deadline) {
        if (code === "ENOENT" || code === "ECONNREFUSED") return undefined;
        throw error;
      }
      await new Promise((done) => setTimeout(done, 100));
    }
  }
}

function exchange(path: string, request: DatabaseCommand): Promise<CommandOutcome> {
  return new Promise((done, fail) => {
    const socket = createConnection(path);
    let answer = "";
    let connected = false;
    socket.setEncoding("utf8");
    socket.on("connect", () => {
      connected = true;
      socket.write(`${JSON.stringify(request)}\n`);
    });
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("error", (error) => {
      if (!connected) return fail(error); // no gateway (yet): the caller may retry
      fail(new Error(`the gateway dropped the CLI connection: ${error.message}`));
    });
    socket.on("end", () => {
      try {
        const outcome = JSON.parse(answer.trim()) as CommandOutcome;
        if (typeof outcome.exitCode !== "number") throw new Error("no exit code");
        done({ exitCode: outcome.exitCode, stdout: String(outcome.stdout ?? ""), stderr: String(outcome.stderr ?? "") });
      } catch {
        // A command that ran may have changed something: say so rather than retrying it.
        fail(new Error("the gateway closed the CLI connection without an answer (is it shutting down?)"));
      }
    });
  });
}
