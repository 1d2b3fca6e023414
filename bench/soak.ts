/**
 * Soak: the gateway deployed for scale, under a steady mixed load for a bounded time, watched minute by minute for
 * what only time shows: memory that keeps growing, latency creeping up, webhooks or subscription events lost,
 * tables growing.
 *
 * Everything on 127.0.0.1, started here: a throwaway PostgreSQL and Redis (test/support), three gateway instances
 * (the compiled build, as production runs it: NODE_ENV=production, LOG_LEVEL=warn, rate limiting off) behind the
 * real haproxy with deploy/haproxy.cfg (its servers in place of the Docker DNS template, as
 * test/postgres/haproxy-rolling.test.ts does); a load generator in its own process (this file with --role=load),
 * which also runs the fake Daraja (test/fakes/daraja.ts) and posts its STK callbacks through haproxy. This process
 * holds the merchant's webhook receiver (test/fakes/webhook-receiver.ts) and the live subscriptions (graphql-ws
 * through haproxy), and samples RSS, CPU and table sizes.
 *
 * The load is open loop at a fixed total rate (--rate, requests/s): units start on schedule whether or not earlier
 * ones have finished, in rounds of five: card flow, list, card flow, STK flow, verify (10 requests). A card flow is
 * initialize -> pay (sandbox card on the hosted checkout) -> verify (must read "completed"); an STK flow is STK push
 * -> the payer's PIN (PIN_MS) -> Daraja's success callback. Initialize and STK push carry an Idempotency-Key.
 *
 *   node --import tsx bench/soak.ts [--minutes 10] [--rate 150] [--subscribers 20] [--write]
 *
 * Exits non-zero when a goal is missed (see goals()).
 */
import { execFileSync, fork, spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createWriteStream, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createClient, type Client } from "graphql-ws";
import pg from "pg";
import WebSocket from "ws";
import { startFakeDaraja, type FakeDaraja } from "../test/fakes/daraja.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../test/fakes/webhook-receiver.ts";
import { freePort } from "../test/support/local-server.ts";
import { startPostgres, type PostgresServer } from "../test/support/postgres.ts";
import { startRedis, type RedisServer } from "../test/support/redis.ts";
import { writeReadmeSection } from "./readme.ts";

const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const MINUTES = Number(argument("--minutes") ?? 10);
const RATE = Number(argument("--rate") ?? 150);
const SUBSCRIBERS = Number(argument("--subscribers") ?? 20);
const INSTANCES = 3;
const MINUTE_MS = 60_000;
/** The payer typing the M-Pesa PIN: the push stays pending this long before Daraja's callback. */
const PIN_MS = 1000;
/** RSS and CPU are sampled this often; a minute's RSS is the mean of its samples (GC makes single samples jumpy). */
const SAMPLE_MS = 5000;
/** After the last unit started: how long its flows may take to finish; then what webhooks and subscriptions still owe. */
const DRAIN_MS = 30_000;
const TAIL_MS = 60_000;
const SETUP_BUDGET_MS = 5 * 60_000;
/** The issue's goals: RSS growth after warm-up, and last minute's p99 against the second minute's. */
const RSS_GROWTH_LIMIT = 0.1;
const P99_GROWTH_LIMIT = 0.2;

/** One round of units, 10 requests: card (3) + list (1) + card (3) + STK (2) + verify (1). */
const UNITS = ["card", "list", "card", "stk", "verify"] as const;
const REQUESTS_PER_ROUND = 10;
const OPS = ["initialize", "pay", "verify", "list", "stk push", "stk callback"] as const;
type Op = (typeof OPS)[number];
const CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 3, cvc: "123" };

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]! : Number.NaN);
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

// ---------------------------------------------------------------------------------------------------------------
// Messages between this process and the load generator

interface OpMinute {
  latencies: number[];
  errors: number;
}
interface LoadMinute {
  minute: number;
  ops: Record<Op, OpMinute>;
  /** How far behind schedule a unit started at worst (the generator keeping up). */
  behindMs: number;
  /** Requests of the minute still unanswered DRAIN_MS after the load ended: errors. */
  unanswered: number;
  /** Answers per instance (haproxy's X-Served-By): how the balancer spread the requests. */
  servedBy: Record<string, number>;
  errorSamples: string[];
}
type FromLoad =
  | { type: "daraja"; url: string; channelConfig: Record<string, unknown> }
  | { type: "minute"; data: LoadMinute }
  | { type: "done"; unfinished: number };
interface LoadPlan {
  type: "start";
  publicUrl: string;
  apiKey: string;
  cardChannelId: number;
  mpesaChannelId: number;
  startAt: number;
  durationMs: number;
  rate: number;
}

// ---------------------------------------------------------------------------------------------------------------
// The load generator (child process)

function loadGenerator(): void {
  const send = (message: FromLoad) => process.send!(message);
  process.on("disconnect", () => process.exit(0));
  void startFakeDaraja().then((daraja) => {
    process.on("message", (message: LoadPlan | { type: "close" }) => {
      if (message.type === "close") void daraja.close().then(() => process.exit(0));
      else
        runLoad(daraja, message, send).catch((error) => {
          console.error("load generator:", error);
          process.exit(1);
        });
    });
    send({ type: "daraja", url: daraja.url, channelConfig: daraja.channelConfig() });
  });
}

async function runLoad(daraja: FakeDaraja, plan: LoadPlan, send: (message: FromLoad) => void): Promise<void> {
  const minutes = Math.ceil(plan.durationMs / MINUTE_MS);
  const end = plan.startAt + plan.durationMs;
  const buckets: LoadMinute[] = Array.from({ length: minutes }, (_, minute) => ({
    minute,
    ops: Object.fromEntries(OPS.map((op) => [op, { latencies: [], errors: 0 }])) as unknown as Record<Op, OpMinute>,
    behindMs: 0,
    unanswered: 0,
    servedBy: {},
    errorSamples: [],
  }));
  const inFlight = new Array<number>(minutes).fill(0);
  const reported = new Set<number>();
  let finished = false;
  const bucketOf = (t: number) => buckets[Math.min(minutes - 1, Math.max(0, Math.floor((t - plan.startAt) / MINUTE_MS)))]!;
  /** A minute is reported once it is over (nothing can start in it any more) and its requests have all answered. */
  const flush = () => {
    for (let m = 0; m < minutes; m++) {
      const over = m < minutes - 1 ? Date.now() >= plan.startAt + (m + 1) * MINUTE_MS : finished;
      if (!reported.has(m) && over && inFlight[m] === 0) {
        reported.add(m);
        send({ type: "minute", data: buckets[m]! });
      }
    }
  };
  const flushing = setInterval(flush, 1000);

  const json = { "content-type": "application/json" };
  const keyed = { ...json, "x-api-key": plan.apiKey };
  async function http(method: string, path: string, body: unknown, headers: Record<string, string>) {
    const res = await fetch(`${plan.publicUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, text: await res.text(), servedBy: res.headers.get("x-served-by") ?? "?" };
  }
  /** One request, timed from before sending to the whole answer read; an answer `ok` refuses, or none, is an error. */
  async function timed(op: Op, request: () => ReturnType<typeof http>, ok: (status: number, text: string) => boolean = (status) => status === 200): Promise<string | undefined> {
    const bucket = bucketOf(Date.now());
    inFlight[bucket.minute]!++;
    const t0 = performance.now();
    let failure: string | undefined;
    let answer: Awaited<ReturnType<typeof http>> | undefined;
    try {
      answer = await request();
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      failure = `no answer: ${String(error)}${cause ? ` (${cause.code ?? ""} ${cause.message ?? ""})` : ""}`;
    }
    const latency = performance.now() - t0;
    if (answer) {
      bucket.servedBy[answer.servedBy] = (bucket.servedBy[answer.servedBy] ?? 0) + 1;
      let fine = false;
      try {
        fine = ok(answer.status, answer.text);
      } catch {
        // an answer that does not parse is a wrong one
      }
      if (!fine) failure = `HTTP ${answer.status} from ${answer.servedBy}: ${answer.text.replace(/\s+/g, " ").slice(0, 200)}`;
    }
    const stats = bucket.ops[op];
    if (failure === undefined) stats.latencies.push(latency);
    else {
      stats.errors++;
      if (bucket.errorSamples.length < 5) bucket.errorSamples.push(`${op}: ${failure}`);
    }
    inFlight[bucket.minute]!--;
    flush();
    return failure === undefined ? answer?.text : undefined;
  }

  const recent: string[] = [];
  let n = 0;
  async function cardFlow() {
    const i = n++;
    const init = await timed("initialize", () =>
      http("POST", "/api/transactions/initialize", { amount: 1000 + (i % 5000), email: `payer${i % 500}@soak.test`, payment_channel_id: plan.cardChannelId }, { ...keyed, "idempotency-key": randomUUID() }),
    );
    if (!init) return;
    const reference = (JSON.parse(init) as { reference: string }).reference;
    if (!(await timed("pay", () => http("POST", `/payment/checkout/${reference}/pay`, CARD, json)))) return;
    // Right after the payment, through the balancer: any instance must read the payment's own write.
    await timed("verify", () => http("GET", `/api/transactions/verify/${reference}`, undefined, keyed), (status, text) => status === 200 && (JSON.parse(text) as { status: string }).status === "completed");
    recent[recent.length < 1000 ? recent.length : i % 1000] = reference;
  }
  async function stkFlow() {
    const i = n++;
    const push = await timed("stk push", () =>
      http("POST", "/api/momo/stk-push", { amount: 100 * (1 + (i % 1000)), phone_number: "254708374149", payment_channel_id: plan.mpesaChannelId }, { ...keyed, "idempotency-key": randomUUID() }),
    );
    if (!push) return;
    const checkout = (JSON.parse(push) as { transaction: { checkout_request_id: string } }).transaction.checkout_request_id;
    await sleep(PIN_MS);
    // Daraja's callback, to the URL the push named, through the balancer (as the fake's sendStkCallback with callbackOrigin).
    const target = new URL(daraja.pushes.get(checkout)!.body.CallBackURL as string);
    const body = daraja.stkCallbackBody(checkout);
    await timed("stk callback", () => http("POST", `${target.pathname}${target.search}`, body, json));
  }
  const list = () => timed("list", () => http("GET", "/api/transactions/list?limit=20", undefined, keyed));
  const verify = async () => {
    const reference = recent[Math.floor(Math.random() * recent.length)];
    await (reference ? timed("verify", () => http("GET", `/api/transactions/verify/${reference}`, undefined, keyed)) : list());
  };
  const units = { card: cardFlow, list, stk: stkFlow, verify };

  const interval = (1000 * REQUESTS_PER_ROUND) / (UNITS.length * plan.rate);
  const flows = new Set<Promise<unknown>>();
  for (let i = 0; ; i++) {
    const due = plan.startAt + i * interval;
    if (due >= end) break;
    if (due > Date.now()) await sleep(due - Date.now());
    const bucket = bucketOf(due);
    bucket.behindMs = Math.max(bucket.behindMs, Date.now() - due);
    const flow = units[UNITS[i % UNITS.length]!]().catch((error) => console.error("load generator flow:", error));
    flows.add(flow);
    void flow.finally(() => flows.delete(flow));
    // The fake records every request it serves; the run does not need them.
    if (i % 1000 === 0) daraja.requests.length = 0;
  }
  await Promise.race([Promise.all(flows), sleep(DRAIN_MS)]);
  const unfinished = inFlight.reduce((a, b) => a + b, 0);
  for (const bucket of buckets) {
    bucket.unanswered = inFlight[bucket.minute]!;
    if (bucket.unanswered) bucket.errorSamples.push(`${bucket.unanswered} request(s) unanswered ${DRAIN_MS / 1000} s after the load ended`);
    inFlight[bucket.minute] = 0;
  }
  finished = true;
  clearInterval(flushing);
  flush();
  send({ type: "done", unfinished });
}

// ---------------------------------------------------------------------------------------------------------------
// Watching the processes

interface Sample {
  at: number;
  rssMb: number[];
  /** utime + stime in clock ticks: each instance, then the other processes of the run (OTHERS), then the whole machine. */
  cpuTicks: number[];
  others: number[];
  machineBusy: number;
  machineTotal: number;
}
/** The run's other processes, whose CPU is reported beside the instances' (what else the 2 cores did). */
const OTHERS = ["PostgreSQL", "Redis", "haproxy", "load generator", "this process"] as const;

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return line ? Number(line.split(/\s+/)[1]) / 1024 : Number.NaN;
}
/** From /proc/<pid>/stat, after the command name (which may hold spaces): state, ppid, ..., utime, stime. */
function procStat(pid: number | string): { ppid: number; ticks: number } | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return undefined; // gone
  }
}
const cpuTicks = (pid: number) => procStat(pid)?.ticks ?? Number.NaN;
const allPids = () => readdirSync("/proc").filter((name) => /^\d+$/.test(name));
/** The process whose command line has all of `parts` (the PostgreSQL postmaster by its port, redis-server by its address). */
function findPid(...parts: string[]): number {
  const pid = allPids().find((p) => {
    try {
      const cmdline = readFileSync(`/proc/${p}/cmdline`, "utf8").replaceAll("\0", " ");
      return parts.every((part) => cmdline.includes(part));
    } catch {
      return false;
    }
  });
  if (!pid) throw new Error(`no process with ${parts.join(" ")} in its command line`);
  return Number(pid);
}
/** A process and its children (PostgreSQL's backends; those that already exited are not counted). */
function treeTicks(pid: number): number {
  let ticks = cpuTicks(pid);
  for (const p of allPids()) {
    const stat = procStat(p);
    if (stat?.ppid === pid) ticks += stat.ticks;
  }
  return ticks;
}
function machineTicks(): { busy: number; total: number } {
  const [, ...values] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/);
  const ticks = values.map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  return { busy: total - ticks[3]! - ticks[4]!, total }; // idle and iowait
}

interface TableSizes {
  [table: string]: { rows: number; bytes: number };
}
const TABLES = ["transactions", "events", "jobs", "webhook_deliveries", "idempotency_keys"] as const;

async function tableSizes(db: pg.Pool): Promise<TableSizes> {
  const { rows } = await db.query<{ name: string; rows: string; bytes: string }>(
    TABLES.map((t) => `SELECT '${t}' AS name, (SELECT count(*) FROM ${t}) AS rows, pg_total_relation_size('${t}') AS bytes`).join(" UNION ALL "),
  );
  return Object.fromEntries(rows.map((r) => [r.name, { rows: Number(r.rows), bytes: Number(r.bytes) }]));
}

interface Subscriber {
  client: Client;
  /** Stored events received (ids), and how many came again. */
  ids: Set<string>;
  duplicates: number;
  /** Closed sockets, GraphQL errors, completions: every one is an error in a soak without restarts. */
  errors: string[];
}

function subscribe(publicUrl: string, apiKey: string, closing: () => boolean): { subscriber: Subscriber; ready: Promise<void> } {
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const subscriber: Subscriber = { client: undefined as unknown as Client, ids: new Set(), duplicates: 0, errors: [] };
  subscriber.client = createClient({
    url: `${publicUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { "X-API-Key": apiKey },
    lazy: false,
    // A dropped socket is counted (and its events are missed); reconnecting keeps counting the rest.
    retryAttempts: 5,
    shouldRetry: () => true,
    on: { closed: (event) => void (closing() || subscriber.errors.push(`socket closed (${(event as { code?: number }).code})`)) },
  });
  subscriber.client.subscribe<{ transactionEvents: { id: string; type: string } }>(
    { query: "subscription { transactionEvents(ready: true) { id type occurredAt } }" },
    {
      next: (value) => {
        if ((value.extensions as { ready?: boolean } | undefined)?.ready) return markReady();
        const event = value.data?.transactionEvents;
        if (!event) return void subscriber.errors.push(JSON.stringify(value.errors ?? value).slice(0, 200));
        // Live notices of checkouts being started are not stored events; webhooks and expectations count stored ones.
        if (event.type === "transaction.created") return;
        if (subscriber.ids.has(event.id)) subscriber.duplicates++;
        else subscriber.ids.add(event.id);
      },
      error: (error) => void subscriber.errors.push(`subscription error: ${error instanceof Error ? error.message : JSON.stringify(error).slice(0, 200)}`),
      complete: () => void (closing() || subscriber.errors.push("the server completed the subscription")),
    },
  );
  return { subscriber, ready };
}

// ---------------------------------------------------------------------------------------------------------------
// The run

interface Instance {
  name: string;
  child: ChildProcess;
  log: string;
  exited: Promise<number | string>;
}

async function main() {
  for (const [name, value] of [["--minutes", MINUTES], ["--rate", RATE], ["--subscribers", SUBSCRIBERS]] as const) {
    if (!(value > 0)) throw new Error(`${name} must be a positive number`);
  }
  const started = Date.now();
  const loadBefore = loadavg()[0]!;
  const durationMs = Math.round(MINUTES * MINUTE_MS);
  const minutes = Math.ceil(durationMs / MINUTE_MS);
  const work = mkdtempSync(join(tmpdir(), "bench-soak-"));
  const instances: Instance[] = [];
  let haproxy: ChildProcess | undefined;
  let load: ChildProcess | undefined;
  const kill = () => {
    for (const child of [...instances.map((i) => i.child), haproxy, load]) if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const deadline = setTimeout(() => {
    console.error(`bench/soak.ts: gave up after ${Math.round((durationMs + DRAIN_MS + TAIL_MS + SETUP_BUDGET_MS) / 60_000)} minutes`);
    kill();
    process.exit(2); // test/support's exit handlers stop PostgreSQL and Redis
  }, durationMs + DRAIN_MS + TAIL_MS + SETUP_BUDGET_MS);
  process.on("SIGINT", () => {
    kill();
    process.exit(130);
  });

  let postgres: PostgresServer | undefined;
  let redis: RedisServer | undefined;
  let receiver: WebhookReceiver | undefined;
  let db: pg.Pool | undefined;
  const subscribers: Subscriber[] = [];
  let closingSubscribers = false;
  try {
    execFileSync("npm", ["run", "build", "--silent"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });

    // The load generator first: it runs the fake Daraja, whose address the gateways need.
    load = fork(fileURLToPath(import.meta.url), ["--role=load"], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    const loadMinutes: LoadMinute[] = [];
    let onMinute: (m: LoadMinute) => void = () => {};
    let loadDone!: (unfinished: number) => void;
    let loadFailed!: (error: Error) => void;
    const loadFinished = new Promise<number>((resolve, reject) => ((loadDone = resolve), (loadFailed = reject)));
    loadFinished.catch(() => {}); // awaited after the set-up; a failure before that surfaces there
    const darajaReady = new Promise<{ url: string; channelConfig: Record<string, unknown> }>((resolve, reject) => {
      load!.once("exit", (code, signal) => {
        const error = new Error(`the load generator exited (${code ?? signal}) before the end of the run`);
        reject(error);
        loadFailed(error);
      });
      load!.on("message", (message: FromLoad) => {
        if (message.type === "daraja") resolve(message);
        else if (message.type === "minute") {
          loadMinutes[message.data.minute] = message.data;
          onMinute(message.data);
        } else loadDone(message.unfinished);
      });
    });

    [postgres, redis, receiver] = await Promise.all([startPostgres(), startRedis(), startWebhookReceiver()]);
    const databaseUrl = await postgres.createDatabase();
    const dbEnv = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: randomBytes(32).toString("hex"), DATA_DIR: join(work, "data") };
    const baseEnv = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" };
    // The CLI migrates the empty database, then the instances start on it together.
    const created = JSON.parse(
      execFileSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "merchant", "create", "--name", "Soak", "--email", "soak@bench.test"], {
        cwd: repoRoot,
        env: { ...baseEnv, ...dbEnv, LOG_LEVEL: "warn" },
      }).toString(),
    ) as { merchant: { id: number }; keys: { test: string } };
    const apiKey = created.keys.test;
    const daraja = await darajaReady;

    const ports: number[] = [];
    for (let i = 0; i < INSTANCES + 2; i++) ports.push(await freePort());
    const [publicPort, statsPort] = ports.splice(INSTANCES, 2) as [number, number];
    const publicUrl = `http://127.0.0.1:${publicPort}`;
    const statsUrl = `http://127.0.0.1:${statsPort}/stats`;
    const env = {
      ...baseEnv,
      ...dbEnv,
      REDIS_URL: redis.url,
      NODE_ENV: "production",
      LOG_LEVEL: "warn",
      RATE_LIMIT_ENABLED: "false",
      HOST: "127.0.0.1",
      TRUST_PROXY: "loopback",
      // The merchant's endpoint is the loopback receiver.
      ALLOW_PRIVATE_URLS: "true",
      // Daraja is the fake; callbacks are addressed to a public name the fake rewrites to haproxy.
      MPESA_BASE_URL: daraja.url,
      PUBLIC_BASE_URL: "https://pay.gateway.test",
    };
    for (const [i, port] of ports.entries()) {
      const log = join(work, `gw${i + 1}.log`);
      const child = spawn(process.execPath, ["dist/main.js"], { cwd: repoRoot, env: { ...env, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
      const out = createWriteStream(log);
      child.stdout!.pipe(out);
      child.stderr!.pipe(out);
      const exited = new Promise<number | string>((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
      instances.push({ name: `gw${i + 1}`, child, log, exited });
    }
    await Promise.all(ports.map((port) => waitForOk(`http://127.0.0.1:${port}/ready`)));

    // deploy/haproxy.cfg as it ships, with these servers in place of the Docker DNS template; each answer names its
    // server (for error reports), and only abnormal requests are logged (to count them).
    const servers = ports.map((port, i) => `    server gw${i + 1} 127.0.0.1:${port}`).join("\n");
    const config = readFileSync(join(repoRoot, "deploy/haproxy.cfg"), "utf8")
      .replace(/^ {4}server-template .*$/gm, servers)
      .replace(/^ {4}option dontlognull$/m, "    option dontlognull\n    option dontlog-normal")
      .replace(/^frontend public\n/m, "frontend public\n    http-after-response set-header X-Served-By %s\n");
    if (!config.includes(servers) || !config.includes("dontlog-normal")) throw new Error("deploy/haproxy.cfg changed shape: update bench/soak.ts");
    writeFileSync(join(work, "haproxy.cfg"), config);
    const haproxyLog = join(work, "haproxy.log");
    haproxy = spawn("haproxy", ["-db", "-f", join(work, "haproxy.cfg")], {
      env: { PATH: baseEnv.PATH, HAPROXY_BIND: `127.0.0.1:${publicPort}`, HAPROXY_STATS: `127.0.0.1:${statsPort}`, HAPROXY_SOCKET: join(work, "haproxy.sock") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const haproxyOut = createWriteStream(haproxyLog);
    haproxy.stdout!.pipe(haproxyOut);
    haproxy.stderr!.pipe(haproxyOut);
    await waitFor(async () => Object.values(await serverStates(statsUrl)).filter((s) => s === "UP").length === INSTANCES, 30_000, "haproxy to see every instance UP");

    // The merchant's set-up, through the balancer: a card channel, an M-Pesa channel on the fake, a webhook endpoint for every event.
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${publicUrl}${path}`, { method: "POST", headers: { "x-api-key": apiKey, "content-type": "application/json" }, body: JSON.stringify(body) });
      const text = await res.text();
      if (res.status !== 200 && res.status !== 201) throw new Error(`POST ${path}: HTTP ${res.status} ${text}`);
      return JSON.parse(text) as any;
    };
    const cardChannelId = (await post("/api/payment-channels/create", { name: "Cards", provider: "sandbox" })).channel.id as number;
    const mpesaChannelId = (await post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig })).channel.id as number;
    const endpointId = Number((await post("/v1/webhooks", { url: `${receiver.url}/hooks` })).data.id);

    const opened = Array.from({ length: SUBSCRIBERS }, () => subscribe(publicUrl, apiKey, () => closingSubscribers));
    subscribers.push(...opened.map((o) => o.subscriber));
    await Promise.race([Promise.all(opened.map((o) => o.ready)), sleep(30_000).then(() => Promise.reject(new Error("subscriptions not ready after 30 s")))]);
    console.log(`${INSTANCES} instances behind haproxy, ${SUBSCRIBERS} subscriptions ready after ${((Date.now() - started) / 1000).toFixed(1)} s; load ${RATE} req/s for ${MINUTES} min`);

    db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    db.on("error", (error) => console.error(`bench pool: ${error.message}`));
    const startAt = Date.now() + 1000;
    load.send({ type: "start", publicUrl, apiKey, cardChannelId, mpesaChannelId, startAt, durationMs, rate: RATE } satisfies LoadPlan);

    // Samples every SAMPLE_MS, table sizes at the end of each minute.
    const samples: Sample[] = [];
    const postmaster = findPid("postgres", `-p ${new URL(databaseUrl).port}`);
    const redisPid = findPid("redis-server", `:${new URL(redis.url).port}`);
    const sample = () => {
      const machine = machineTicks();
      samples.push({
        at: Date.now(),
        rssMb: instances.map((i) => rssMb(i.child.pid!)),
        cpuTicks: instances.map((i) => cpuTicks(i.child.pid!)),
        others: [treeTicks(postmaster), cpuTicks(redisPid), cpuTicks(haproxy!.pid!), cpuTicks(load!.pid!), cpuTicks(process.pid)],
        machineBusy: machine.busy,
        machineTotal: machine.total,
      });
    };
    await sleep(startAt - Date.now());
    sample();
    const sampling = setInterval(sample, SAMPLE_MS);
    const tables: TableSizes[] = [];
    const minuteEnds = Array.from({ length: minutes }, (_, m) => Math.min(startAt + (m + 1) * MINUTE_MS, startAt + durationMs));
    const snapshots = minuteEnds.map(
      (at, m) =>
        new Promise<void>((resolve) =>
          setTimeout(() => {
            sample();
            void tableSizes(db!).then(
              (sizes) => resolve(void (tables[m] = sizes)),
              (error) => resolve(void console.error(`table sizes: ${error.message}`)),
            );
          }, at - Date.now()),
        ),
    );
    onMinute = (m) => {
      const requests = OPS.reduce((a, op) => a + m.ops[op].latencies.length + m.ops[op].errors, 0);
      const errors = OPS.reduce((a, op) => a + m.ops[op].errors, 0);
      const rss = samples.filter((s) => s.at <= minuteEnds[m.minute]!).at(-1)?.rssMb.map((v) => v.toFixed(0)).join(" / ");
      const p99s = OPS.map((op) => `${op} ${percentile(sorted(m.ops[op].latencies), 99).toFixed(0)}`).join(", ");
      console.log(`minute ${m.minute + 1}: ${requests} requests, ${errors} errors; p99 (ms) ${p99s}; RSS ${rss} MB${m.errorSamples.length ? `\n  ${m.errorSamples.join("\n  ")}` : ""}`);
    };
    for (const m of loadMinutes) if (m) onMinute(m);

    const unfinished = await loadFinished;
    await Promise.all(snapshots);
    clearInterval(sampling);
    console.log(`load done ${((Date.now() - startAt - durationMs) / 1000).toFixed(1)} s after its end; waiting for webhooks and events still owed`);

    // What is still owed at the end: every webhook due delivered, every stored event to every subscriber (bounded wait).
    const events = async () =>
      (await db!.query<{ id: string; created_at: Date }>("SELECT id::text, created_at FROM events WHERE merchant_id = $1 AND mode = 'test' AND transaction_id IS NOT NULL", [created.merchant.id])).rows;
    const deliveries = async () =>
      (
        await db!.query<{ id: string; created_at: Date }>("SELECT d.event_id::text AS id, e.created_at FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.endpoint_id = $1", [endpointId])
      ).rows;
    const receivedIds = () => new Set(receiver!.received.map((r) => r.headers["webhook-id"]!));
    const tailStart = Date.now();
    let due = await deliveries();
    let stored = await events();
    while (Date.now() - tailStart < TAIL_MS) {
      const got = receivedIds();
      if (due.every((d) => got.has(d.id)) && subscribers.every((s) => stored.every((e) => s.ids.has(e.id)))) break;
      await sleep(500);
      [due, stored] = await Promise.all([deliveries(), events()]);
    }
    const tailMs = Date.now() - tailStart;
    const deliveryStates = (await db.query<{ status: string; n: string }>("SELECT status, count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1 GROUP BY status", [endpointId])).rows;

    // Shut down as an operator would: SIGTERM, each instance drains and exits 0.
    closingSubscribers = true;
    await Promise.all(subscribers.map((s) => s.client.dispose()));
    for (const instance of instances) instance.child.kill("SIGTERM");
    const exits = await Promise.all(instances.map((i) => Promise.race([i.exited, sleep(30_000).then(() => "still running 30 s after SIGTERM")])));
    haproxy.kill("SIGTERM");
    load.send({ type: "close" });

    const logLines = instances.map((i) => readFileSync(i.log, "utf8").split("\n").filter((l) => l.trim()));
    // haproxy logs (dontlog-normal) requests that went wrong, and every server going DOWN or UP (twice: log and stderr).
    const haproxyText = readFileSync(haproxyLog, "utf8").split("\n");
    const haproxyLines = {
      stateChanges: haproxyText.filter((l) => /^Server gateways\/\S+ is (DOWN|UP)/.test(l)),
      requests: haproxyText.filter((l) => / public gateways\//.test(l)),
    };

    const result = report({
      loadMinutes,
      samples,
      tables,
      minuteEnds,
      startAt,
      minutes,
      due,
      stored,
      receiver,
      subscribers,
      unfinished,
      tailMs,
      deliveryStates,
      exits,
      logLines,
      haproxyLines,
    });
    const context =
      `${MINUTES} min at ${RATE} req/s (open loop), ${SUBSCRIBERS} subscriptions; ${INSTANCES} gateway instances (compiled build, NODE_ENV=production) behind haproxy ` +
      `(${execFileSync("haproxy", ["-v"]).toString().split("\n")[0]!.replace(/ - https.*/, "")}) on one throwaway PostgreSQL (fsync off) and Redis; Node ${process.version}, ` +
      `${availableParallelism()} CPUs (load ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after), ${new Date().toISOString().slice(0, 10)}, run took ${Math.round((Date.now() - started) / 1000)} s`;
    console.log(`\n${context}\n\n${result.tables}\n\n${result.goals}\n\n${result.notes}`);
    if (process.argv.includes("--write")) {
      writeReadmeSection("## Soak (`bench/soak.ts`)", [README_INTRO, "", "<!-- soak:start -->", context, "", result.tables, "", result.goals, "", result.notes, "<!-- soak:end -->"].join("\n"));
      console.log("recorded in bench/README.md");
    }
    if (result.missed.length) {
      console.error(`\nGoals missed: ${result.missed.join("; ")}`);
      process.exitCode = 1;
    } else console.log("\nEvery goal met.");
  } finally {
    closingSubscribers = true;
    await Promise.all(subscribers.map((s) => s.client.dispose())).catch(() => {});
    kill();
    await db?.end().catch(() => {});
    await receiver?.close().catch(() => {});
    await redis?.stop();
    await postgres?.stop();
    rmSync(work, { recursive: true, force: true });
    clearTimeout(deadline);
  }
}

async function waitForOk(url: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(() => fetch(url).then((r) => r.ok, () => false), timeoutMs, `${url} to answer 200`);
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** Each server's state as haproxy sees it (UP, DOWN, ...), from its stats page. */
async function serverStates(statsUrl: string): Promise<Record<string, string>> {
  const [header, ...rows] = (await (await fetch(`${statsUrl};csv`)).text()).trim().split("\n");
  const columns = header!.replace(/^# /, "").split(",");
  const states: Record<string, string> = {};
  for (const cells of rows.map((r) => r.split(","))) {
    if (cells[columns.indexOf("pxname")] === "gateways" && /^gw\d+$/.test(cells[columns.indexOf("svname")]!)) states[cells[columns.indexOf("svname")]!] = cells[columns.indexOf("status")]!;
  }
  return states;
}

// ---------------------------------------------------------------------------------------------------------------
// Report

const README_INTRO = `Three gateway instances behind the real haproxy (\`deploy/haproxy.cfg\`, its servers in place of the Docker DNS
template) on one throwaway PostgreSQL and one Redis, under a steady mixed load for a bounded time (default 10 minutes),
watched minute by minute. The instances run the compiled build (\`NODE_ENV=production\`, \`LOG_LEVEL=warn\`, rate
limiting off). A load generator in its own process sends requests through haproxy at a fixed total rate, open loop
(default 150 req/s; units start on schedule whether or not earlier ones have finished), in rounds of card flow, list,
card flow, STK flow, verify: a card flow is initialize (with an Idempotency-Key) -> pay with the sandbox card on the
hosted checkout -> verify, which must read \`completed\`; an STK flow is an STK push (with an Idempotency-Key) to the
fake Daraja (\`test/fakes/daraja.ts\`, run by the load generator) -> 1 s for the PIN -> Daraja's success callback,
posted through haproxy. Every event goes to a webhook endpoint on a loopback receiver and to the live
\`transactionEvents\` subscriptions (graphql-ws through haproxy, opened before the load with \`ready: true\`).
Per minute: p50 / p99 per operation (from before sending to the whole answer), errors (non-2xx, no answer, a verify
after a payment not reading \`completed\`), requests answered by each instance (haproxy's \`X-Served-By\`), each
instance's RSS (mean of \`VmRSS\` sampled every 5 s), the CPU of every process of the run and of the rest, webhook lag (arrival at the receiver - the body's \`timestamp\`, the event's \`created_at\`) and deliveries against
\`webhook_deliveries\` rows, subscription events received against the stored events times the subscriptions, and
the row counts and \`pg_total_relation_size\` of the growing tables. Webhooks and events are counted by the minute
their event was created. After the load, the run waits up to ${TAIL_MS / 1000} s for deliveries and events still owed.

Goals (the issue's): zero errors; RSS growth under ${RSS_GROWTH_LIMIT * 100} % after warm-up (each instance, minute 2 against the last
minute); p99 in the last minute at most ${P99_GROWTH_LIMIT * 100} % above the second minute's (each operation; faster is fine); every
webhook delivered. Also checked: every stored event reached every subscription. The RSS and p99 goals need at least 3
minutes. Run with \`node --import tsx bench/soak.ts [--minutes 10] [--rate 150] [--subscribers 20] [--write]\`: needs
\`haproxy\`, \`initdb\`/\`pg_ctl\` and \`redis-server\`; takes the minutes asked plus about a minute; exits non-zero
naming the goals missed. Figures are only meaningful on an otherwise quiet machine.`;

interface ReportInput {
  loadMinutes: LoadMinute[];
  samples: Sample[];
  tables: TableSizes[];
  minuteEnds: number[];
  startAt: number;
  minutes: number;
  due: { id: string; created_at: Date }[];
  stored: { id: string; created_at: Date }[];
  receiver: WebhookReceiver;
  subscribers: Subscriber[];
  unfinished: number;
  tailMs: number;
  deliveryStates: { status: string; n: string }[];
  exits: (number | string)[];
  logLines: string[][];
  haproxyLines: { stateChanges: string[]; requests: string[] };
}

const int = (v: number) => Math.round(v).toLocaleString("en");
const ms = (v: number) => (Number.isNaN(v) ? "-" : v < 10 ? v.toFixed(1) : v.toFixed(0));
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const pct = (v: number) => `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)} %`;

function report(r: ReportInput) {
  const minuteOf = (t: number) => Math.min(r.minutes - 1, Math.max(0, Math.floor((t - r.startAt) / MINUTE_MS)));
  const label = (m: number) => {
    const length = (r.minuteEnds[m]! - (r.startAt + m * MINUTE_MS)) / 1000;
    return length < 60 ? `${m + 1} (${length.toFixed(0)} s)` : String(m + 1);
  };
  const seconds = (m: number) => (r.minuteEnds[m]! - (r.startAt + m * MINUTE_MS)) / 1000;
  const instances = r.exits.length;

  // Webhooks: first arrival per webhook-id; lag and counts by the minute of the event.
  const arrivals = new Map<string, { at: number; lag: number }>();
  for (const w of r.receiver.received) {
    const id = w.headers["webhook-id"]!;
    if (!arrivals.has(id)) arrivals.set(id, { at: w.receivedAt, lag: w.receivedAt - Date.parse((w.json as { timestamp: string }).timestamp) });
  }
  const webhookDuplicates = r.receiver.received.length - arrivals.size;
  const hooks = Array.from({ length: r.minutes }, () => ({ due: 0, delivered: 0, lags: [] as number[] }));
  for (const d of r.due) {
    const h = hooks[minuteOf(d.created_at.getTime())]!;
    h.due++;
    const arrival = arrivals.get(d.id);
    if (arrival) {
      h.delivered++;
      h.lags.push(arrival.lag);
    }
  }
  const dueIds = new Set(r.due.map((d) => d.id));
  const unexpectedWebhooks = [...arrivals.keys()].filter((id) => !dueIds.has(id)).length;

  // Subscriptions: each subscription should have every stored event.
  const subs = Array.from({ length: r.minutes }, () => ({ expected: 0, received: 0 }));
  for (const e of r.stored) {
    const s = subs[minuteOf(e.created_at.getTime())]!;
    s.expected += r.subscribers.length;
    s.received += r.subscribers.filter((sub) => sub.ids.has(e.id)).length;
  }
  const subscriptionErrors = r.subscribers.flatMap((s) => s.errors);
  const subscriptionDuplicates = r.subscribers.reduce((a, s) => a + s.duplicates, 0);

  // Per minute from the samples: mean RSS, CPU share of each instance and of the machine.
  const clockTicks = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;
  const perMinute = Array.from({ length: r.minutes }, (_, m) => {
    const from = r.startAt + m * MINUTE_MS;
    const inside = r.samples.filter((s) => s.at >= from && s.at <= r.minuteEnds[m]! + 1000);
    const first = r.samples.filter((s) => s.at <= from + 1000).at(-1) ?? inside[0]!;
    const last = inside.at(-1)!;
    const wall = (last.at - first.at) / 1000;
    return {
      rss: Array.from({ length: instances }, (_, i) => inside.reduce((a, s) => a + s.rssMb[i]!, 0) / inside.length),
      cpu: Array.from({ length: instances }, (_, i) => (last.cpuTicks[i]! - first.cpuTicks[i]!) / clockTicks / wall),
      others: OTHERS.map((_, i) => (last.others[i]! - first.others[i]!) / clockTicks / wall),
      /** In cores, as the others: busy share of all ticks times the core count. */
      machine: ((last.machineBusy - first.machineBusy) / (last.machineTotal - first.machineTotal)) * availableParallelism(),
    };
  });

  const errorsIn = (m: LoadMinute) => OPS.reduce((a, op) => a + m.ops[op].errors, m.unanswered);
  const latencyRows = r.loadMinutes.map((m) => {
    const requests = OPS.reduce((a, op) => a + m.ops[op].latencies.length + m.ops[op].errors, 0);
    const cells = OPS.map((op) => {
      const s = sorted(m.ops[op].latencies);
      return `${ms(percentile(s, 50))} / ${ms(percentile(s, 99))}`;
    });
    return `| ${label(m.minute)} | ${(requests / seconds(m.minute)).toFixed(1)} | ${cells.join(" | ")} | ${errorsIn(m)} | ${int(m.behindMs)} |`;
  });
  const latencyTable = [
    "Latency through haproxy, p50 / p99 (ms), by the minute a request started:",
    "",
    `| minute | req/s | ${OPS.join(" | ")} | errors | generator behind schedule, max (ms) |`,
    `|---|---:|${OPS.map(() => "---:").join("|")}|---:|---:|`,
    ...latencyRows,
  ].join("\n");

  const names = Array.from({ length: instances }, (_, i) => `gw${i + 1}`);
  const processTable = [
    "Instances, webhooks and subscriptions per minute (webhooks and events by the minute their event was created):",
    "",
    `| minute | requests answered by ${names.join(" / ")} | RSS ${names.join(" / ")} (MB) | webhook lag p50 / p99 (ms) | webhooks delivered / due | subscription events received / expected |`,
    "|---|---:|---:|---:|---:|---:|",
    ...perMinute.map((p, m) => {
      const lags = sorted(hooks[m]!.lags);
      const served = names.map((name) => int(r.loadMinutes[m]?.servedBy[name] ?? 0)).join(" / ");
      return `| ${label(m)} | ${served} | ${p.rss.map((v) => v.toFixed(0)).join(" / ")} | ${ms(percentile(lags, 50))} / ${ms(percentile(lags, 99))} | ${int(hooks[m]!.delivered)} / ${int(hooks[m]!.due)} | ${int(subs[m]!.received)} / ${int(subs[m]!.expected)} |`;
    }),
  ].join("\n");

  const cores = (v: number) => v.toFixed(2);
  const cpuTable = [
    `CPU per minute in cores (1.00 = one core busy all minute; the machine has ${availableParallelism()}); "rest" is everything else on the machine:`,
    "",
    `| minute | ${names.join(" | ")} | ${OTHERS.join(" | ")} | rest | machine |`,
    `|---|${[...names, ...OTHERS].map(() => "---:").join("|")}|---:|---:|`,
    ...perMinute.map((p, m) => {
      const ours = [...p.cpu, ...p.others].reduce((a, b) => a + b, 0);
      return `| ${label(m)} | ${[...p.cpu, ...p.others].map(cores).join(" | ")} | ${cores(Math.max(0, p.machine - ours))} | ${cores(p.machine)} |`;
    }),
  ].join("\n");

  const sizeTable = [
    "Table sizes at the end of each minute, rows / pg_total_relation_size:",
    "",
    `| minute | ${TABLES.join(" | ")} |`,
    `|---|${TABLES.map(() => "---:").join("|")}|`,
    ...r.tables.map((t, m) => (t ? `| ${label(m)} | ${TABLES.map((name) => `${int(t[name]!.rows)} / ${mb(t[name]!.bytes)}`).join(" | ")} |` : `| ${label(m)} | ${TABLES.map(() => "-").join(" | ")} |`)),
  ].join("\n");

  // Goals.
  const missed: string[] = [];
  const rows: string[] = [];
  const goal = (name: string, target: string, value: string, ok: boolean | undefined) => {
    rows.push(`| ${name} | ${target} | ${value} | ${ok === undefined ? "n/a (needs at least 3 minutes)" : ok ? "met" : "**not met**"} |`);
    if (ok === false) missed.push(`${name} (${value})`);
  };
  const httpErrors = r.loadMinutes.reduce((a, m) => a + errorsIn(m) - m.unanswered, 0);
  const byOp = OPS.map((op) => [op, r.loadMinutes.reduce((a, m) => a + m.ops[op].errors, 0)] as const).filter(([, n]) => n > 0);
  goal(
    "zero errors",
    "0",
    `${httpErrors} HTTP${byOp.length ? ` (${byOp.map(([op, n]) => `${op} ${n}`).join(", ")})` : ""}, ${r.unfinished} unanswered, ${subscriptionErrors.length} subscription`,
    httpErrors + r.unfinished + subscriptionErrors.length === 0,
  );
  const comparable = r.minutes >= 3;
  const second = 1;
  const lastMinute = r.minutes - 1;
  for (let i = 0; i < instances; i++) {
    const growth = comparable ? perMinute[lastMinute]!.rss[i]! / perMinute[second]!.rss[i]! - 1 : Number.NaN;
    goal(`RSS growth, ${names[i]} (minute 2 -> ${lastMinute + 1})`, `< +${RSS_GROWTH_LIMIT * 100} %`, comparable ? `${pct(growth)} (${perMinute[second]!.rss[i]!.toFixed(0)} -> ${perMinute[lastMinute]!.rss[i]!.toFixed(0)} MB)` : "", comparable ? growth < RSS_GROWTH_LIMIT : undefined);
  }
  for (const op of OPS) {
    const p99 = (m: number) => percentile(sorted(r.loadMinutes[m]?.ops[op].latencies ?? []), 99);
    const growth = comparable ? p99(lastMinute) / p99(second) - 1 : Number.NaN;
    goal(`p99 ${op} (minute 2 -> ${lastMinute + 1})`, `<= +${P99_GROWTH_LIMIT * 100} %`, comparable ? `${pct(growth)} (${ms(p99(second))} -> ${ms(p99(lastMinute))} ms)` : "", comparable ? growth <= P99_GROWTH_LIMIT : undefined);
  }
  const delivered = r.due.filter((d) => arrivals.has(d.id)).length;
  goal("every webhook delivered", `${int(r.due.length)} due`, `${int(delivered)} delivered`, delivered === r.due.length);
  const expected = r.stored.length * r.subscribers.length;
  const received = subs.reduce((a, s) => a + s.received, 0);
  goal("every event to every subscription", `${int(expected)} expected`, `${int(received)} received`, received === expected);
  const goals = ["Goals:", "", "| goal | target | this run | |", "|---|---:|---:|---|", ...rows].join("\n");

  const states = r.deliveryStates.map((s) => `${s.status} ${int(Number(s.n))}`).join(", ");
  const logCounts = r.logLines.map((lines, i) => `${names[i]} ${lines.length}`).join(", ");
  const notes = [
    `Load: ${int(r.loadMinutes.reduce((a, m) => a + OPS.reduce((b, op) => b + m.ops[op].latencies.length + m.ops[op].errors, 0), 0))} requests; ` +
      `${r.unfinished} still unanswered ${DRAIN_MS / 1000} s after the last unit started. Webhooks: deliveries ${states || "none"}; ${webhookDuplicates} duplicate arrivals, ` +
      `${unexpectedWebhooks} not due. Subscriptions: ${subscriptionDuplicates} duplicate events${subscriptionErrors.length ? `, errors: ${[...new Set(subscriptionErrors)].slice(0, 3).join("; ")}` : ""}. ` +
      `The tail took ${(r.tailMs / 1000).toFixed(1)} s. SIGTERM at the end: ${r.exits.map((code, i) => `${names[i]} exited ${code}`).join(", ")}. ` +
      `Gateway log lines at warn or above: ${logCounts}; haproxy: ${r.haproxyLines.stateChanges.length} server state changes, ${r.haproxyLines.requests.length} requests logged as abnormal.`,
    ...r.logLines.flatMap((lines, i) => lines.slice(0, 3).map((l) => `- ${names[i]}: \`${l.slice(0, 300)}\``)),
    ...[...r.haproxyLines.stateChanges.slice(0, 3), ...r.haproxyLines.requests.slice(0, 3)].map((l) => `- haproxy: \`${l.slice(0, 300)}\``),
    ...r.loadMinutes.flatMap((m) => m.errorSamples.slice(0, 3).map((s) => `- minute ${m.minute + 1}: ${s}`)),
  ].join("\n");
  return { tables: [latencyTable, processTable, cpuTable, sizeTable].join("\n\n"), goals, notes, missed };
}

if (process.argv.includes("--role=load")) loadGenerator();
else
  main().then(
    () => process.exit(),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
