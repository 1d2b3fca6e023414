/**
 * Rate limiter overhead: the same authenticated route (GET /v1/status) on three in-process gateways, with
 * limiting off (the baseline), with the in-memory limiter and with the Redis limiter; N requests each over
 * keep-alive HTTP to 127.0.0.1 only, once CONCURRENCY at a time and once serially (the plain added latency).
 * Configurations are measured in interleaved slices so drift on a shared machine hits them alike. SQL
 * statements per request are counted too: Prisma merges findUnique calls made in the same tick, which
 * requests arriving together (e.g. released by one Redis reply) make more likely.
 *
 *   node --import tsx bench/rate-limit.ts            # print the table
 *   node --import tsx bench/rate-limit.ts --write    # and record it in bench/README.md
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/logger.ts";
import { createGateway, type Gateway } from "../src/server.ts";
import { startRedis } from "../test/support/redis.ts";

const N = 2000;
const CONCURRENCY = [10, 1];
const WARMUP = 200;
const SLICES = 4;

interface Target {
  name: string;
  gateway: Gateway;
  port: number;
  apiKey: string;
  dataDir: string;
  latenciesMs: number[];
  sqlStatements: number;
}

async function startTarget(name: string, env: Record<string, string>): Promise<Target> {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-rate-limit-"));
  const config = loadConfig({ NODE_ENV: "production", LOG_LEVEL: "silent", DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", ...env });
  const target = { sqlStatements: 0 } as Target;
  const gateway = await createGateway(config, createLogger("silent"), { onQuery: () => void target.sqlStatements++ });
  await gateway.app.listen({ port: 0, host: "127.0.0.1" });
  const address = gateway.app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const { keys } = await gateway.services.merchants.createMerchant({ name: "Bench", email: "bench@example.test" });
  return Object.assign(target, { name, gateway, port, apiKey: keys.test.plaintext, dataDir, latenciesMs: [] });
}

const agent = new Agent({ keepAlive: true, maxSockets: Math.max(...CONCURRENCY) });

function get(target: Target): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = request(
      { host: "127.0.0.1", port: target.port, path: "/v1/status", agent, headers: { "x-api-key": target.apiKey } },
      (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode !== 200) return reject(new Error(`${target.name}: HTTP ${res.statusCode}`));
          resolve(Number(process.hrtime.bigint() - started) / 1e6);
        });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** `count` requests, `concurrency` in flight at a time. */
async function run(target: Target, count: number, concurrency: number, record: boolean): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const ms = await get(target);
      if (record) target.latenciesMs.push(ms);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Stats {
  name: string;
  p50: number;
  p99: number;
  mean: number;
  sqlPerRequest: number;
}

/** Measures every target at one concurrency, interleaved in slices. */
async function measure(targets: Target[], concurrency: number): Promise<Stats[]> {
  for (const target of targets) {
    target.latenciesMs = [];
    await run(target, WARMUP, concurrency, false);
    target.sqlStatements = 0;
  }
  for (let slice = 0; slice < SLICES; slice++) {
    for (const target of targets) await run(target, N / SLICES, concurrency, true);
  }
  return targets.map((t) => {
    const sorted = [...t.latenciesMs].sort((a, b) => a - b);
    const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
    return { name: t.name, p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean, sqlPerRequest: t.sqlStatements / N };
  });
}

function markdownTable(stats: Stats[]): string {
  const base = stats[0]!;
  const ms = (v: number) => v.toFixed(2);
  const ratio = (v: number, b: number) => `${(v / b).toFixed(2)}x`;
  return [
    "| limiter | p50 (ms) | p50 ratio | p99 (ms) | p99 ratio | mean (ms) | SQL / request |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ...stats.map(
      (s) => `| ${s.name} | ${ms(s.p50)} | ${ratio(s.p50, base.p50)} | ${ms(s.p99)} | ${ratio(s.p99, base.p99)} | ${ms(s.mean)} | ${s.sqlPerRequest.toFixed(2)} |`,
    ),
  ].join("\n");
}

async function main() {
  const redis = await startRedis();
  const huge = "1000000"; // a budget no run reaches: the limiter does all its work, never refuses
  const targets: Target[] = [];
  const sections: string[] = [];
  try {
    targets.push(await startTarget("off (baseline)", { RATE_LIMIT_ENABLED: "false" }));
    targets.push(await startTarget("memory", { RATE_LIMIT_PER_MINUTE: huge }));
    targets.push(await startTarget("redis", { RATE_LIMIT_PER_MINUTE: huge, REDIS_URL: redis.url }));
    if (targets[2]!.gateway.rateLimiter?.store !== "redis") throw new Error("the Redis target is not using Redis");
    for (const concurrency of CONCURRENCY) {
      const table = markdownTable(await measure(targets, concurrency));
      sections.push(`Concurrency ${concurrency}:\n\n${table}`);
      console.log(`\n${sections.at(-1)}`);
    }
  } finally {
    agent.destroy();
    for (const target of targets) {
      await target.gateway.close();
      rmSync(target.dataDir, { recursive: true, force: true });
    }
    await redis.stop();
  }

  const context = `GET /v1/status, N=${N} per limiter and concurrency, embedded PGlite, Node ${process.version}, ${cpus().length} CPUs, ${new Date().toISOString().slice(0, 10)}`;
  console.log(`\n${context}`);
  if (process.argv.includes("--write")) {
    const readme = fileURLToPath(new URL("./README.md", import.meta.url));
    const start = "<!-- rate-limit:start -->";
    const end = "<!-- rate-limit:end -->";
    const text = readFileSync(readme, "utf8");
    const from = text.indexOf(start);
    const to = text.indexOf(end);
    if (from < 0 || to < from) throw new Error(`bench/README.md has no ${start} ... ${end} block`);
    writeFileSync(readme, `${text.slice(0, from + start.length)}\n${context}\n\n${sections.join("\n\n")}\n${text.slice(to)}`);
    console.log("recorded in bench/README.md");
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
