import { ConfigError } from "../config.ts";
import { backupStatus } from "../db/backups.ts";
import type { PrismaClient } from "../db/database.ts";
import { GatewayError } from "../errors.ts";
import { queueReport } from "../jobs/store.ts";
import { removeDemoMerchant } from "../modules/merchants/demo-removal.ts";
import { setUpMerchant, updateMerchant } from "../modules/merchants/profile.ts";
import type { MerchantService } from "../modules/merchants/service.ts";
import type { RetentionService } from "../modules/retention/service.ts";
import { createUser } from "../modules/users/service.ts";
import { ledgerCheckCommand } from "./ledger.ts";
import { required, UsageError } from "./usage.ts";
import { triggerableEvents } from "./webhooks.ts";
import { reconcileHelp, runReconcileCommand, type OperatorReconciliations } from "./reconcile.ts";

/**
 * The operator commands: their help, and the ones that work on the database. Those run either in the CLI's own
 * process (it opened the database) or, when a gateway holds the embedded database, inside that gateway (handoff.ts),
 * so both paths share this code and print the same thing.
 */
interface CommandHelp {
  usage: string;
  help: string;
  /** Each flag (or positional) with what it means; --help is added to every command. */
  flags: [string, string][];
}

const keyFlag: [string, string] = ["--key <sk_test_...>", "a test-mode secret key of the merchant (required)"];
const urlFlag: [string, string] = ["--url <url>", "the running gateway; default PUBLIC_BASE_URL, else http://localhost:PORT (PORT default 3000)"];

export const commands: Record<string, CommandHelp> = {
  setup: {
    usage: "setup [--name <name> --email <email> [--country KE] [--timezone <zone>] [--currency KES] --password-stdin] [--another]",
    help: "Creates the merchant and its first owner, who signs in to the dashboard (its URL is printed) with this e-mail and password. No API key and no channel: the owner makes those in the dashboard. At a terminal it asks for what the flags leave out (the password hidden, twice). Refused when the database has a merchant, unless --another.",
    flags: [
      ["--name <name>", "the business's name, as the dashboard and payers' pages show it"],
      ["--email <email>", "the owner's e-mail: the merchant's contact and the owner's sign-in"],
      ["--country <code>", "two-letter ISO 3166 country code, e.g. KE"],
      ["--timezone <zone>", "IANA time zone of the merchant's days (default Africa/Nairobi for KE, else UTC)"],
      ["--currency <code>", "default currency of its payments (default the country's, else KES)"],
      ["--password-stdin", "read the owner's password from stdin (for scripts) instead of asking at the terminal"],
      ["--another", "create one more merchant on a database that has one already"],
    ],
  },
  "merchant create": {
    usage: "merchant create --name <name> --email <email> [--currency KES]",
    help: "Creates a merchant with one test and one live API key, and prints both keys (shown once).",
    flags: [
      ["--name <name>", "the merchant's name (required)"],
      ["--email <email>", "the merchant's contact e-mail, unique (required)"],
      ["--currency <code>", "default currency of its payments (default KES)"],
    ],
  },
  "merchant list": { usage: "merchant list", help: "Lists merchants with their keys' visible prefixes (never whole keys).", flags: [] },
  "merchant rename": {
    usage: "merchant rename --merchant <id> --name <name>",
    help: "Renames a merchant (e.g. the demo merchant made by a development start). `merchants rename` is the same command.",
    flags: [
      ["--merchant <id>", "the merchant's id, as merchant list shows it (required)"],
      ["--name <name>", "the new name, at most 200 characters (required)"],
    ],
  },
  "merchant set": {
    usage: "merchant set --merchant <id> [--name <name>] [--timezone <zone>] [--country <code>] [--currency <code>] [--language en|sw]",
    help: "Changes a merchant's settings: those given, each checked. `merchants set` is the same command.",
    flags: [
      ["--merchant <id>", "the merchant's id (required)"],
      ["--name <name>", "its name"],
      ["--timezone <zone>", "IANA time zone of its days, e.g. Africa/Nairobi"],
      ["--country <code>", "two-letter ISO 3166 country code"],
      ["--currency <code>", "default currency of its payments"],
      ["--language en|sw", "language of the team's notices and payers' e-mails"],
    ],
  },
  "key create": {
    usage: "key create --merchant <id> --mode test|live [--role owner|developer|viewer]",
    help: "Issues another API key for a merchant and prints it (shown once).",
    flags: [
      ["--merchant <id>", "the merchant's id, as merchant list shows it (required)"],
      ["--mode test|live", "the key's mode (required)"],
      ["--role owner|developer|viewer", "what the key may do (the README's authorization table; default owner)"],
    ],
  },
  "key revoke": {
    usage: "key revoke <prefix>",
    help: "Revokes a key by its visible prefix (e.g. sk_live_Ab12Cd34); every running instance stops accepting it.",
    flags: [["<prefix>", "the key's visible prefix: sk_test_ or sk_live_ and 8 characters (required)"]],
  },
  "user create": {
    usage: "user create --merchant <id> --email <email> --role owner|developer|viewer [--password-stdin]",
    help: "Adds a dashboard user. The password is asked at the terminal, or read from stdin with --password-stdin; never an argument.",
    flags: [
      ["--merchant <id>", "the merchant's id (required)"],
      ["--email <email>", "the user's e-mail, to sign in with (required)"],
      ["--role owner|developer|viewer", "what the user may do (required)"],
      ["--password-stdin", "read the password from stdin (for scripts) instead of asking at the terminal"],
    ],
  },
  demo: { usage: "demo", help: "Prints a new test API key for the demo merchant (created at the first development start), e.g. when the first one was lost.", flags: [] },
  "demo remove": {
    usage: "demo remove",
    help: "Deletes the demo merchant and everything it owns (payments, events, ledger, webhooks, users, keys, channels, ...) in one database transaction. Refused once it has live-mode data: rename it instead.",
    flags: [],
  },
  "db deploy": { usage: "db deploy", help: "Applies pending database migrations (the server also does at start).", flags: [] },
  reconcile: reconcileHelp,
  "ledger check": {
    usage: "ledger check [--limit 20]",
    help: "Proves the ledger: recomputes every balance from the postings and compares it with the API, the journal and the payments, refunds and payouts; checks every entry. Exit 0 when clean, 1 listing the differences.",
    flags: [["--limit <n>", "differences listed per check (all are counted; default 20)"]],
  },
  "backup status": {
    usage: "backup status [--stanza gateway]",
    help: "When the last good pgBackRest backup finished and the last WAL segment was archived (deploy/pgbackrest/, docs/operations.md), with their ages in seconds. PostgreSQL only; needs pgBackRest and its configuration on this machine for the backups. Exit 0 when there is a backup and archiving works, 1 otherwise.",
    flags: [["--stanza <name>", "the pgBackRest stanza (default PGBACKREST_STANZA, else gateway)"]],
  },
  "retention run": {
    usage: "retention run",
    help: "Deletes now, in batches, what the retention settings no longer keep (finished webhook deliveries, old events, failed jobs, expired Idempotency-Key records and refresh tokens), as the hourly job does, and prints the rows deleted per table.",
    flags: [],
  },
  jobs: { usage: "jobs", help: "The job queue: counts and oldest due by kind and status, and the last jobs that gave up, with their errors.", flags: [] },
  "webhooks listen": {
    usage: "webhooks listen --forward-to <url> --key <sk_test_...> [--url <gateway url>]",
    help: "Forwards the test-mode events of a running gateway to a local URL, signed with a secret it prints.",
    flags: [["--forward-to <url>", "where to POST each event, as a webhook endpoint gets it (required)"], keyFlag, urlFlag],
  },
  "webhooks trigger": {
    usage: `webhooks trigger <${triggerableEvents.join("|")}> --key <sk_test_...> [--url <gateway url>] [--timeout 30]`,
    help:
      "Makes a running gateway produce that event in test mode, through the merchant's sandbox channel (a refund event: a card payment, then its refund in full; " +
      "transaction.failed: a card declined until the checkout's attempts are spent), and waits until the gateway published it. " +
      "Prints the reference made; exit 1 when the event did not happen in time. `trigger` is the same command.",
    flags: [
      ["<event>", `one of ${triggerableEvents.join(", ")} (required)`],
      keyFlag,
      urlFlag,
      ["--timeout <seconds>", "how long to wait for the event (default 30)"],
    ],
  },
};

/** Command names accepted for another (kept for scripts written before the name changed). */
export const aliases: Record<string, string> = { trigger: "webhooks trigger", "merchants rename": "merchant rename", "merchants set": "merchant set", "merchants list": "merchant list" };

export function helpText(name: string): string {
  const command = commands[name]!;
  const flags: [string, string][] = [...command.flags, ["--help, -h", "print this help"]];
  const width = Math.max(...flags.map(([flag]) => flag.length));
  return [`Usage: npm run cli -- ${command.usage}`, command.help, "Flags:", ...flags.map(([flag, meaning]) => `  ${flag.padEnd(width)}  ${meaning}`)].join("\n");
}

export const usage = `Usage: npm run cli -- <command> [--help]
${Object.values(commands)
  .map((c) => `  ${c.usage}`)
  .join("\n")}
npm run cli -- <command> --help explains one command and its flags.
webhooks listen and trigger talk to a running gateway (test mode only); the others open the database, or, when a
gateway runs on the embedded database in DATA_DIR, ask that gateway to run them.`;

/** The commands that read or write the database. */
export const databaseCommands = ["setup", "merchant create", "merchant list", "merchant rename", "merchant set", "key create", "key revoke", "user create", "demo", "demo remove", "db deploy", "jobs", "reconcile", "ledger check", "backup status", "retention run"] as const;
export type DatabaseCommandName = (typeof databaseCommands)[number];

export function isDatabaseCommand(name: string): name is DatabaseCommandName {
  return (databaseCommands as readonly string[]).includes(name);
}

/** One database command as parsed by the CLI: plain JSON, so it can cross the handoff socket. */
export interface DatabaseCommand {
  command: DatabaseCommandName;
  options: Record<string, string | boolean | undefined>;
  arg?: string | undefined;
  /** user create and setup only: read by the CLI (never an argument). */
  password?: string | undefined;
}

export interface CommandDeps {
  prisma: PrismaClient;
  backend: string;
  merchants: MerchantService;
  /** The reconciliation service (reconcile): built on demand by the CLI's process, the gateway's own in a handoff. */
  reconciliations?: () => OperatorReconciliations;
  /** retention run: with the settings of the process that runs it (the gateway's own in a handoff). */
  retention?: () => Pick<RetentionService, "runNow">;
  /** backup status: the stanza when --stanza is not given (PGBACKREST_STANZA). */
  backupStanza?: string | undefined;
  /** setup: the dashboard's address is this + /dashboard (PUBLIC_BASE_URL). */
  publicBaseUrl?: string | undefined;
}

/** What a command printed and its exit code, whichever process ran it. */
export interface CommandOutcome {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export async function runDatabaseCommand(request: DatabaseCommand, deps: CommandDeps): Promise<unknown> {
  const { prisma, merchants } = deps;
  const values = request.options;
  switch (request.command) {
    case "reconcile":
      return runReconcileCommand(values, deps.reconciliations?.());
    case "retention run": {
      if (!deps.retention) throw new GatewayError("service_unavailable", "retention cannot run here");
      return { deleted: (await deps.retention().runNow()).deleted };
    }
    case "db deploy":
      return { status: "migrations applied", backend: deps.backend };
    case "jobs": {
      // What an operator needs to see a stuck or failing queue: how many, how late, and why.
      const { groups, failed } = await queueReport(prisma, 10);
      return {
        jobs: groups.map((g) => ({ kind: g.kind, status: g.status, count: g._count._all, earliest_run_at: g._min.runAt?.toISOString() ?? null })),
        recent_failures: failed.map((f) => ({ id: String(f.id), kind: f.kind, attempts: f.attempts, last_error: f.lastError, failed_at: f.updatedAt.toISOString() })),
      };
    }
    case "ledger check": {
      const report = await ledgerCheckCommand(prisma, values);
      return new TextOutput(report.text, report.exitCode);
    }
    case "backup status": {
      if (deps.backend !== "postgres") throw new UsageError("backup status is for PostgreSQL (DATABASE_URL): the embedded database is the folder DATA_DIR, copied while the gateway is stopped");
      const status = await backupStatus(prisma, typeof values.stanza === "string" ? values.stanza : (deps.backupStanza ?? "gateway"));
      const healthy = status.last_backup !== null && status.last_archived_wal !== null && status.archive_failing === null;
      return new TextOutput(JSON.stringify(status), healthy ? 0 : 1);
    }
    case "merchant create": {
      const currency = values.currency;
      const { merchant, keys } = await merchants.createMerchant({
        name: required(values, "name"),
        email: required(values, "email"),
        ...(typeof currency === "string" ? { defaultCurrency: currency } : {}),
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
          timezone: m.timezone,
          demo: m.isDemo,
          created_at: m.createdAt.toISOString(),
          keys: m.apiKeys.map((k) => ({ prefix: k.prefix, mode: k.mode, revoked: k.revokedAt !== null })),
        })),
      };
    case "key create": {
      const merchantId = merchantIdOption(values.merchant);
      const mode = required(values, "mode");
      if (mode !== "test" && mode !== "live") throw new UsageError("--mode must be test or live");
      const role = values.role ?? "owner";
      if (role !== "owner" && role !== "developer" && role !== "viewer") throw new UsageError("--role must be owner, developer or viewer");
      const key = await merchants.createKey(merchantId, mode, { role });
      return { merchant_id: merchantId, mode, role, prefix: key.prefix, key: key.plaintext };
    }
    case "setup": {
      if (typeof request.password !== "string") throw new UsageError("setup needs the owner's password (--password-stdin or the terminal)");
      const { merchant, owner } = await setUpMerchant(prisma, {
        name: required(values, "name"),
        email: required(values, "email"),
        country: optionalString(values.country),
        timezone: optionalString(values.timezone),
        currency: optionalString(values.currency),
        password: request.password,
        another: values.another === true,
      });
      const dashboard = `${deps.publicBaseUrl ?? ""}/dashboard`;
      return {
        merchant: merchantView(merchant),
        owner: { id: owner.id, email: owner.email, role: owner.role },
        dashboard_url: dashboard,
        next: `Sign in at ${dashboard} as ${owner.email}; the dashboard makes API keys and payment channels (no key was made here).`,
      };
    }
    case "merchant rename":
    case "merchant set": {
      const merchantId = merchantIdOption(values.merchant);
      const changes =
        request.command === "merchant rename"
          ? { name: required(values, "name") }
          : { name: optionalString(values.name), timezone: optionalString(values.timezone), country: optionalString(values.country), currency: optionalString(values.currency), language: optionalString(values.language) };
      return { merchant: merchantView(await updateMerchant(prisma, merchantId, changes)) };
    }
    case "demo remove": {
      const removed = await removeDemoMerchant(prisma);
      return { removed: removed.merchant, deleted: removed.deleted };
    }
    case "demo": {
      const demo = (await merchants.listMerchants()).find((m) => m.isDemo);
      if (!demo) throw new GatewayError("not_found", "No demo merchant in this database: it is created at the first start against an empty database");
      const key = await merchants.createKey(demo.id, "test");
      return { merchant_id: demo.id, mode: "test", prefix: key.prefix, key: key.plaintext };
    }
    case "user create": {
      if (typeof request.password !== "string") throw new UsageError("user create needs a password (--password-stdin or the terminal)");
      const user = await createUser(prisma, {
        merchantId: merchantIdOption(values.merchant),
        email: required(values, "email"),
        role: required(values, "role"),
        password: request.password,
      });
      return { user: { id: user.id, email: user.email, role: user.role, merchant_id: user.merchantId } };
    }
    case "key revoke": {
      if (!request.arg) throw new UsageError("key revoke needs the key's prefix, e.g. sk_test_Ab12Cd34");
      const key = await merchants.revokeKey(request.arg);
      return { revoked: key.prefix, merchant_id: key.merchantId, mode: key.mode };
    }
  }
}

function optionalString(value: string | boolean | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}

function merchantView(m: { id: number; name: string; email: string; country: string | null; timezone: string; defaultCurrency: string; language: string }) {
  return { id: m.id, name: m.name, email: m.email, country: m.country, timezone: m.timezone, default_currency: m.defaultCurrency, language: m.language };
}

function merchantIdOption(value: string | boolean | undefined): number {
  const merchantId = Number(required({ merchant: value }, "merchant"));
  if (!Number.isSafeInteger(merchantId) || merchantId <= 0) throw new UsageError("--merchant must be a merchant id");
  return merchantId;
}

/** A command's answer as text (not JSON) on stdout, with its exit code. */
export class TextOutput {
  constructor(readonly text: string, readonly exitCode = 0) {}
}

/** Help asked for: printed as text to stdout, exit 0 (mistakes print usage to stderr and exit 2). */
export class HelpText extends TextOutput {}

/** A command's result or failure as the CLI prints it: JSON (or help text) on stdout, one line on stderr. */
export async function outcomeOf(running: Promise<unknown>): Promise<CommandOutcome> {
  try {
    const output = await running;
    if (output instanceof TextOutput) return { exitCode: output.exitCode, stdout: output.text.endsWith("\n") ? output.text : `${output.text}\n`, stderr: "" };
    return { exitCode: 0, stdout: output === undefined ? "" : `${JSON.stringify(output)}\n`, stderr: "" };
  } catch (error) {
    if (error instanceof UsageError) return { exitCode: 2, stdout: "", stderr: `${error.message}\n${usage}\n` };
    if (error instanceof GatewayError || error instanceof ConfigError || (error as Error).name === "DataDirLockedError") {
      return { exitCode: 1, stdout: "", stderr: `${(error as Error).message}\n` };
    }
    return { exitCode: 1, stdout: "", stderr: `cli failed: ${(error as Error).message}\n` };
  }
}
