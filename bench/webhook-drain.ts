/**
 * Webhook backlog drain (issue 27): 10,000 due deliveries, inserted directly with the gateway's own fan-out statement
 * (WEBHOOK_FAN_OUT_CTES over copies of a real transaction.completed event: one delivery and one job per event and
 * endpoint, exactly what a status change queues), drained by the gateway's job runner to a loopback receiver in this
 * process. The gateway runs in its own process (the compiled build, NODE_ENV=production, LOG_LEVEL=silent) on a
 * throwaway PostgreSQL.
 *
 * Baseline, in the same run: a bare loop in a child process (this file with --bare-loop) that signs and POSTs the same
 * bodies (the ones the gateway delivered) with the gateway's own signer and sender (webhookHeaders, postOutbound) to the
 * same receiver, at the concurrency the gateway allows itself: 5 deliveries in flight per endpoint and 50 in all per
 * instance (MAX_IN_FLIGHT_PER_ENDPOINT and MAX_SENDING in src/modules/webhooks/turns.ts; the runner claims more
 * than that, DELIVERY_CONCURRENCY, so that the next batches are loaded while others post, but never sends more). Rates are
 * deliveries per second from the first arrival to the last, at the receiver, for both (the runner's 2 s poll before
 * its first claim is left out: the backlog is not nudged, as an import or a restart would not nudge it).
 *
 * API under the drain: wrk (8 connections) on GET /api/transactions/verify, idle, then while a second backlog of the
 * same size drains; the goal is a p99 during the drain within 2x of idle.
 *
 * Two scenarios: a merchant with 10 endpoints (1,000 events, 50 in flight) and one with a single endpoint (10,000
 * events, 5 in flight).
 *
 *   node --import tsx bench/webhook-drain.ts [--deliveries 10000] [--write]
 */
import { execFile, fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { WEBHOOK_FAN_OUT_CTES } from "../src/modules/webhooks/store.ts";
import { generateWebhookSecret, webhookHeaders } from "../src/modules/webhooks/signing.ts";
import { postOutbound } from "../src/security/outbound.ts";

const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};

/** The gateway's POSTs in flight, per endpoint and per instance (src/modules/webhooks/turns.ts). */
const PER_ENDPOINT_IN_FLIGHT = 5;
const RUNNER_SLOTS = 50;
const API_CONNECTIONS = 8;
const DRAIN_TIMEOUT_MS = 180_000;

// ---------------------------------------------------------------------------------------------------------------
// The bare loop (child process)

interface BareRequest {
  /** Where each body goes, in order: the receiver's URL for that delivery. */
  urls: string[];
  bodies: string[];
  concurrency: number;
}

function runBareLoop(): void {
  process.on("message", async ({ urls, bodies, concurrency }: BareRequest) => {
    const secret = generateWebhookSecret(); // same length as an endpoint's: signing costs the same
    let next = 0;
    let failed = 0;
    const worker = async () => {
      for (let i = next++; i < bodies.length; i = next++) {
        const body = bodies[i]!;
        const headers = webhookHeaders({ id: `bare_${i}`, timestamp: Math.floor(Date.now() / 1000), body, secrets: [secret] });
        const result = await postOutbound(urls[i]!, { headers, body, timeoutMs: 10_000, allowPrivate: true });
        if (!result.ok) failed++;
      }
    };
    const started = performance.now();
    const cpu = process.cpuUsage();
    await Promise.all(Array.from({ length: concurrency }, worker));
    const used = process.cpuUsage(cpu);
    process.send!({ failed, seconds: (performance.now() - started) / 1000, cpuSeconds: (used.user + used.system) / 1e6 });
  });
  process.on("disconnect", () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------------------------
// The receiver: arrivals by run (the first path segment)

interface Run {
  arrivals: number[];
  ids: Set<string>;
  duplicates: number;
  bodies: string[];
}

async function startReceiver() {
  const runs = new Map<string, Run>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = performance.now();
      const name = req.url!.split("/")[1]!;
      let run = runs.get(name);
      if (!run) runs.set(name, (run = { arrivals: [], ids: new Set(), duplicates: 0, bodies: [] }));
      // The webhook-id is the event's id; one event goes to several endpoints, so the key is path + id.
      const key = `${req.url} ${String(req.headers["webhook-id"])}`;
      if (run.ids.has(key)) run.duplicates++;
      else {
        run.ids.add(key);
        run.arrivals.push(at);
        run.bodies.push(Buffer.concat(chunks).toString("utf8"));
      }
      res.writeHead(200, { "content-length": "0" }).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const run = (name: string) => {
    if (!runs.has(name)) runs.set(name, { arrivals: [], ids: new Set(), duplicates: 0, bodies: [] });
    return runs.get(name)!;
  };
  return { url, server, run };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => boolean, what: string, timeoutMs = DRAIN_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(10);
  }
}

/** CPU time a process has used so far (user + system), from /proc; ticks of 1/100 s on Linux. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Deliveries per second from the first arrival to the last. */
const rate = (arrivals: number[]) => (arrivals.length - 1) / ((arrivals.at(-1)! - arrivals[0]!) / 1000);

// ---------------------------------------------------------------------------------------------------------------
// Main

async function main() {
  // Loaded here: the bare loop runs this file too and needs none of it.
  const [{ startPostgres }, { createMerchant, fmt, startGateway, writeBeforeAfterSection, repoRoot }] = await Promise.all([
    import("../test/support/postgres.ts"),
    import("./scale.ts"),
  ]);
  const DELIVERIES = Number(argument("--deliveries") ?? 10_000);
  const write = process.argv.includes("--write");
  const started = Date.now();
  const loadBefore = loadavg()[0]!;
  const children: ChildProcess[] = [];
  const work = mkdtempSync(join(tmpdir(), "bench-drain-"));
  const cleanup = () => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    rmSync(work, { recursive: true, force: true });
  };
  const deadline = setTimeout(() => {
    console.error("bench/webhook-drain.ts: gave up after 15 minutes");
    cleanup();
    process.exit(1);
  }, 15 * 60_000);

  await promisify(execFile)("npm", ["run", "build", "--silent"], { cwd: repoRoot });
  const pgServer = await startPostgres();
  const databaseUrl = await pgServer.createDatabase();
  const env = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: randomBytes(32).toString("hex"), DATA_DIR: join(work, "data"), ALLOW_PRIVATE_URLS: "true" };
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  db.on("error", (error) => console.error(`bench pool: ${error.message}`));
  const receiver = await startReceiver();
  const bare = fork(fileURLToPath(import.meta.url), ["--bare-loop"], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  children.push(bare);
  try {
    const gateway = await startGateway(env, children);
    const pgVersion = (await db.query<{ server_version: string }>("SHOW server_version")).rows[0]!.server_version;

    /** wrk on verify, asynchronously: this process's event loop is the receiver's and must keep answering. */
    const verifyLoad = async (reference: string, key: string, seconds: number) => {
      const { stdout } = await promisify(execFile)("wrk", ["-t1", `-c${API_CONNECTIONS}`, `-d${seconds}s`, "--latency", "-H", `X-API-Key: ${key}`, `${gateway.url}/api/transactions/verify/${reference}`]);
      const toMs = (v = "") => {
        const m = /^([\d.]+)(us|ms|s)$/.exec(v.trim());
        return m ? Number(m[1]) * (m[2] === "us" ? 0.001 : m[2] === "s" ? 1000 : 1) : Number.NaN;
      };
      return {
        rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]),
        p50: toMs(/^\s+50%\s+(\S+)/m.exec(stdout)?.[1]),
        p99: toMs(/^\s+99%\s+(\S+)/m.exec(stdout)?.[1]),
        errors: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
      };
    };

    const scenarios = [10, 1].map((endpoints) => ({ endpoints, inFlight: Math.min(RUNNER_SLOTS, endpoints * PER_ENDPOINT_IN_FLIGHT) }));
    const results = [];
    for (const { endpoints, inFlight } of scenarios) {
      const name = `e${endpoints}`;
      const merchant = createMerchant(env, `drain${endpoints}`);
      const h = { "x-api-key": merchant.keys.test, "content-type": "application/json" };
      const post = async (path: string, body: unknown, status = 201) => {
        const res = await fetch(`${gateway.url}${path}`, { method: "POST", headers: h, body: JSON.stringify(body) });
        if (res.status !== status) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
        return res.json() as Promise<any>;
      };
      // One real payment: its transaction.completed event is the one the backlog copies (no endpoint yet, so no delivery).
      await post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
      const { reference } = await post("/api/transactions/initialize", { amount: 2500, email: "payer@example.test" }, 200);
      await post(`/payment/checkout/${reference}/pay`, { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 3, cvc: "123" }, 200);
      const source = (await db.query<{ id: string }>("SELECT id FROM events WHERE merchant_id = $1 AND type = 'transaction.completed' ORDER BY id DESC LIMIT 1", [merchant.merchant.id])).rows[0];
      if (!source) throw new Error("the payment recorded no transaction.completed event");
      for (let i = 0; i < endpoints; i++) await post("/v1/webhooks", { url: `${receiver.url}/${name}/${i}`, events: ["transaction.completed"] });

      /** A backlog: DELIVERIES / endpoints copies of the event, fanned out to every endpoint by the gateway's statement. */
      const backlog = async (runName: string) => {
        // Every endpoint URL carries the run's name, so each backlog's arrivals are told apart.
        await db.query(`UPDATE webhook_endpoints SET url = regexp_replace(url, '/[^/]+/([0-9]+)$', '/' || $2 || '/\\1') WHERE merchant_id = $1`, [merchant.merchant.id, runName]);
        const { rows } = await db.query<{ queued: number }>(
          `WITH ev AS (
             INSERT INTO events (merchant_id, mode, type, transaction_id, payload)
             SELECT merchant_id, mode, type, transaction_id, payload FROM events, generate_series(1, $2::int) WHERE id = $1
             RETURNING id, merchant_id, mode, type
           ), ${WEBHOOK_FAN_OUT_CTES}
           SELECT count(*)::int AS queued FROM delivery_jobs`,
          [source.id, Math.ceil(DELIVERIES / endpoints)],
        );
        return { queued: rows[0]!.queued, committedAt: performance.now() };
      };
      const settled = async () =>
        (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 AND status = 'pending'", [merchant.merchant.id])).rows[0]!.n === 0;

      // 1. The gateway drains a backlog, the API idle.
      const gatewayCpu = cpuSeconds(gateway.child.pid!);
      const drain = await backlog(`${name}-gw`);
      const gwRun = receiver.run(`${name}-gw`);
      await waitFor(() => gwRun.arrivals.length >= drain.queued, `${drain.queued} deliveries (gateway)`);
      const lastArrival = gwRun.arrivals.at(-1)!;
      while (!(await settled())) await sleep(50);
      const settledAfter = (performance.now() - lastArrival) / 1000;
      // From before the backlog to all rows settled: the poll wait before the first claim costs next to nothing.
      const gatewayCpuMs = ((cpuSeconds(gateway.child.pid!) - gatewayCpu) * 1000) / drain.queued;
      console.error(`${name}: gateway drained ${drain.queued} at ${fmt(rate(gwRun.arrivals))}/s`);

      // 2. The bare loop posts the same bodies to the same endpoints' paths, at the gateway's concurrency.
      const bareRun = receiver.run(`${name}-bare`);
      const urls = gwRun.bodies.map((_, i) => `${receiver.url}/${name}-bare/${i % endpoints}`);
      const bareReport = await new Promise<{ failed: number; seconds: number; cpuSeconds: number }>((resolve) => {
        bare.once("message", resolve);
        bare.send({ urls, bodies: gwRun.bodies, concurrency: inFlight } satisfies BareRequest);
      });
      if (bareReport.failed) throw new Error(`bare loop: ${bareReport.failed} POSTs failed`);
      await waitFor(() => bareRun.arrivals.length >= urls.length, "the bare loop's arrivals");
      console.error(`${name}: bare loop ${fmt(rate(bareRun.arrivals))}/s`);

      // 3. API p99 idle, then during a second backlog (wrk starts at its first arrival, for most of the idle drain's time).
      const drainSeconds = (gwRun.arrivals.at(-1)! - gwRun.arrivals[0]!) / 1000;
      // At least 10 s: a shorter run's p99 is a handful of requests, and the drain's first claim (made before the API
      // is busy) would weigh in it far beyond its share of a sustained load.
      const apiSeconds = Math.max(10, Math.floor(drainSeconds * 0.7));
      const idle = await verifyLoad(reference, merchant.keys.test, apiSeconds);
      const loaded = receiver.run(`${name}-api`);
      const second = await backlog(`${name}-api`);
      await waitFor(() => loaded.arrivals.length > 0, "the second backlog's first delivery");
      const wrkStart = performance.now();
      const during = await verifyLoad(reference, merchant.keys.test, apiSeconds);
      const wrkEnd = performance.now();
      await waitFor(() => loaded.arrivals.length >= second.queued, `${second.queued} deliveries (under API load)`);
      while (!(await settled())) await sleep(50);
      const drainEnd = loaded.arrivals.at(-1)!;
      const covered = Math.max(0, Math.min(drainEnd, wrkEnd) - wrkStart) / (wrkEnd - wrkStart);
      console.error(`${name}: verify p99 idle ${fmt(idle.p99, 1)} ms, during the drain ${fmt(during.p99, 1)} ms`);

      results.push({
        endpoints,
        inFlight,
        queued: drain.queued,
        gatewayRate: rate(gwRun.arrivals),
        bareRate: rate(bareRun.arrivals),
        firstAfterCommit: (gwRun.arrivals[0]! - drain.committedAt) / 1000,
        drainSeconds,
        bareSeconds: (bareRun.arrivals.at(-1)! - bareRun.arrivals[0]!) / 1000,
        settledAfter,
        gatewayCpuMs,
        bareCpuMs: (bareReport.cpuSeconds * 1000) / urls.length,
        duplicates: gwRun.duplicates + loaded.duplicates,
        idle,
        during,
        // Deliveries that arrived while wrk ran, per second of it.
        loadedRate: (loaded.arrivals.filter((t) => t >= wrkStart && t <= wrkEnd).length * 1000) / (wrkEnd - wrkStart),
        covered,
        apiSeconds,
      });
    }
    gateway.child.kill("SIGTERM");

    const lines = [
      `${fmt(DELIVERIES)} due deliveries per backlog (inserted with the gateway's fan-out statement), one gateway process (compiled build, NODE_ENV=production, default job poll 2 s) on a throwaway PostgreSQL ${pgVersion} (fsync off), receiver in the bench process, bare loop in its own process; Node ${process.version}, ${availableParallelism()} CPUs shared with other work (load ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after), ${new Date().toISOString().slice(0, 10)}, run took ${fmt((Date.now() - started) / 1000)} s`,
      "",
      "| endpoints | in flight (gateway's limit = bare loop's) | gateway: deliveries/s (first -> last arrival) | bare loop: deliveries/s | gateway / bare (goal >= 0.5x) | gateway drain (s) | bare (s) | commit -> first arrival (s) | last arrival -> all rows settled (s) | CPU per delivery, gateway process / bare loop process (ms) | duplicates |",
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...results.map(
        (r) =>
          `| ${r.endpoints} | ${r.inFlight} | ${fmt(r.gatewayRate)} | ${fmt(r.bareRate)} | ${fmt(r.gatewayRate / r.bareRate, 2)}x ${r.gatewayRate / r.bareRate >= 0.5 ? "met" : "**missed**"} | ${fmt(r.drainSeconds, 1)} | ${fmt(r.bareSeconds, 1)} | ${fmt(r.firstAfterCommit, 2)} | ${fmt(r.settledAfter, 2)} | ${fmt(r.gatewayCpuMs, 2)} / ${fmt(r.bareCpuMs, 2)} | ${r.duplicates} |`,
      ),
      "",
      `API during a drain: wrk, 1 thread, ${API_CONNECTIONS} connections, on GET /api/transactions/verify, idle and then while a second backlog of the same size drains (wrk from its first arrival, for 70 % of the idle drain's time, at least 10 s):`,
      "",
      "| endpoints | wrk (s) | idle: req/s (p50 / p99 ms) | during the drain: req/s (p50 / p99 ms) | p99 during / idle (goal <= 2x) | share of the wrk run the drain lasted | drain while wrk ran: deliveries/s | non-2xx |",
      "|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...results.map((r) => {
        const ratio = r.during.p99 / r.idle.p99;
        return `| ${r.endpoints} | ${r.apiSeconds} | ${fmt(r.idle.rps)} (${fmt(r.idle.p50, 1)} / ${fmt(r.idle.p99, 1)}) | ${fmt(r.during.rps)} (${fmt(r.during.p50, 1)} / ${fmt(r.during.p99, 1)}) | ${fmt(ratio, 2)}x ${ratio <= 2 ? "met" : "**missed**"} | ${fmt(r.covered * 100)} % | ${fmt(r.loadedRate)} | ${r.idle.errors + r.during.errors} |`;
      }),
    ];
    const table = lines.join("\n");
    console.log(table);
    if (write) {
      writeBeforeAfterSection(
        "## Webhook backlog drain (`bench/webhook-drain.ts`)",
        "webhook-drain",
        `Issue 27: a backlog of 10,000 due webhook deliveries, inserted directly with the gateway's own fan-out statement
(copies of a real \`transaction.completed\` event, one delivery and one job per event and endpoint), drained by one
gateway's job runner to a loopback receiver, against a bare loop in its own process that signs and POSTs the same bodies
with the gateway's signer and sender (\`webhookHeaders\`, \`postOutbound\`) at the same concurrency: the runner's own
limits, 5 in flight per endpoint and 50 per instance. Rates count arrivals at the receiver, first to last (the runner's
2 s poll before its first claim is left out and shown apart). Two merchants: one with 10 endpoints (1,000 events, 50 in
flight), one with a single endpoint (10,000 events, 5 in flight). CPU per delivery: the gateway process's CPU time
(/proc) from the backlog's insert to its last row settled, and the bare loop's own, over the deliveries. Then GET
/api/transactions/verify under wrk, idle and while a second backlog drains. Goals (issue 27): the drain >= 0.5x of the
bare loop; API p99 during the drain <= 2x of idle. \`node --import tsx bench/webhook-drain.ts --write\` (4 to 8 minutes
on a busy machine).`,
        table,
        "",
      );
    }
  } finally {
    await db.end().catch(() => {});
    receiver.server.close();
    cleanup();
    await pgServer.stop();
    clearTimeout(deadline);
  }
}

if (process.argv.includes("--bare-loop")) {
  runBareLoop();
} else if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
