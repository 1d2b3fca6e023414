/**
 * CSV exports at a million rows (issue 42): GET /v1/reports/transactions.csv and /v1/reports/balance-transactions.csv
 * of one merchant with `--rows N` (default 1,000,000) transactions and N balance transactions (ledger entries), bulk-
 * loaded with INSERT ... SELECT FROM generate_series as bench/scale.ts loads them, on one throwaway PostgreSQL. The
 * gateway runs in its own process (compiled build, NODE_ENV=production, LOG_LEVEL=silent, RATE_LIMIT_ENABLED=false);
 * each export is downloaded by a client process of its own (node's fetch, counting bytes and CRLFs). Measured:
 * - rows/s of the download, against a bare baseline in the same run: node:http + pg (no framework, no Prisma)
 *   streaming the same rows with the same CSV writer through a server-side cursor (DECLARE ... FETCH 1000; neither
 *   pg-cursor nor pg-copy-streams is installed), waiting for the socket to drain before each FETCH;
 * - the gateway's RSS (VmRSS from /proc/<pid>/status every 20 ms) during the export, less its RSS just before;
 * - other requests' latency: bench/fixed-rate.ts (open loop, its own process) at a fixed moderate rate on verify,
 *   `--seconds` idle, then for the whole export; p99 during / p99 idle.
 * Goals (issue 42): RSS growth < 100 MB, >= 50,000 rows/s, p99 during <= 2x idle.
 *
 *   flock /tmp/bench.lock node --import tsx bench/exports.ts [--rows 1000000] [--seconds 10] [--rate 200] [--write]
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { startPostgres } from "../test/support/postgres.ts";
import { freePort } from "../test/support/local-server.ts";
import { localDay } from "../src/days.ts";
import { csvLine } from "../src/modules/ledger/csv.ts";
import { TRANSACTION_CSV_COLUMNS } from "../src/modules/transactions/export.ts";
import { writeReadmeSection } from "./readme.ts";
import { baseEnv, createMerchant, fmt, repoRoot, startGateway, waitForOk } from "./scale.ts";

const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const ZONE = "Africa/Nairobi";
const DAY_SECONDS = 86_400;
const SPREAD_SECONDS = 90 * DAY_SECONDS;

// ---------------------------------------------------------------------------------------------------------------
// The bare baseline: node:http + pg, a server-side cursor, the same CSV writer and columns.

const BARE_TRANSACTIONS = `SELECT id, reference, status::text AS status, amount::text AS amount, amount_refunded::text AS amount_refunded, currency,
    payment_method, channel_id, email, phone_number, client_reference, provider_reference, description,
    failure_code, failure_reason, created_at, completed_at, fee::text AS fee
  FROM transactions WHERE merchant_id = $1 AND mode = 'test' ORDER BY created_at DESC, id DESC`;
const BARE_LEDGER = `SELECT id::text AS id, type, amount::text AS amount, fee::text AS fee, currency, channel_id, source_reference, note, created_at
  FROM ledger_entries WHERE merchant_id = $1 AND mode = 'test' AND type = ANY($2::text[]) ORDER BY created_at DESC, id DESC`;
const LEDGER_TYPES = ["payment", "refund", "refund_failure", "payout", "payout_failure", "adjustment"];

type Row = Record<string, any>;
const bareLine = {
  transactions: (t: Row) =>
    csvLine([
      t.id, t.reference, t.status, BigInt(t.amount), BigInt(t.amount_refunded), t.currency, t.payment_method, t.channel_id, t.email, t.phone_number,
      t.client_reference, t.provider_reference, t.description, t.failure_code, t.failure_reason, t.created_at.toISOString(), t.completed_at?.toISOString() ?? null,
      localDay(t.created_at, ZONE), ZONE, t.fee === null ? null : BigInt(t.fee), t.fee === null ? null : BigInt(t.amount) - BigInt(t.fee),
    ]),
  ledger: (r: Row) => {
    const amount = BigInt(r.amount);
    const fee = BigInt(r.fee);
    return csvLine([BigInt(r.id), r.type, amount, fee, amount - fee, r.currency, r.channel_id, r.source_reference, r.note, r.created_at.toISOString(), localDay(r.created_at, ZONE), ZONE]);
  },
};

function bareServer() {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
  const merchantId = Number(process.env.MERCHANT_ID);
  const server = createServer(async (req, res) => {
    const which = req.url === "/transactions.csv" ? "transactions" : req.url === "/ledger.csv" ? "ledger" : null;
    if (req.url === "/ready") return res.writeHead(200).end();
    if (!which) return res.writeHead(404).end();
    const client = await pool.connect();
    let closed = false;
    res.on("close", () => (closed = true));
    try {
      await client.query("BEGIN READ ONLY");
      await client.query(`DECLARE export NO SCROLL CURSOR FOR ${which === "transactions" ? BARE_TRANSACTIONS : BARE_LEDGER}`, which === "transactions" ? [merchantId] : [merchantId, LEDGER_TYPES]);
      res.writeHead(200, { "content-type": "text/csv; charset=utf-8" });
      res.write(csvLine(which === "transactions" ? TRANSACTION_CSV_COLUMNS : ["id", "type", "amount", "fee", "net", "currency", "payment_channel_id", "source_reference", "description", "created_at", "date", "timezone"]));
      for (;;) {
        const { rows } = await client.query("FETCH 1000 FROM export");
        if (rows.length === 0 || closed) break;
        let text = "";
        for (const row of rows) text += bareLine[which](row);
        if (!res.write(text)) await new Promise((resolve) => res.once("drain", resolve));
      }
      await client.query("COMMIT");
      res.end();
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      res.destroy(error as Error);
    } finally {
      client.release();
    }
  });
  server.listen(Number(process.env.PORT), "127.0.0.1", () => process.stdout.write("bare export server listening\n"));
}

// ---------------------------------------------------------------------------------------------------------------
// The client: its own process, downloading one export; prints { status, bytes, rows, seconds }.

const DOWNLOAD = `
const [url, key] = process.argv.slice(1);
const t0 = performance.now();
const res = await fetch(url, { headers: key ? { "x-api-key": key } : {} });
let bytes = 0, lines = 0;
for await (const chunk of res.body) {
  bytes += chunk.length;
  for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
}
process.stdout.write(JSON.stringify({ status: res.status, bytes, rows: lines - 1, seconds: (performance.now() - t0) / 1000 }));
`;

function download(url: string, key?: string): Promise<{ status: number; bytes: number; rows: number; seconds: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", DOWNLOAD, url, key ?? ""], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`download ${url} exited ${code}`))));
  });
}

/** The fixed-rate load (bench/fixed-rate.ts) in its own process until `stop()` (SIGINT); its JSON line. */
function fixedRate(url: string, key: string, rate: number) {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/fixed-rate.ts", url, "--rate", String(rate), "--connections", "8", "--seconds", "3600", "--header", `x-api-key: ${key}`], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const done = new Promise<{ requests: number; rps: number; p50: number; p99: number; errors: number }>((resolve, reject) =>
    child.on("exit", () => (out ? resolve(JSON.parse(out)) : reject(new Error("fixed-rate printed nothing")))),
  );
  return { stop: () => (child.kill("SIGINT"), done), child };
}

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------------
// Loading

async function load(db: pg.Pool, merchantId: number, channelId: number, n: number) {
  // Secondary indexes dropped during the load and rebuilt after, as bench/scale.ts does (one sorted build each).
  const { rows: indexes } = await db.query<{ name: string; def: string }>(
    `SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i JOIN pg_class c ON c.relname = i.indexname AND c.relkind = 'i'
     WHERE i.schemaname = current_schema() AND i.tablename = ANY($1) AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid)`,
    [["transactions", "ledger_entries"]],
  );
  for (const index of indexes) await db.query(`DROP INDEX "${index.name.replaceAll('"', '""')}"`);
  const at = `now() - make_interval(secs => (g::float8 / $2) * ${SPREAD_SECONDS})`;
  await Promise.all([
    // ~80 % completed (with a fee), 15 % failed, 5 % pending; a description with a comma and a quote now and then (quoted cells).
    db.query(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, payment_method, description,
                                 email, phone_number, client_reference, provider_reference, failure_code, failure_reason, channel_id,
                                 fee, created_at, updated_at, completed_at)
       SELECT $1, 'test', 'x_' || g, 'ac_' || g, 1000 + g % 100000, 'KES', s.status::"TransactionStatus",
              CASE WHEN g % 3 = 0 THEN 'momo_stk' ELSE 'card' END,
              CASE WHEN g % 10 = 0 THEN 'Order ' || g || ', "gift"' ELSE 'Order ' || g END,
              'payer' || g || '@example.test', '+2547' || lpad(g::text, 8, '0'), 'order-' || g,
              CASE WHEN s.status = 'completed' THEN 'XR' || g END,
              CASE WHEN s.status = 'failed' THEN 'declined' END, CASE WHEN s.status = 'failed' THEN 'The card was declined' END,
              $3, CASE WHEN s.status = 'completed' THEN 15 + g % 100 END, s.at, s.at, CASE WHEN s.status = 'completed' THEN s.at + interval '20 seconds' END
       FROM generate_series(1, $2::int) g,
       LATERAL (SELECT CASE WHEN h < 80 THEN 'completed' WHEN h < 95 THEN 'failed' ELSE 'pending' END AS status, ${at} AS at
                FROM (SELECT abs(hashint4(g)::bigint) % 100 AS h) hashed) s`,
      [merchantId, n, channelId],
    ),
    db.query(
      `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, created_at)
       SELECT $1, 'test', $3, 'KES', CASE WHEN g % 10 = 0 THEN 'refund' ELSE 'payment' END, 'transaction', g, 'x_' || g,
              CASE WHEN g % 10 = 0 THEN -(1000 + g % 100000) ELSE 1000 + g % 100000 END, CASE WHEN g % 10 = 0 THEN 0 ELSE 15 + g % 100 END, ${at}
       FROM generate_series(1, $2::int) g`,
      [merchantId, n, channelId],
    ),
  ]);
  for (const index of indexes) await db.query(index.def);
  await db.query("VACUUM (ANALYZE) transactions, ledger_entries");
}

// ---------------------------------------------------------------------------------------------------------------
// The run

/** The section's first lines (written when the section is new; later runs replace only the marked table). */
const INTRO = `Issue 42: \`GET /v1/reports/transactions.csv\` and \`GET /v1/reports/balance-transactions.csv\` of one merchant with a
million rows in each table, loaded with SQL (\`generate_series\`, as \`bench/scale.ts\` loads them). The gateway (compiled
build, \`NODE_ENV=production\`) runs in its own process, each export is downloaded by a client process of its own; the
baseline, in the same run, is bare node:http + pg streaming the same rows with the same CSV writer through a server-side
cursor (\`DECLARE\` ... \`FETCH 1000\`, waiting for the socket to drain; neither pg-cursor nor pg-copy-streams is
installed). RSS is the gateway's VmRSS (/proc, every 20 ms) from just before the export to its peak; the other requests
are verify at a fixed rate (bench/fixed-rate.ts, open loop, its own process), first idle, then during the export.
Goals: RSS growth < 100 MB, >= 50,000 rows/s, verify p99 during <= 2x idle. An export cut by its client is
test/integration/csv-export-abort.test.ts (both backends). \`flock /tmp/bench.lock node --import tsx bench/exports.ts
[--rows 1000000] [--seconds 10] [--rate 200] --write\`.`;

interface Measured {
  rows: number;
  bytes: number;
  seconds: number;
  rowsPerSecond: number;
  rssBefore: number;
  rssPeak: number;
  idle?: { p99: number; p50: number; rps: number; errors: number };
  during?: { p99: number; p50: number; rps: number; errors: number };
}

async function main() {
  const ROWS = Number(argument("--rows") ?? 1_000_000);
  const SECONDS = Number(argument("--seconds") ?? 10);
  const RATE = Number(argument("--rate") ?? 200);
  const write = process.argv.includes("--write");
  const children: ChildProcess[] = [];
  const work = mkdtempSync(join(tmpdir(), "bench-exports-"));
  const started = Date.now();
  const loadBefore = loadavg()[0]!;
  const cleanup = () => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    rmSync(work, { recursive: true, force: true });
  };
  process.on("SIGINT", () => {
    cleanup();
    process.exit(130);
  });
  const deadline = setTimeout(() => {
    console.error("bench/exports.ts: gave up after 20 minutes");
    cleanup();
    process.exit(1);
  }, 20 * 60_000);

  if (!process.argv.includes("--no-build")) execFileSync("npm", ["run", "build", "--silent"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const pgServer = await startPostgres();
  const databaseUrl = await pgServer.createDatabase();
  const env = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: randomBytes(32).toString("hex"), DATA_DIR: join(work, "data"), ALLOW_PRIVATE_URLS: "true" };
  const db = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  db.on("error", (error) => console.error(`bench pool: ${error.message}`));
  try {
    const merchant = createMerchant(env, "exporter");
    const key = merchant.keys.test;
    const merchantId = merchant.merchant.id;
    await db.query("UPDATE merchants SET timezone = $1 WHERE id = $2", [ZONE, merchantId]);
    const gateway = await startGateway(env, children);
    const pgVersion = (await db.query<{ server_version: string }>("SHOW server_version")).rows[0]!.server_version;
    const h = { "x-api-key": key, "content-type": "application/json" };
    const channelRes = await fetch(`${gateway.url}/api/payment-channels/create`, { method: "POST", headers: h, body: JSON.stringify({ name: "Sandbox", provider: "sandbox" }) });
    const channelId = ((await channelRes.json()) as any).channel.id as number;
    // The request measured beside the export: verify of one of the loaded payments (the hottest read).
    const verifyUrl = `${gateway.url}/api/transactions/verify/x_42`;

    const t0 = performance.now();
    await load(db, merchantId, channelId, ROWS);
    const loadSeconds = (performance.now() - t0) / 1000;
    console.error(`loaded ${fmt(ROWS)} transactions and ${fmt(ROWS)} ledger entries in ${loadSeconds.toFixed(1)} s`);

    const barePort = await freePort();
    const bare = spawn(process.execPath, ["--import", "tsx", "bench/exports.ts", "--bare-server"], {
      cwd: repoRoot,
      env: { ...baseEnv, DATABASE_URL: databaseUrl, MERCHANT_ID: String(merchantId), PORT: String(barePort) },
      stdio: ["ignore", "ignore", "inherit"],
    });
    children.push(bare);
    await waitForOk(`http://127.0.0.1:${barePort}/ready`);

    // Warm-up: a small export each (JIT, prepared statements), a few seconds of the load.
    await download(`${gateway.url}/v1/reports/transactions.csv?date_from=${new Date(Date.now() - 2 * DAY_SECONDS * 1000).toISOString().slice(0, 10)}`, key);
    await download(`${gateway.url}/v1/reports/balance-transactions.csv?date_from=${new Date(Date.now() - 2 * DAY_SECONDS * 1000).toISOString().slice(0, 10)}`, key);
    const warm = fixedRate(verifyUrl, key, RATE);
    await sleep(3000);
    await warm.stop();

    const exportOnce = async (url: string, withLoad: boolean): Promise<Measured> => {
      let idle: Measured["idle"];
      if (withLoad) {
        const load = fixedRate(verifyUrl, key, RATE);
        await sleep(SECONDS * 1000);
        idle = await load.stop();
      }
      const rssBefore = rssMb(gateway.child.pid!);
      let rssPeak = rssBefore;
      const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMb(gateway.child.pid!))), 20);
      const load = withLoad ? fixedRate(verifyUrl, key, RATE) : undefined;
      if (load) await sleep(1000);
      const result = await download(url, key);
      const during = await load?.stop();
      clearInterval(sampler);
      if (result.status !== 200) throw new Error(`${url}: HTTP ${result.status}`);
      return { ...result, rowsPerSecond: result.rows / result.seconds, rssBefore, rssPeak, idle, during };
    };

    const results: { name: string; gateway: Measured; bare: Measured }[] = [];
    for (const [name, path, barePath] of [
      ["transactions", "/v1/reports/transactions.csv", "/transactions.csv"],
      ["balance transactions", "/v1/reports/balance-transactions.csv", "/ledger.csv"],
    ] as const) {
      const bareRun = await exportOnce(`http://127.0.0.1:${barePort}${barePath}`, false);
      const gatewayRun = await exportOnce(`${gateway.url}${path}`, true);
      if (gatewayRun.rows !== bareRun.rows) throw new Error(`${name}: the gateway sent ${gatewayRun.rows} rows, the bare server ${bareRun.rows}`);
      results.push({ name, gateway: gatewayRun, bare: bareRun });
      console.error(
        `${name}: ${fmt(gatewayRun.rows)} rows in ${gatewayRun.seconds.toFixed(1)} s = ${fmt(gatewayRun.rowsPerSecond)} rows/s (bare ${fmt(bareRun.rowsPerSecond)}); RSS ${fmt(gatewayRun.rssBefore)} -> ${fmt(gatewayRun.rssPeak)} MB; verify p99 idle ${gatewayRun.idle!.p99} ms, during ${gatewayRun.during!.p99} ms`,
      );
    }
    gateway.child.kill("SIGTERM");

    const verdict = (ok: boolean) => (ok ? "met" : "**missed**");
    const lines = [
      `${fmt(ROWS)} rows of one merchant (time zone ${ZONE}) in each table, on one throwaway PostgreSQL ${pgVersion} (fsync off); gateway (compiled build, NODE_ENV=production) and the bare server in their own processes, each export downloaded by a client process of its own; verify at ${RATE} req/s (bench/fixed-rate.ts, open loop, up to 8 connections) for ${SECONDS} s idle, then during the export; Node ${process.version}, ${availableParallelism()} × ${cpus()[0]?.model.trim() ?? "CPU"} shared with other work (load ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after), ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, loaded in ${fmt(loadSeconds)} s, run took ${fmt((Date.now() - started) / 1000)} s`,
      "",
      "| export | rows | MB | gateway rows/s (goal >= 50,000) | bare rows/s | gateway / bare | gateway RSS before -> peak MB (growth goal < 100) | verify p99 idle -> during ms (goal <= 2x) | verify errors |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...results.map(({ name, gateway: g, bare: b }) => {
        const growth = g.rssPeak - g.rssBefore;
        const ratio = g.during!.p99 / g.idle!.p99;
        return `| ${name} | ${fmt(g.rows)} | ${fmt(g.bytes / 1e6)} | ${fmt(g.rowsPerSecond)} ${verdict(g.rowsPerSecond >= 50_000)} | ${fmt(b.rowsPerSecond)} | ${fmt(g.rowsPerSecond / b.rowsPerSecond, 2)}x | ${fmt(g.rssBefore)} -> ${fmt(g.rssPeak)} (+${fmt(growth)}) ${verdict(growth < 100)} | ${fmt(g.idle!.p99)} -> ${fmt(g.during!.p99)} (${fmt(ratio, 2)}x) ${verdict(ratio <= 2)} | ${g.idle!.errors + g.during!.errors} |`;
      }),
    ];
    const table = lines.join("\n");
    console.log(table);
    if (write) writeReadmeSection("## CSV exports at a million rows (`bench/exports.ts`)", `${INTRO}\n\n<!-- exports:start -->\n${table}\n<!-- exports:end -->`);
  } finally {
    await db.end().catch(() => {});
    cleanup();
    await pgServer.stop();
    clearTimeout(deadline);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes("--bare-server")) bareServer();
  else
    main().then(
      () => process.exit(0),
      (error) => {
        console.error(error);
        process.exit(1);
      },
    );
}
