import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config.ts";
import { openDatabase } from "../db/database.ts";
import { GatewayError } from "../errors.ts";
import { createLogger } from "../logger.ts";
import { RedisConnections } from "../infra/redis.ts";
import { createApiKeyCache } from "../modules/merchants/key-cache.ts";
import { createMerchantService } from "../modules/merchants/service.ts";
import { createUser } from "../modules/users/service.ts";
import { DEMO_MERCHANT } from "../demo.ts";
import { readPassword } from "./password.ts";
import { required, UsageError } from "./usage.ts";
import { gatewayUrl, listenForWebhooks, testModeKey, triggerableEvents, triggerEvent, unsupportedTrigger } from "./webhooks.ts";

/** Operator commands: npm run cli -- <command>. Output is JSON on stdout; errors are one line on stderr. */
const commands: Record<string, { usage: string; help: string }> = {
  "merchant create": { usage: "merchant create --name <name> --email <email> [--currency KES]", help: "Creates a merchant with one test and one live API key, and prints both keys (shown once)." },
  "merchant list": { usage: "merchant list", help: "Lists merchants with their keys' visible prefixes (never whole keys)." },
  "key create": { usage: "key create --merchant <id> --mode test|live", help: "Issues another API key for a merchant and prints it (shown once)." },
  "key revoke": { usage: "key revoke <prefix>", help: "Revokes a key by its visible prefix (e.g. sk_live_Ab12Cd34); every running instance stops accepting it." },
  "user create": {
    usage: "user create --merchant <id> --email <email> --role owner|developer|viewer [--password-stdin]",
    help: "Adds a dashboard user. The password is asked at the terminal, or read from stdin with --password-stdin; never an argument.",
  },
  demo: { usage: "demo", help: "Prints a new test API key for the demo merchant (created at the first start), e.g. when the first one was lost." },
  "db deploy": { usage: "db deploy", help: "Applies pending database migrations (the server also does at start)." },
  jobs: { usage: "jobs", help: "The job queue: counts and oldest due by kind and status, and the last jobs that gave up, with their errors." },
  "webhooks listen": {
    usage: "webhooks listen --forward-to <url> --key <sk_test_...> [--url http://localhost:3000]",
    help: "Forwards the test-mode events of a running gateway to a local URL, signed with a secret it prints.",
  },
  trigger: { usage: `trigger <${triggerableEvents.join("|")}> --key <sk_test_...> [--url http://localhost:3000]`, help: "Makes a running gateway produce that event in test mode." },
};

const usage = `Usage: npm run cli -- <command> [--help]
${Object.values(commands)
  .map((c) => `  ${c.usage}`)
  .join("\n")}
webhooks listen and trigger talk to a running gateway (test mode only); the others open the database.`;

/** Help asked for: printed as text to stdout, exit 0 (mistakes print usage to stderr and exit 2). */
class HelpText {
  constructor(readonly text: string) {}
}

async function run(argv: string[]): Promise<unknown> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: cliOptions });
  } catch (error) {
    // node:util's message ("Unknown option '--x'. To specify a positional argument ...") without the noise.
    throw new UsageError((error as Error).message.split(". ")[0]!);
  }
  const { values, positionals } = parsed;
  const [group, action, arg] = positionals;
  if (values.help || group === "help") {
    const name = [`${group} ${action ?? ""}`.trim(), group ?? ""].find((n) => n in commands && group !== "help");
    return new HelpText(name ? `Usage: npm run cli -- ${commands[name]!.usage}\n${commands[name]!.help}` : usage);
  }
  return runCommand(values, group, action, arg);
}

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
  help: { type: "boolean", short: "h" },
} as const;

type CliValues = ReturnType<typeof parseArgs<{ options: typeof cliOptions; allowPositionals: true }>>["values"];

async function runCommand(values: CliValues, group: string | undefined, action: string | undefined, arg: string | undefined): Promise<unknown> {
  // These talk to a running gateway over HTTP and WebSocket, so they never open (or lock) the database.
  if (group === "trigger") {
    // The event type first: naming the supported ones helps more than complaining about a missing key.
    if (!action || !triggerableEvents.includes(action)) throw unsupportedTrigger(action);
    return triggerEvent({ type: action, apiKey: testModeKey(required(values, "key")), gatewayUrl: gatewayUrl(values.url) });
  }
  const command = `${group ?? ""} ${action ?? ""}`.trim();
  if (command === "webhooks listen") {
    await listenForWebhooks({
      forwardTo: required(values, "forward-to"),
      apiKey: testModeKey(required(values, "key")),
      gatewayUrl: gatewayUrl(values.url),
      write: (line) => process.stdout.write(`${line}\n`),
    });
    return undefined; // everything was printed as it happened
  }
  const known = ["merchant create", "merchant list", "key create", "key revoke", "user create", "demo", "db deploy", "jobs"];
  if (!known.includes(command)) throw new UsageError(command ? `Unknown command: ${command}` : "No command given");
  // Asked before the database is opened, so a mistyped repeat does not hold the data directory.
  const password = command === "user create" ? await readPassword(values["password-stdin"] === true) : undefined;

  const config = loadConfig();
  const logger = createLogger(config.logLevel === "info" ? "warn" : config.logLevel);
  const db = await openDatabase(config, logger, { migrate: true });
  // With Redis, a revoke tells every running instance to drop the key from its cache at once.
  const redis = config.redisUrl ? new RedisConnections(config.redisUrl, logger) : undefined;
  try {
    const merchants = createMerchantService(db.prisma, { keyCache: createApiKeyCache({ ttlMs: 0, redis }) });
    switch (command) {
      case "db deploy":
        return { status: "migrations applied", backend: db.backend };
      case "jobs": {
        // What an operator needs to see a stuck or failing queue: how many, how late, and why.
        const groups = await db.prisma.job.groupBy({ by: ["kind", "status"], _count: { _all: true }, _min: { runAt: true }, orderBy: [{ kind: "asc" }, { status: "asc" }] });
        const failed = await db.prisma.job.findMany({ where: { status: "failed" }, orderBy: { updatedAt: "desc" }, take: 10, select: { id: true, kind: true, attempts: true, lastError: true, updatedAt: true } });
        return {
          jobs: groups.map((g) => ({ kind: g.kind, status: g.status, count: g._count._all, earliest_run_at: g._min.runAt?.toISOString() ?? null })),
          recent_failures: failed.map((f) => ({ id: String(f.id), kind: f.kind, attempts: f.attempts, last_error: f.lastError, failed_at: f.updatedAt.toISOString() })),
        };
      }
      case "merchant create": {
        const { merchant, keys } = await merchants.createMerchant({
          name: required(values, "name"),
          email: required(values, "email"),
          ...(values.currency ? { defaultCurrency: values.currency } : {}),
        });
        return { merchant: { id: merchant.id, name: merchant.name }, keys: { test: keys.test.plaintext, live: keys.live.plaintext } };
      }
      case "merchant list":
        return {
          merchants: (await merchants.listMerchants()).map((m) => ({
            id: m.id,
            name: m.name,
            email: m.email,
            default_currency: m.defaultCurrency,
            created_at: m.createdAt.toISOString(),
            keys: m.apiKeys.map((k) => ({ prefix: k.prefix, mode: k.mode, revoked: k.revokedAt !== null })),
          })),
        };
      case "key create": {
        const merchantId = merchantIdOption(values.merchant);
        const mode = required(values, "mode");
        if (mode !== "test" && mode !== "live") throw new UsageError("--mode must be test or live");
        const key = await merchants.createKey(merchantId, mode);
        return { merchant_id: merchantId, mode, prefix: key.prefix, key: key.plaintext };
      }
      case "demo": {
        const demo = (await merchants.listMerchants()).find((m) => m.email === DEMO_MERCHANT.email);
        if (!demo) throw new GatewayError("not_found", "No demo merchant in this database: it is created at the first start against an empty database");
        const key = await merchants.createKey(demo.id, "test");
        return { merchant_id: demo.id, mode: "test", prefix: key.prefix, key: key.plaintext };
      }
      case "user create": {
        const user = await createUser(db.prisma, {
          merchantId: merchantIdOption(values.merchant),
          email: required(values, "email"),
          role: required(values, "role"),
          password: password!,
        });
        return { user: { id: user.id, email: user.email, role: user.role, merchant_id: user.merchantId } };
      }
      case "key revoke": {
        if (!arg) throw new UsageError("key revoke needs the key's prefix, e.g. sk_test_Ab12Cd34");
        const key = await merchants.revokeKey(arg);
        return { revoked: key.prefix, merchant_id: key.merchantId, mode: key.mode };
      }
    }
  } finally {
    await redis?.close();
    await db.close();
  }
}

function merchantIdOption(value: string | undefined): number {
  const merchantId = Number(required({ merchant: value }, "merchant"));
  if (!Number.isSafeInteger(merchantId) || merchantId <= 0) throw new UsageError("--merchant must be a merchant id");
  return merchantId;
}

run(process.argv.slice(2)).then(
  (output) => {
    if (output instanceof HelpText) process.stdout.write(`${output.text}\n`);
    else if (output !== undefined) process.stdout.write(`${JSON.stringify(output)}\n`);
  },
  (error) => {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n${usage}\n`);
      process.exitCode = 2;
    } else if (error instanceof GatewayError || error instanceof ConfigError || (error as Error).name === "DataDirLockedError") {
      process.stderr.write(`${(error as Error).message}\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`cli failed: ${(error as Error).message}\n`);
      process.exitCode = 1;
    }
  },
);
