/**
 * The hot paths as an operator sizing a deployment sees them: wrk (its own process, 1 thread) against the
 * gateway (its own process, NODE_ENV=production, LOG_LEVEL=silent, RATE_LIMIT_ENABLED=false) on a
 * throwaway PostgreSQL; against the same build in production settings (rate limits on Redis that no run
 * reaches, LOG_LEVEL=info to a file, an Idempotency-Key on every write) and against `npm start` (the
 * TypeScript loader); interleaved in the same run with bench/bare-server.ts (node:http + pg, pool 10,
 * the least SQL each operation needs, no auth) on the same database; then the gateway on the embedded
 * PGlite for the same operations; cold start to /ready and RSS.
 *
 *   node --import tsx bench/http.ts            # print the tables (about 8 minutes)
 *   node --import tsx bench/http.ts --write    # and record them in bench/README.md
 *
 * `--workers`: instead, verify and list with WORKERS=2 against WORKERS=1 and against bench/bare-cluster.ts (the
 * bare server as 2 processes), all on one PostgreSQL and Redis, interleaved (about 2 minutes; `--seconds N` and
 * `--rounds N` shorten a smoke run).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startFakeDaraja } from "../test/fakes/daraja.ts";
import { freePort } from "../test/support/local-server.ts";
import { startPostgres } from "../test/support/postgres.ts";
import { startRedis } from "../test/support/redis.ts";
import { writeReadmeSection } from "./readme.ts";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const SECONDS = Number(argument("--seconds") ?? 6);
const ROUNDS = Number(argument("--rounds") ?? 2);
const write = process.argv.includes("--write");
const children: ChildProcess[] = [];
const work = mkdtempSync(join(tmpdir(), "bench-http-"));
const started = Date.now();
const deadline = setTimeout(() => {
  console.error("bench/http.ts: gave up after 14 minutes");
  cleanup();
  process.exit(1);
}, 14 * 60_000);

function cleanup() {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
}
process.on("SIGINT", () => {
  cleanup();
  process.exit(130);
});

async function waitForOk(url: string, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await fetch(url).then((r) => r.ok, () => false))) {
    if (Date.now() > until) throw new Error(`${url} did not answer`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const baseEnv = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" };

/**
 * The gateway in its own process; resolves with its URL, pid and cold start (spawn to /ready 200). `how.start`:
 * "compiled" runs dist/main.js (`npm run start:prod`, built at the start of main()), "loader" runs what `npm start`
 * execs (`node --import tsx src/main.ts`, the README's start command). `how.logFile`: its stdout (the JSON log
 * lines) goes to that file, as an operator's would, instead of a pipe this process reads.
 */
async function startGateway(env: Record<string, string>, how: { start?: "compiled" | "loader"; logFile?: string } = {}) {
  const port = await freePort();
  const t0 = performance.now();
  const args = how.start === "loader" ? ["--import", "tsx", "src/main.ts"] : ["dist/main.js"];
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { ...baseEnv, NODE_ENV: "production", LOG_LEVEL: "silent", RATE_LIMIT_ENABLED: "false", HOST: "127.0.0.1", PORT: String(port), ...env },
    stdio: ["ignore", how.logFile ? openSync(how.logFile, "a") : "pipe", "inherit"],
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (c: Buffer) => (output += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/ready`);
  return { url, child, coldStartMs: performance.now() - t0, output: () => output };
}

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

interface WrkResult {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

const toMs = (value: string) => {
  const m = /^([\d.]+)(us|ms|s)$/.exec(value.trim());
  if (!m) return Number.NaN;
  return Number(m[1]) * (m[2] === "us" ? 0.001 : m[2] === "s" ? 1000 : 1);
};

function wrk(url: string, options: { connections?: number; headers?: Record<string, string>; post?: string; lua?: string } = {}): WrkResult {
  const args = ["-t1", `-c${options.connections ?? 32}`, `-d${SECONDS}s`, "--latency"];
  for (const [k, v] of Object.entries(options.headers ?? {})) args.push("-H", `${k}: ${v}`);
  const lua = options.lua ?? (options.post ? `wrk.method = "POST"\nwrk.body = '${options.post}'\nwrk.headers["Content-Type"] = "application/json"\n` : undefined);
  if (lua) {
    const script = join(work, `script-${randomBytes(4).toString("hex")}.lua`);
    writeFileSync(script, lua);
    args.push("-s", script);
  }
  args.push(url);
  const out = execFileSync("wrk", args, { encoding: "utf8" });
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1];
  if (!/^\s+99%/m.test(out)) console.error(`wrk ${url}: no latency distribution in\n${out}`);
  return {
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? Number.NaN),
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
    p50: toMs(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? ""),
    p99: toMs(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? ""),
    errors: Number(errors ?? 0),
  };
}

/**
 * A fixed request rate, open loop, from its own process (bench/fixed-rate.ts): each request sent when due and timed
 * from then, on up to 32 connections: the latency a client sees below saturation. `requests`: a JSONL file of
 * {path, body}, each sent once (the settling paths, whose every request needs its own pending row).
 */
function fixedRate(url: string, rate: number, options: { headers?: Record<string, string>; post?: string; requests?: string }) {
  const args = ["--import", "tsx", join(repoRoot, "bench/fixed-rate.ts"), url, "--rate", String(rate), "--connections", "32", "--seconds", String(SECONDS)];
  // A header holding [<id>] gets a fresh id on every request (a unique Idempotency-Key each).
  for (const [name, value] of Object.entries(options.headers ?? {})) args.push("--header", `${name}: ${value}`);
  if (options.post) args.push("--body", options.post);
  if (options.requests) args.push("--requests", options.requests);
  const out = execFileSync(process.execPath, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  return JSON.parse(out) as { requests: number; rps: number; p50: number; p99: number; errors: number; sendLagP99: number };
}

/** The gateways main() runs side by side, and the bare server. */
type GatewaySide = "silent" | "production" | "loader";
type Side = GatewaySide | "bare";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const best = (runs: WrkResult[]): WrkResult => ({ requests: runs.reduce((a, r) => a + r.requests, 0), rps: median(runs.map((r) => r.rps)), p50: median(runs.map((r) => r.p50)), p99: median(runs.map((r) => r.p99)), errors: runs.reduce((a, r) => a + r.errors, 0) });

/**
 * --workers: the same hot reads on one worker, on WORKERS=2 (src/cluster.ts) and on the bare server as two processes
 * (bench/bare-cluster.ts), interleaved per round; the issue's goal is >= 1.3x of one worker for WORKERS=2.
 */
async function workersMain() {
  execFileSync("npm", ["run", "build", "--silent"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const pgServer = await startPostgres();
  const redis = await startRedis();
  const databaseUrl = await pgServer.createDatabase();
  const encryptionKey = randomBytes(32).toString("hex");
  // Both gateways with Redis (WORKERS > 1 requires it), so the only difference is the worker count.
  const pgEnv = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: encryptionKey, DATA_DIR: join(work, "pg-data"), REDIS_URL: redis.url };
  try {
    const createMerchant = (name: string) =>
      JSON.parse(
        execFileSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "merchant", "create", "--name", name, "--email", `${name}@bench.test`], {
          cwd: repoRoot,
          env: { ...baseEnv, ...pgEnv, LOG_LEVEL: "warn" },
        }).toString(),
      ) as { merchant: { id: number }; keys: { test: string } };
    const created = createMerchant("bench");
    const one = await startGateway({ ...pgEnv, WORKERS: "1" });
    const two = await startGateway({ ...pgEnv, WORKERS: "2" });
    const h = { "x-api-key": created.keys.test, "content-type": "application/json" };
    const channel = (await (await fetch(`${one.url}/api/payment-channels/create`, { method: "POST", headers: h, body: JSON.stringify({ name: "Sandbox", provider: "sandbox" }) })).json()) as { channel: { id: number } };
    let reference = "";
    for (let i = 0; i < 200; i++) {
      const res = await fetch(`${one.url}/api/transactions/initialize`, { method: "POST", headers: h, body: JSON.stringify({ amount: 1000 + i, email: `p${i % 20}@bench.test` }) });
      reference = ((await res.json()) as { reference: string }).reference;
    }
    // The bare server as two processes and as one: what two processes gain on this machine when the server does
    // the least work there is (the ceiling the gateway's two workers can be held against).
    const startBare = async (processes: number) => {
      const port = await freePort();
      const child = spawn(process.execPath, ["--import", "tsx", "bench/bare-cluster.ts"], {
        cwd: repoRoot,
        env: { ...baseEnv, BARE_PROCESSES: String(processes), DATABASE_URL: databaseUrl, MERCHANT_ID: String(created.merchant.id), CHANNEL_ID: String(channel.channel.id), PORT: String(port) },
        stdio: ["ignore", "ignore", "inherit"],
      });
      children.push(child);
      const url = `http://127.0.0.1:${port}`;
      await waitForOk(`${url}/hello`);
      return { child, url };
    };
    const { child: bare, url: bareUrl } = await startBare(2);
    const { child: bareOne, url: bareOneUrl } = await startBare(1);

    const headers = { "X-API-Key": created.keys.test };
    const ops = [
      { name: "GET verify", path: `/api/transactions/verify/${reference}`, bare: `/verify/${reference}` },
      { name: "GET list (20 + count)", path: "/api/transactions/list", bare: "/list" },
    ];
    const runs = new Map<string, { one: WrkResult[]; two: WrkResult[]; bare: WrkResult[]; bareOne: WrkResult[] }>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const op of ops) {
        const entry = runs.get(op.name) ?? { one: [], two: [], bare: [], bareOne: [] };
        entry.one.push(wrk(`${one.url}${op.path}`, { headers }));
        entry.two.push(wrk(`${two.url}${op.path}`, { headers }));
        entry.bare.push(wrk(`${bareUrl}${op.bare}`));
        entry.bareOne.push(wrk(`${bareOneUrl}${op.bare}`));
        runs.set(op.name, entry);
        console.error(`round ${round + 1}: ${op.name} done`);
      }
    }
    one.child.kill("SIGTERM");
    two.child.kill("SIGTERM");
    bare.kill("SIGTERM");
    bareOne.kill("SIGTERM");

    const f = (n: number, d = 0) => n.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
    const lines = [
      `wrk 1 thread, 32 connections, ${SECONDS} s per run, median of ${ROUNDS} interleaved rounds; WORKERS=1 and WORKERS=2 gateways (compiled build, NODE_ENV=production, rate limiting off, REDIS_URL set for both) and the bare server as 2 processes and as 1, on one throwaway PostgreSQL 15; Node ${process.version}, ${availableParallelism()} CPUs, ${new Date().toISOString().slice(0, 10)}, run took ${Math.round((Date.now() - started) / 1000)} s`,
      "",
      "| operation | 1 worker req/s (p50 / p99 ms) | 2 workers req/s (p50 / p99 ms) | 2 workers / 1 worker | bare 1 process req/s | bare 2 processes req/s | bare 2 / bare 1 | 2 workers / bare 2 | non-2xx |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ];
    for (const [name, r] of runs) {
      const [o, t, b, b1] = [best(r.one), best(r.two), best(r.bare), best(r.bareOne)];
      lines.push(
        `| ${name} | ${f(o.rps)} (${f(o.p50, 1)} / ${f(o.p99, 1)}) | ${f(t.rps)} (${f(t.p50, 1)} / ${f(t.p99, 1)}) | ${f(t.rps / o.rps, 2)}x | ${f(b1.rps)} | ${f(b.rps)} | ${f(b.rps / b1.rps, 2)}x | ${f(t.rps / b.rps, 2)}x | ${o.errors + t.errors + b.errors + b1.errors} |`,
      );
    }
    const table = lines.join("\n");
    console.log(table);
    if (write) {
      writeReadmeSection(
        "## Every core: WORKERS=2 against one worker (`bench/http.ts --workers`)",
        `The gateway with \`WORKERS=2\` (src/cluster.ts: two gateway processes behind one port) against \`WORKERS=1\`, and against
\`bench/bare-cluster.ts\` (bench/bare-server.ts as two processes behind one port), for the two hot reads, interleaved in
the same run on the same database, and against the same bare server as one process. wrk, the servers and PostgreSQL
share the machine's cores: the bare server's own gain from a second process (bare 2 / bare 1) is what this machine
gives two processes at all, and the gateway's two workers are held against it. The issue's goal is >= 1.3x of one
worker, written for about 1.5x being possible; on this 2-vCPU machine the bare server gains 1.07x (verify) and 1.15x
(list) from a second process, and the gateway 1.13x and 1.29x: more than the bare server, because one gateway
worker leaves more of the machine idle (one worker's verify run kept the machine about 78 % busy, two workers 100 %,
sampled from /proc/stat). Runs on 2026-11-25/26 gave verify 1.10x to 1.21x and list 1.29x to 1.42x. \`node --import
tsx bench/http.ts --workers --write\`.

<!-- http-workers:start -->
${table}
<!-- http-workers:end -->`,
      );
    }
  } finally {
    cleanup();
    await redis.stop();
    await pgServer.stop();
    clearTimeout(deadline);
  }
}

async function main() {
  execFileSync("npm", ["run", "build", "--silent"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const pgServer = await startPostgres();
  let redis: Awaited<ReturnType<typeof startRedis>> | undefined;
  const databaseUrl = await pgServer.createDatabase();
  const encryptionKey = randomBytes(32).toString("hex");
  const pgEnv = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: encryptionKey, DATA_DIR: join(work, "pg-data") };
  try {
    const createMerchant = (name: string) =>
      JSON.parse(
        execFileSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "merchant", "create", "--name", name, "--email", `${name}@bench.test`], {
          cwd: repoRoot,
          env: { ...baseEnv, ...pgEnv, LOG_LEVEL: "warn" },
        }).toString(),
      ) as { merchant: { id: number }; keys: { test: string } };
    const created = createMerchant("bench");
    // Lists read a merchant no initialize run writes to, so every list run pages over the same 200 rows.
    const listed = createMerchant("lists");
    const key = created.keys.test;
    const headers = { "X-API-Key": key };

    const daraja = await startFakeDaraja();
    // Daraja's fake answers the channel's set-up calls; callbacks come from wrk. No reconciliation during the run.
    const gatewayEnv = { ...pgEnv, MPESA_BASE_URL: daraja.url, STK_CALLBACK_OVERDUE_MS: "3600000" };
    const gateway = await startGateway(gatewayEnv);
    const rssIdle = rssMb(gateway.child.pid!);
    // As operators run it (issue 42): rate limits on Redis, high enough never to refuse (every check and count
    // still runs), request lines at info to a file, and an Idempotency-Key on every write (below).
    redis = await startRedis();
    const productionLog = join(work, "production.log");
    const production = await startGateway(
      { ...gatewayEnv, REDIS_URL: redis.url, RATE_LIMIT_ENABLED: "true", RATE_LIMIT_PER_MINUTE: "1000000000", RATE_LIMIT_IP_PER_MINUTE: "1000000000", LOG_LEVEL: "info" },
      { logFile: productionLog },
    );
    // The README's start command, through the TypeScript loader, otherwise as the silent compiled gateway.
    const loader = await startGateway(gatewayEnv, { start: "loader" });
    const urls: Record<GatewaySide, string> = { silent: gateway.url, production: production.url, loader: loader.url };
    const seed = async (url: string, apiKey: string) => {
      const h = { "x-api-key": apiKey, "content-type": "application/json" };
      const channel = (await (await fetch(`${url}/api/payment-channels/create`, { method: "POST", headers: h, body: JSON.stringify({ name: "Sandbox", provider: "sandbox" }) })).json()) as { channel: { id: number } };
      let reference = "";
      for (let i = 0; i < 200; i++) {
        const res = await fetch(`${url}/api/transactions/initialize`, { method: "POST", headers: h, body: JSON.stringify({ amount: 1000 + i, email: `p${i % 20}@bench.test` }) });
        reference = ((await res.json()) as { reference: string }).reference;
      }
      return { channelId: channel.channel.id, reference };
    };
    const { channelId, reference } = await seed(gateway.url, key);
    await seed(gateway.url, listed.keys.test);

    const barePort = await freePort();
    const bare = spawn(process.execPath, ["--import", "tsx", "bench/bare-server.ts"], {
      cwd: repoRoot,
      env: { ...baseEnv, DATABASE_URL: databaseUrl, MERCHANT_ID: String(created.merchant.id), LIST_MERCHANT_ID: String(listed.merchant.id), CHANNEL_ID: String(channelId), PORT: String(barePort) },
      stdio: ["ignore", "ignore", "inherit"],
    });
    children.push(bare);
    const bareUrl = `http://127.0.0.1:${barePort}`;
    await waitForOk(`${bareUrl}/hello`);

    // --- The settling paths: an STK success callback and a card payment on the checkout's pay endpoint. Each
    // request settles its own pending row (a second callback for a settled row does nothing), so every run
    // gets a fresh pool of rows, bulk-inserted as bench/api.ts does, and wrk's Lua script takes the next one
    // per request. A third merchant holds them, so verify, initialize and list see the same data as before.
    const payers = createMerchant("payers");
    const payersHeaders = { "x-api-key": payers.keys.test, "content-type": "application/json" };
    const createChannel = async (channel: unknown) => {
      const res = await fetch(`${gateway.url}/api/payment-channels/create`, { method: "POST", headers: payersHeaders, body: JSON.stringify(channel) });
      if (res.status !== 201) throw new Error(`channel create: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { channel: { id: number } }).channel.id;
    };
    const cardChannelId = await createChannel({ name: "Sandbox", provider: "sandbox" });
    const mpesaChannelId = await createChannel({ name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig() });
    const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    // An idle connection dropped by the server (e.g. at the end, when it stops) must not crash the run.
    db.on("error", (error) => console.error(`bench pool: ${error.message}`));
    const callbackToken = (await db.query<{ callback_token: string }>("SELECT callback_token FROM payment_channels WHERE id = $1", [mpesaChannelId])).rows[0]!.callback_token;
    const segment = Buffer.from(callbackToken, "latin1").toString("hex");
    const POOL_ROWS = 30_000; // more than either side settles in one run
    let pools = 0;
    async function pendingRows(kind: "stk" | "card") {
      const tag = `b${++pools}x`;
      const { rows } = await db.query<{ first: number; last: number }>(
        kind === "stk"
          ? `WITH ins AS (
               INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, description, phone_number,
                                         payment_method, checkout_request_id, channel_id, updated_at)
               SELECT $1, 'test', 'txn-' || $2 || g, md5($2 || g), 150000, 'KES', 'Bench order', '+254708374149', 'momo_stk',
                      'ws_CO_' || $2 || g, $3, now()
               FROM generate_series(1, $4::int) g RETURNING id, channel_id, phone_number, checkout_request_id, created_at),
             -- Each API push is an attempt too (issue 36): its callback finds it there.
             attempts AS (
               INSERT INTO transaction_attempts (transaction_id, method, origin, channel_id, phone_number, checkout_request_id, created_at)
               SELECT id, 'mpesa', 'api', channel_id, phone_number, checkout_request_id, created_at FROM ins)
             SELECT min(id) AS first, max(id) AS last FROM ins`
          : `WITH ins AS (
               INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, email, channel_id, updated_at)
               SELECT $1, 'test', 'txn-' || $2 || g, md5($2 || g), 2500, 'KES', 'card@bench.test', $3, now()
               FROM generate_series(1, $4::int) g RETURNING id)
             SELECT min(id) AS first, max(id) AS last FROM ins`,
        [payers.merchant.id, tag, kind === "stk" ? mpesaChannelId : cardChannelId, POOL_ROWS],
      );
      const ids = Array.from({ length: POOL_ROWS }, (_, i) => (kind === "stk" ? `ws_CO_${tag}${i + 1}` : `txn-${tag}${i + 1}`));
      return { ids, first: rows[0]!.first, last: rows[0]!.last };
    }
    /** A wrk script that POSTs for the next id of the pool on every request (the last one again once they run out). */
    const luaFor = (ids: string[], pathExpr: string, bodyExpr: string, keyed?: boolean) => {
      const file = join(work, `ids-${randomBytes(4).toString("hex")}.txt`);
      writeFileSync(file, ids.join("\n"));
      return `local ids = {}
for line in io.lines("${file}") do ids[#ids + 1] = line end
local n = 0
local headers = { ["Content-Type"] = "application/json" }
request = function()
  n = n + 1
  local id = ids[n] or ids[#ids]
  ${keyed ? `headers["Idempotency-Key"] = "${randomBytes(6).toString("hex")}-" .. n` : ""}
  return wrk.format("POST", ${pathExpr}, headers, ${bodyExpr})
end
local told = false
response = function(status, _, body)
  if status >= 300 and not told then told = true; io.stderr:write("wrk: first non-2xx answer " .. status .. ": " .. string.sub(body, 1, 300) .. "\\n") end
end`;
    };
    // Daraja's success callback for a KES 1,500 push from 254708374149 (the rows' amount and phone); receipt
    // numbers are unique, as Daraja's are (the gateway refuses a receipt it has already recorded).
    const STK_BODY = `'{"Body":{"stkCallback":{"MerchantRequestID":"29115-34620561-1","CheckoutRequestID":"' .. id .. '","ResultCode":0,"ResultDesc":"The service request is processed successfully.","CallbackMetadata":{"Item":[{"Name":"Amount","Value":1500},{"Name":"MpesaReceiptNumber","Value":"' .. string.upper(string.sub(id, 7)) .. '"},{"Name":"Balance"},{"Name":"TransactionDate","Value":20261125120000},{"Name":"PhoneNumber","Value":254708374149}]}}}}'`;
    const CARD_BODY = `'{"card_number":"4084084084084081","expiry_month":12,"expiry_year":2030,"cvc":"408"}'`;
    // The same two bodies for bench/fixed-rate.ts's list of requests.
    const stkBody = (id: string) =>
      JSON.stringify({
        Body: {
          stkCallback: {
            MerchantRequestID: "29115-34620561-1",
            CheckoutRequestID: id,
            ResultCode: 0,
            ResultDesc: "The service request is processed successfully.",
            CallbackMetadata: { Item: [{ Name: "Amount", Value: 1500 }, { Name: "MpesaReceiptNumber", Value: id.slice(6).toUpperCase() }, { Name: "Balance" }, { Name: "TransactionDate", Value: 20261125120000 }, { Name: "PhoneNumber", Value: 254708374149 }] },
          },
        },
      });
    const CARD_JSON = JSON.stringify({ card_number: "4084084084084081", expiry_month: 12, expiry_year: 2030, cvc: "408" });
    const settledRuns: { name: string; side: string; requests: number; settled: number }[] = [];
    async function settleRun(kind: "stk" | "card", side: Side): Promise<WrkResult> {
      const pool = await pendingRows(kind);
      const path =
        kind === "stk"
          ? side !== "bare" ? `"/callbacks/daraja/${segment}/stk"` : `"/stk/${segment}"`
          : side !== "bare" ? `"/payment/checkout/" .. id .. "/pay"` : `"/pay/" .. id`;
      // The card payment is a write, so production sends it with a key too (Daraja's callbacks carry none).
      const keyed = side === "production" && kind === "card";
      const result = wrk(`${side === "bare" ? bareUrl : urls[side]}/`, { lua: luaFor(pool.ids, path, kind === "stk" ? STK_BODY : CARD_BODY, keyed) });
      await countSettled(kind, side, pool, result.requests);
      return result;
    }
    /** The settling path at a fixed rate (bench/fixed-rate.ts): each request for its own row, as settleRun sends it. */
    async function settleAtRate(kind: "stk" | "card", side: GatewaySide, rate: number) {
      const pool = await pendingRows(kind);
      const file = join(work, `requests-${randomBytes(4).toString("hex")}.jsonl`);
      writeFileSync(
        file,
        pool.ids
          .map((id) =>
            JSON.stringify(
              kind === "stk"
                ? { path: `/callbacks/daraja/${segment}/stk`, body: stkBody(id) }
                : { path: `/payment/checkout/${id}/pay`, body: CARD_JSON },
            ),
          )
          .join("\n"),
      );
      const keyed = side === "production" && kind === "card";
      const run = fixedRate(urls[side], rate, { requests: file, headers: keyed ? { "Idempotency-Key": "[<id>]" } : {} });
      await countSettled(kind, side, pool, run.requests, " (half load)");
      return run;
    }
    async function countSettled(kind: "stk" | "card", side: Side, pool: { first: number; last: number }, requests: number, suffix = "") {
      const settled = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM transactions WHERE id BETWEEN $1 AND $2 AND status = 'completed'", [pool.first, pool.last]);
      // Every answered request must have settled its own row: otherwise the run measured something else.
      if (settled.rows[0]!.n < requests * 0.99) throw new Error(`${kind} ${side}${suffix}: ${settled.rows[0]!.n} settled of ${requests} requests`);
      settledRuns.push({ name: kind === "stk" ? STK_OP : CARD_OP, side: `${side}${suffix}`, requests, settled: settled.rows[0]!.n });
    }
    const STK_OP = "POST STK callback (success)";
    const CARD_OP = "POST checkout card payment";

    const body = '{"amount":2500,"email":"wrk@bench.test"}';
    const listHeaders = { "X-API-Key": listed.keys.test };
    /** initialize as production sends it: a fresh Idempotency-Key on every request (a run-unique prefix and a counter). */
    const keyedInitialize = () => `wrk.method = "POST"
wrk.body = '${body}'
wrk.headers["Content-Type"] = "application/json"
local prefix = "${randomBytes(6).toString("hex")}-"
local n = 0
request = function()
  n = n + 1
  wrk.headers["Idempotency-Key"] = prefix .. n
  return wrk.format()
end`;
    const ops: { name: string; loader?: boolean; run: (side: Side) => WrkResult | Promise<WrkResult> }[] = [
      { name: "GET verify", loader: true, run: (side) => (side === "bare" ? wrk(`${bareUrl}/verify/${reference}`) : wrk(`${urls[side]}/api/transactions/verify/${reference}`, { headers })) },
      {
        name: "POST initialize",
        loader: true,
        run: (side) =>
          side === "bare"
            ? wrk(`${bareUrl}/initialize`, { post: body })
            : wrk(`${urls[side]}/api/transactions/initialize`, side === "production" ? { headers, lua: keyedInitialize() } : { headers, post: body }),
      },
      { name: "GET list (20 + count)", loader: true, run: (side) => (side === "bare" ? wrk(`${bareUrl}/list`) : wrk(`${urls[side]}/api/transactions/list`, { headers: listHeaders })) },
      { name: STK_OP, run: (side) => settleRun("stk", side) },
      { name: CARD_OP, run: (side) => settleRun("card", side) },
      { name: "GET /health (bare: hello)", run: (side) => (side === "bare" ? wrk(`${bareUrl}/hello`) : wrk(`${urls[side]}/health`)) },
    ];
    const sameStatements = new Set([STK_OP, CARD_OP]);
    const results = new Map<string, Partial<Record<Side, WrkResult[]>>>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const op of ops) {
        const entry = results.get(op.name) ?? {};
        // The three gateways and the bare server back to back, in a different order each round.
        const sides: Side[] = op.loader ? ["silent", "production", "loader", "bare"] : ["silent", "production", "bare"];
        for (const side of round % 2 ? sides.reverse() : sides) (entry[side] ??= []).push(await op.run(side));
        results.set(op.name, entry);
        console.error(`round ${round + 1}: ${op.name} done`);
      }
    }
    const of = (name: string, side: Side) => best(results.get(name)![side]!);
    const light = {
      verify: wrk(`${gateway.url}/api/transactions/verify/${reference}`, { headers, connections: 2 }),
      initialize: wrk(`${gateway.url}/api/transactions/initialize`, { headers, post: body, connections: 2 }),
    };
    // Latency at half the measured maximum (each gateway's own): a fixed request rate, open loop (bench/fixed-rate.ts,
    // its own process), up to 32 connections; production's initialize with a fresh Idempotency-Key per request.
    const halfLoad: { side: GatewaySide; name: string; rate: number; rps: number; p50: number; p99: number; errors: number; sendLagP99: number }[] = [];
    for (const side of ["silent", "production"] as const) {
      for (const op of [
        { name: "GET verify", path: `/api/transactions/verify/${reference}`, headers, post: undefined },
        { name: "POST initialize", path: "/api/transactions/initialize", headers: side === "production" ? { ...headers, "Idempotency-Key": "[<id>]" } : headers, post: body },
        // The list merchant, which initialize does not write to (as in the rounds above).
        { name: "GET list (20 + count)", path: "/api/transactions/list", headers: listHeaders, post: undefined },
      ]) {
        const rate = Math.round(of(op.name, side).rps / 2);
        halfLoad.push({ side, name: op.name, rate, ...fixedRate(`${urls[side]}${op.path}`, rate, { headers: op.headers, post: op.post }) });
      }
      // Each settling request needs its own pending row: the same fixed rate over a list of requests, one per row.
      for (const [name, kind] of [[STK_OP, "stk"], [CARD_OP, "card"]] as const) {
        const rate = Math.round(of(name, side).rps / 2);
        const run = await settleAtRate(kind, side, rate);
        halfLoad.push({ side, name, rate, rps: run.rps, p50: run.p50, p99: run.p99, errors: run.errors, sendLagP99: run.sendLagP99 });
      }
    }
    const rssLoaded = rssMb(gateway.child.pid!);
    gateway.child.kill("SIGTERM");
    production.child.kill("SIGTERM");
    loader.child.kill("SIGTERM");
    bare.kill("SIGTERM");
    const logLines = readFileSync(productionLog, "utf8").split("\n").filter((l) => l.includes('"request completed"')).length;
    const logBytes = statSync(productionLog).size;
    await db.end();
    await daraja.close();

    // The embedded PGlite, same operations. A production start makes no demo merchant (src/main.ts), so the CLI
    // creates one first, in the data directory the gateway then opens.
    const pgliteEnv = { DATA_DIR: join(work, "pglite"), ENCRYPTION_KEY: encryptionKey };
    const demoKey = (
      JSON.parse(
        execFileSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "merchant", "create", "--name", "pglite", "--email", "pglite@bench.test"], {
          cwd: repoRoot,
          env: { ...baseEnv, ...pgliteEnv, LOG_LEVEL: "warn" },
        }).toString(),
      ) as { keys: { test: string } }
    ).keys.test;
    const pglite = await startGateway(pgliteEnv);
    const seeded = await seed(pglite.url, demoKey);
    const pgliteHeaders = { "X-API-Key": demoKey };
    // One merchant here: the list runs before initialize adds rows, so it pages over the 200 seeded ones as above.
    const pgliteRuns: Record<string, WrkResult> = {};
    pgliteRuns["GET verify"] = wrk(`${pglite.url}/api/transactions/verify/${seeded.reference}`, { headers: pgliteHeaders });
    pgliteRuns["GET list (20 + count)"] = wrk(`${pglite.url}/api/transactions/list`, { headers: pgliteHeaders });
    pgliteRuns["POST initialize"] = wrk(`${pglite.url}/api/transactions/initialize`, { headers: pgliteHeaders, post: body });
    pglite.child.kill("SIGTERM");

    const f = (n: number, d = 0) => n.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
    const bareVerify = of("GET verify", "bare").rps;
    const lines = [
      `wrk 1 thread, 32 connections, ${SECONDS} s per run, median of ${ROUNDS} interleaved rounds; three gateways (silent, production, npm start) and the bare server each their own process on one throwaway PostgreSQL 15 (and one Redis); Node ${process.version}, ${availableParallelism()} CPUs, ${new Date().toISOString().slice(0, 10)}, run took ${Math.round((Date.now() - started) / 1000)} s`,
      "",
      "Silent: compiled build, `LOG_LEVEL=silent`, `RATE_LIMIT_ENABLED=false`. Production: compiled build, `RATE_LIMIT_ENABLED=true` on Redis (limits never reached), `LOG_LEVEL=info` to a file, an `Idempotency-Key` on every initialize and card payment. Both `NODE_ENV=production`.",
      "",
      "| operation | silent req/s | silent p50 / p99 (ms) | production req/s | production p50 / p99 (ms) | production / silent | bare req/s | bare p50 / p99 (ms) | silent / bare | production / bare | silent / bare verify | production / bare verify | non-2xx |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ];
    for (const name of results.keys()) {
      const [g, p, b] = [of(name, "silent"), of(name, "production"), of(name, "bare")];
      const bareName = sameStatements.has(name) ? `${name} (bare: the same statements)` : name;
      lines.push(
        `| ${bareName} | ${f(g.rps)} | ${f(g.p50, 1)} / ${f(g.p99, 1)} | ${f(p.rps)} | ${f(p.p50, 1)} / ${f(p.p99, 1)} | ${f(p.rps / g.rps, 2)}x | ${f(b.rps)} | ${f(b.p50, 1)} / ${f(b.p99, 1)} | ${f(g.rps / b.rps, 2)}x | ${f(p.rps / b.rps, 2)}x | ${f(g.rps / bareVerify, 2)}x | ${f(p.rps / bareVerify, 2)}x | ${g.errors + p.errors} |`,
      );
    }
    lines.push(
      "",
      `Settling runs (each request its own pending row, ${f(POOL_ROWS)} per run): payments settled / requests answered, per run: ` +
        settledRuns.map((r) => `${r.name.replace("POST ", "")}, ${r.side}: ${f(r.settled)} / ${f(r.requests)}`).join("; ") + ".",
      "",
      `The production gateway wrote ${f(logLines)} request lines (${f(logBytes / 1e6, 1)} MB) to its log file.`,
      "",
      "The README's start command, `npm start` (`node --import tsx src/main.ts`), against the compiled build (`npm run build`, then `npm run start:prod`: `node dist/main.js`), both silent as above, same rounds:",
      "",
      "| operation | npm start req/s | p50 / p99 (ms) | compiled req/s | p50 / p99 (ms) | npm start / compiled |",
      "|---|---:|---:|---:|---:|---:|",
      ...ops
        .filter((op) => op.loader)
        .map((op) => {
          const [l, c] = [of(op.name, "loader"), of(op.name, "silent")];
          return `| ${op.name} | ${f(l.rps)} | ${f(l.p50, 1)} / ${f(l.p99, 1)} | ${f(c.rps)} | ${f(c.p50, 1)} / ${f(c.p99, 1)} | ${f(l.rps / c.rps, 2)}x |`;
        }),
    );
    const goal = (met: boolean) => (met ? "met" : "**missed**");
    const hotReads = [
      ["GET verify", 0.5],
      ["POST initialize", 0.3],
      ["GET list (20 + count)", 0.3],
    ] as const;
    lines.push(
      "",
      "Against the issue's goals (issue 42):",
      "",
      "| goal | target | this run | |",
      "|---|---:|---:|---|",
      ...hotReads.map(([name, min]) => {
        const ratio = of(name, "production").rps / bareVerify;
        return `| production ${name.replace(" (20 + count)", "")} / bare verify | >= ${min}x | ${f(ratio, 2)}x | ${goal(ratio >= min)} |`;
      }),
      ...[...results.keys()].map((name) => {
        const cost = 1 - of(name, "production").rps / of(name, "silent").rps;
        return `| production's cost on ${name.replace(" (bare: hello)", "")} | <= 15 % | ${f(cost * 100, 1)} % | ${goal(cost <= 0.15)} |`;
      }),
      ...ops
        .filter((op) => op.loader)
        .map((op) => {
          const ratio = of(op.name, "loader").rps / of(op.name, "silent").rps;
          // The issue's alternative, chosen: README's production checklist starts the compiled build (npm run start:prod).
          return `| npm start / compiled, ${op.name.replace(" (20 + count)", "")} | >= 0.9x, or production starts compiled | ${f(ratio, 2)}x | ${ratio >= 0.9 ? "met" : "met by the README: production starts compiled"} |`;
        }),
      ...halfLoad.map((r) => `| p99 at half load, ${r.side}, ${r.name.replace(" (20 + count)", "")} | < 25 ms | ${f(r.p99, 1)} ms | ${goal(r.p99 < 25)} |`),
    );
    lines.push(
      "",
      "Light load (2 connections), gateway: p50 / p99 in ms and req/s:",
      "",
      "| operation | req/s | p50 (ms) | p99 (ms) |",
      "|---|---:|---:|---:|",
      `| GET verify | ${f(light.verify.rps)} | ${f(light.verify.p50, 1)} | ${f(light.verify.p99, 1)} |`,
      `| POST initialize | ${f(light.initialize.rps)} | ${f(light.initialize.p50, 1)} | ${f(light.initialize.p99, 1)} |`,
      "",
      "At half each gateway's measured maximum (bench/fixed-rate.ts: open loop, each request sent when due and timed from then, up to 32 connections; goal p99 < 25 ms):",
      "",
      "| gateway | operation | rate asked (req/s) | achieved (req/s) | p50 (ms) | p99 (ms) | non-2xx or errors | load generator's own send lag, p99 (ms) |",
      "|---|---|---:|---:|---:|---:|---:|---:|",
      ...halfLoad.map((r) => `| ${r.side} | ${r.name} | ${f(r.rate)} | ${f(r.rps)} | ${f(r.p50, 1)} | ${f(r.p99, 1)} | ${r.errors} | ${f(r.sendLagP99, 1)} |`),
      "",
      "Embedded PGlite (same operations, 32 connections) against PostgreSQL mode:",
      "",
      "| operation | PGlite req/s | PostgreSQL req/s | ratio |",
      "|---|---:|---:|---:|",
    );
    for (const [name, r] of Object.entries(pgliteRuns)) {
      const pgRps = of(name, "silent").rps;
      lines.push(`| ${name} | ${f(r.rps)} | ${f(pgRps)} | ${f(r.rps / pgRps, 2)}x |`);
    }
    lines.push(
      "",
      `Cold start to the first 200 of /ready: ${f(gateway.coldStartMs)} ms on PostgreSQL, ${f(pglite.coldStartMs)} ms on PGlite (its database made by the CLI just before). RSS of the PostgreSQL-mode gateway: ${f(rssIdle)} MB idle after start, ${f(rssLoaded)} MB after the load.`,
    );
    const table = lines.join("\n");
    console.log(table);
    if (write) {
      writeReadmeSection(
        "## The hot paths under an outside load generator (`bench/http.ts`)",
        `What an operator sizing a deployment sees: wrk, in its own process, against the gateway in its own process
(\`NODE_ENV=production\`, \`LOG_LEVEL=silent\`, \`RATE_LIMIT_ENABLED=false\`), against the same build as operators run
it (\`RATE_LIMIT_ENABLED=true\` on Redis with limits no run reaches, \`LOG_LEVEL=info\` to a file, an \`Idempotency-Key\`
on every initialize and card payment; "production"), against \`npm start\` (the TypeScript loader) and, interleaved in
the same run on the same database, against \`bench/bare-server.ts\`: bare \`node:http\` + \`pg\` (pool 10) doing the least SQL each operation
needs (one \`INSERT ... RETURNING\` for initialize, one \`SELECT\` by reference for verify, 20 rows and a count for
list) and no authentication, validation or events. For the two settling paths, an STK success callback and a card
payment on the checkout's pay endpoint, the bare server instead sends the statements bench/api.ts's baselines do
(reads, then \`BEGIN\`, the conditional \`UPDATE ... RETURNING\`, the event, the webhook fan-out, \`COMMIT\`: 7 for the
callback, 8 with the card's row, channel and claim); every request settles its own pending row (30,000 bulk-inserted
per run, taken in turn by wrk's Lua script, and counted afterwards). "ratio to bare" is gateway / bare for the same
operation; the performance issue's goals are verify >= 0.5x, initialize >= 0.3x and list >= 0.3x of bare verify,
and >= 0.6x of bare doing the same statements for the settling paths. wrk, both servers and PostgreSQL share the
machine's cores. \`node --import tsx bench/http.ts --write\` (about 8 minutes).

<!-- http:start -->
${table}
<!-- http:end -->`,
      );
    }
  } finally {
    cleanup();
    await redis?.stop();
    await pgServer.stop();
    clearTimeout(deadline);
  }
}

(process.argv.includes("--workers") ? workersMain() : main()).then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    cleanup();
    process.exit(1);
  },
);
