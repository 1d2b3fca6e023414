import { parseArgs } from "node:util";
import { loadConfig } from "../config.ts";
import { DataDirLockedError } from "../db/data-dir-lock.ts";
import { openDatabase } from "../db/database.ts";
import { createLogger } from "../logger.ts";
import { RedisConnections } from "../infra/redis.ts";
import { createApiKeyCache } from "../modules/merchants/key-cache.ts";
import { createMerchantService } from "../modules/merchants/service.ts";
import { applyRetention } from "../modules/retention/service.ts";
import { aliases, commands, helpText, HelpText, isDatabaseCommand, outcomeOf, runDatabaseCommand, usage, type CommandOutcome, type DatabaseCommand } from "./commands.ts";
import { handOffToGateway } from "./handoff.ts";
import { reconciliationsFor } from "./reconcile.ts";
import { readPassword } from "./password.ts";
import { readSetupAnswers } from "./setup.ts";
import { required, UsageError } from "./usage.ts";
import { gatewayUrl, listenForWebhooks, testModeKey, triggerableEvents, triggerEvent, triggerTimeoutMs, unsupportedTrigger } from "./webhooks.ts";

/** Operator commands: npm run cli -- <command>. Output is JSON on stdout; errors are one line on stderr. */

const cliOptions = {
  name: { type: "string" },
  email: { type: "string" },
  currency: { type: "string" },
  merchant: { type: "string" },
  mode: { type: "string" },
  "forward-to": { type: "string" },
  key: { type: "string" },
  url: { type: "string" },
  role: { type: "string" },
  "password-stdin": { type: "boolean" },
  country: { type: "string" },
  timezone: { type: "string" },
  language: { type: "string" },
  another: { type: "boolean" },
  channel: { type: "string" },
  date: { type: "string" },
  limit: { type: "string" },
  stanza: { type: "string" },
  timeout: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

type CliValues = ReturnType<typeof parseArgs<{ options: typeof cliOptions; allowPositionals: true }>>["values"];

/** The command a list of positionals names (aliases resolved), and what follows it. */
function commandOf(positionals: string[]): { name: string; rest: string[] } {
  for (const length of [2, 1]) {
    const words = positionals.slice(0, length).join(" ");
    const name = aliases[words] ?? words;
    if (positionals.length >= length && name in commands) return { name, rest: positionals.slice(length) };
  }
  return { name: positionals.slice(0, 2).join(" "), rest: positionals.slice(2) };
}

async function run(argv: string[]): Promise<CommandOutcome> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: cliOptions });
  } catch (error) {
    // node:util's message ("Unknown option '--x'. To specify a positional argument ...") without the noise.
    return outcomeOf(Promise.reject(new UsageError((error as Error).message.split(". ")[0]!)));
  }
  const { values, positionals } = parsed;
  const { name, rest } = commandOf(positionals);
  if (values.help || positionals[0] === "help") {
    const known = positionals[0] !== "help" && name in commands;
    return outcomeOf(Promise.resolve(new HelpText(known ? helpText(name) : usage)));
  }
  if (isDatabaseCommand(name)) return runOnDatabase(name, values, rest[0]);
  return outcomeOf(runNetworkCommand(values, name, rest[0]));
}

/** These talk to a running gateway over HTTP and WebSocket, so they never open (or lock) the database. */
async function runNetworkCommand(values: CliValues, name: string, arg: string | undefined): Promise<unknown> {
  if (name === "webhooks trigger") {
    // The event type first: naming the supported ones helps more than complaining about a missing key.
    if (!arg || !triggerableEvents.includes(arg)) throw unsupportedTrigger(arg);
    return triggerEvent({ type: arg, apiKey: testModeKey(required(values, "key")), gatewayUrl: gatewayUrl(values.url), timeoutMs: triggerTimeoutMs(values.timeout) });
  }
  if (name === "webhooks listen") {
    await listenForWebhooks({
      forwardTo: required(values, "forward-to"),
      apiKey: testModeKey(required(values, "key")),
      gatewayUrl: gatewayUrl(values.url),
      write: (line) => process.stdout.write(`${line}\n`),
    });
    return undefined; // everything was printed as it happened
  }
  throw new UsageError(name ? `Unknown command: ${name}` : "No command given");
}

async function runOnDatabase(command: DatabaseCommand["command"], values: CliValues, arg: string | undefined): Promise<CommandOutcome> {
  // Asked before the database is opened, so a mistyped repeat does not hold the data directory.
  let request: DatabaseCommand;
  try {
    if (command === "setup") {
      const answers = await readSetupAnswers(values);
      request = { command, options: answers.options, arg, password: answers.password };
    } else {
      const password = command === "user create" ? await readPassword(values["password-stdin"] === true) : undefined;
      request = { command, options: { ...values }, arg, password };
    }
  } catch (error) {
    return outcomeOf(Promise.reject(error));
  }
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    return outcomeOf(Promise.reject(error));
  }
  const logger = createLogger(config.logLevel === "info" ? "warn" : config.logLevel);
  let db;
  try {
    db = await openDatabase(config, logger, { migrate: true });
  } catch (error) {
    // A gateway runs on this embedded database: it runs the command for us (with DATABASE_URL every process
    // connects on its own, so this never happens there).
    if (error instanceof DataDirLockedError && !config.databaseUrl) {
      const answered = await handOffToGateway(config.dataDir, request).catch((failure: Error) => outcomeOf(Promise.reject(failure)));
      if (answered) return answered;
    }
    return outcomeOf(Promise.reject(error));
  }
  // With Redis, a revoke tells every running instance to drop the key from its cache at once.
  const redis = RedisConnections.fromConfig(config, logger);
  try {
    const merchants = createMerchantService(db.prisma, { keyCache: createApiKeyCache({ ttlMs: 0, redis }) });
    return await outcomeOf(runDatabaseCommand(request, { prisma: db.prisma, backend: db.backend, merchants, reconciliations: () => reconciliationsFor(config, db, redis, logger), retention: () => ({ runNow: () => applyRetention(db.prisma, config.retention) }), backupStanza: config.metrics.backupStanza, publicBaseUrl: config.publicBaseUrl }));
  } finally {
    await redis?.close();
    await db.close();
  }
}

run(process.argv.slice(2)).then(
  (outcome) => {
    if (outcome.stdout) process.stdout.write(outcome.stdout);
    if (outcome.stderr) process.stderr.write(outcome.stderr);
    process.exitCode = outcome.exitCode;
  },
  (error) => {
    process.stderr.write(`cli failed: ${(error as Error).message}\n`);
    process.exitCode = 1;
  },
);
