/**
 * Where a hot path's p99 at half load comes from (issue 42: p99 < 25 ms at half the measured maximum): one gateway
 * process per variant (`npm start`'s loader, NODE_ENV=production, silent, no rate limits) on a throwaway PostgreSQL,
 * its maximum on GET verify measured with wrk (32 connections), then a fixed rate of half that from bench/fixed-rate.ts in its
 * own process (open loop), every response's latency kept with the second it arrived in: p50, p99, max, and the seconds whose
 * slowest answers hold the tail (a periodic stall shows as a few bad seconds, contention as all of them alike).
 *
 *   node --import tsx bench/tail-probe.ts [--seconds 20] [--variants base,nojobs,semispace]
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../test/support/local-server.ts";
import { startPostgres } from "../test/support/postgres.ts";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const SECONDS = Number(argument("--seconds") ?? 20);
const work = mkdtempSync(join(tmpdir(), "tail-probe-"));
const children: ChildProcess[] = [];

/** What differs between runs: the gateway's environment and node's flags. */
const VARIANTS: Record<string, { env?: Record<string, string>; nodeFlags?: string[]; about: string }> = {
  base: { about: "as configured (job runner on)" },
  nojobs: { env: { JOBS_ENABLED: "false" }, about: "JOBS_ENABLED=false (no job runner polling)" },
  poll5s: { env: { JOB_POLL_INTERVAL_MS: "5000" }, about: "JOB_POLL_INTERVAL_MS=5000 (the runner's poll every 5 s, not 2 s)" },
  semispace: { nodeFlags: ["--max-semi-space-size=32"], about: "node --max-semi-space-size=32 (fewer young-generation GCs)" },
  keyttl: { env: { API_KEY_CACHE_TTL_MS: "3600000" }, about: "API_KEY_CACHE_TTL_MS=3600000 (the verified key never looked up again during the run)" },
  watch: { nodeFlags: ["--require", join(repoRoot, "bench/loop-watch.cjs")], about: "as base, with bench/loop-watch.cjs preloaded: event-loop blocks and GC pauses with epoch times, to a file in the temp dir" },
  semi64: { nodeFlags: ["--require", join(repoRoot, "bench/loop-watch.cjs"), "--max-semi-space-size=64"], about: "--max-semi-space-size=64, watched" },
  single: { nodeFlags: ["--require", join(repoRoot, "bench/loop-watch.cjs"), "--single-threaded-gc"], about: "--single-threaded-gc (no helper threads for the GC), watched" },
  pool1: { nodeFlags: ["--require", join(repoRoot, "bench/loop-watch.cjs"), "--v8-pool-size=1"], about: "--v8-pool-size=1 (one V8 helper thread: concurrent marking takes at most one of the 2 cores), watched" },
  semi32: { nodeFlags: ["--require", join(repoRoot, "bench/loop-watch.cjs"), "--max-semi-space-size=32"], about: "--max-semi-space-size=32, watched" },
  gc: { nodeFlags: ["--trace-gc"], about: "as base, with V8's --trace-gc: the garbage collector's pauses of 10 ms or more, by second" },
};

async function waitForOk(url: string) {
  for (const started = Date.now(); Date.now() - started < 120_000; ) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} never answered 200`);
}

async function startGateway(env: Record<string, string>, nodeFlags: string[]) {
  const port = await freePort();
  const stdout = openSync(join(work, `gateway-${port}.out`), "w");
  const child = spawn(process.execPath, [...nodeFlags, "--import", "tsx", "src/main.ts"], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", NODE_ENV: "production", LOG_LEVEL: "silent", RATE_LIMIT_ENABLED: "false", PORT: String(port), HOST: "127.0.0.1", ...env },
    stdio: ["ignore", stdout, "inherit"],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitForOk(`${url}/ready`);
  return { url, child, stdoutFile: join(work, `gateway-${port}.out`) };
}

function wrkMax(url: string, headers: Record<string, string>): number {
  const args = ["-t1", "-c32", "-d5s"];
  for (const [k, v] of Object.entries(headers)) args.push("-H", `${k}: ${v}`);
  const out = execFileSync("wrk", [...args, url], { encoding: "utf8" });
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]);
}

/** A fixed rate, open loop, in its own process (bench/fixed-rate.ts): every answer's latency and the second it was due in. */
function fixedRate(url: string, rate: number, headers: Record<string, string>): { at: number; ms: number }[] {
  const file = join(work, `samples-${randomBytes(4).toString("hex")}.json`);
  const args = ["--import", "tsx", join(repoRoot, "bench/fixed-rate.ts"), url, "--rate", String(rate), "--connections", "32", "--seconds", String(SECONDS), "--samples", file];
  for (const [name, value] of Object.entries(headers)) args.push("--header", `${name}: ${value}`);
  execFileSync(process.execPath, args, { cwd: repoRoot, encoding: "utf8" });
  const samples = JSON.parse(readFileSync(file, "utf8")) as [number, number, number][];
  const t0 = samples.reduce((min, [at]) => Math.min(min, at), Infinity);
  if (process.env.TAIL_PROBE_STALLS) {
    // Each stall's start (epoch ms): the earliest due time of a run of answers of 40 ms or more.
    const slow = samples.filter(([, ms]) => ms >= 40).sort((a, b) => a[0] - b[0]);
    const starts = slow.filter(([at], i) => i === 0 || at - slow[i - 1]![0] > 200).map(([at, ms, lag]) => `${at} (${ms} ms, sent ${lag} ms late)`);
    console.log(`  stalls start at: ${starts.join(", ")}`);
  }
  return samples.map(([at, ms]) => ({ at: Math.floor((at - t0) / 1000), ms }));
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function main() {
  const pgServer = await startPostgres();
  const wanted = (argument("--variants") ?? "base,nojobs,semispace").split(",");
  try {
    for (const name of wanted) {
      const variant = VARIANTS[name]!;
      const databaseUrl = await pgServer.createDatabase();
      const env = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: randomBytes(32).toString("hex"), DATA_DIR: join(work, name), ...variant.env };
      const created = JSON.parse(
        execFileSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "merchant", "create", "--name", name, "--email", `${name}@probe.test`], {
          cwd: repoRoot,
          env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LOG_LEVEL: "warn", ...env },
        }).toString(),
      ) as { keys: { test: string } };
      const gatewayStarted = performance.now();
      const gateway = await startGateway(env, variant.nodeFlags ?? []);
      const headers = { "x-api-key": created.keys.test };
      await fetch(`${gateway.url}/api/payment-channels/create`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ name: "Sandbox", provider: "sandbox" }) });
      const init = (await (await fetch(`${gateway.url}/api/transactions/initialize`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ amount: 1000, email: "p@probe.test" }) })).json()) as { reference: string };
      const url = `${gateway.url}/api/transactions/verify/${init.reference}`;
      wrkMax(url, headers); // warm-up
      const max = wrkMax(url, headers);
      const gcBefore = readFileSync(gateway.stdoutFile, "utf8").length;
      const loadStarted = performance.now();
      const samples = fixedRate(url, Math.round(max / 2), headers);
      const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
      const p99 = percentile(sorted, 99);
      const perSecond = new Map<number, number[]>();
      for (const s of samples) perSecond.set(s.at, [...(perSecond.get(s.at) ?? []), s.ms]);
      const tail = [...perSecond.entries()].map(([at, ms]) => ({ at, over: ms.filter((m) => m >= p99).length, max: Math.max(...ms) }));
      console.log(
        `${name} (${variant.about}): max ${max.toFixed(0)} req/s; at ${Math.round(max / 2)} req/s: ${samples.length} answers, p50 ${percentile(sorted, 50)} / p99 ${p99} / max ${sorted.at(-1)} ms; ` +
          `answers at or over p99 by second: ${tail.map((t) => `${t.at}:${t.over}(${t.max})`).join(" ")}`,
      );
      if (variant.nodeFlags?.includes("--trace-gc")) {
        // --trace-gc lines: "[pid:0x...]    12345 ms: Mark-Compact 150.2 (160.1) -> 120.3 (158.0) MB, 85.3 / 0.0 ms ...".
        const uptimeAtLoad = (loadStarted - gatewayStarted) / 1000;
        const pauses = readFileSync(gateway.stdoutFile, "utf8")
          .slice(gcBefore)
          .split("\n")
          .flatMap((line) => {
            const m = /\s(\d+) ms: (\S+(?: \(\S+\))?) .*?MB, ([\d.]+) \/ ([\d.]+) ms/.exec(line);
            return m ? [{ second: Math.floor(Number(m[1]) / 1000 - uptimeAtLoad), kind: m[2]!, ms: Number(m[3]) }] : [];
          });
        const long = pauses.filter((p) => p.ms >= 10);
        if (process.env.TAIL_PROBE_STALLS) for (const line of readFileSync(gateway.stdoutFile, "utf8").slice(gcBefore).split("\n").filter((l) => l.includes("Mark-Compact")).slice(0, 6)) console.log(`  ${line.trim()}`);
        console.log(`  GC during the load: ${pauses.length} pauses, ${pauses.reduce((a, p) => a + p.ms, 0).toFixed(0)} ms in all; 10 ms or more: ${long.map((p) => `${p.second}:${p.kind} ${p.ms.toFixed(0)} ms`).join(", ") || "none"}`);
      }
      gateway.child.kill("SIGTERM");
      await new Promise((r) => gateway.child.once("exit", r));
    }
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    await pgServer.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    process.exit(1);
  },
);
