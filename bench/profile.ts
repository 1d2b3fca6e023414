/**
 * Where a hot path's CPU goes: the gateway as its own process under `node --cpu-prof` on a throwaway
 * PostgreSQL, driven by wrk (1 thread, 32 connections) on one operation, then stopped with SIGTERM so
 * V8 writes the profile. Prints the top frames by self time and the share of time per package.
 *
 *   node --import tsx bench/profile.ts verify        # or initialize, list, card (checkout card payments, each its own
 *                                                    # pending row, 4,000 made first)
 *   node --import tsx bench/profile.ts verify 10     # seconds of load (default 6)
 *   node --import tsx bench/profile.ts verify 6 --production   # as bench/http.ts --production's gateway: rate limits
 *                                                    # on Redis, LOG_LEVEL=info to a file, an Idempotency-Key per write
 *   node --import tsx bench/profile.ts card 6 --jobs-off       # JOBS_ENABLED=false: no job (receipt, webhook) runs
 *   node --import tsx bench/profile.ts verify 6 --production --no-limits   # production without the rate limiter: what
 *                                                    # the log lines and keys cost alone (LOG_LEVEL=silent: the limiter alone)
 *
 * Also prints the CPU per request of the gateway and of PostgreSQL's processes during the load (/proc ticks), which
 * tells a path that waits (locks, a pool) from one that works.
 */
import { spawn, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startPostgres } from "../test/support/postgres.ts";
import { startRedis } from "../test/support/redis.ts";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const operation = process.argv[2] ?? "verify";
const seconds = Number(process.argv[3] ?? 6);
const production = process.argv.includes("--production");
const jobsOff = process.argv.includes("--jobs-off");
const noLimits = process.argv.includes("--no-limits");
if (!["verify", "initialize", "list", "card"].includes(operation)) throw new Error("operation: verify, initialize, list or card");

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The package a frame belongs to (node_modules/<pkg>), or our own folder, or node internals. */
function ownerOf(url: string): string {
  if (!url) return "(native / GC / idle)";
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + "node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith("node:")) return "node:internals";
  const src = url.indexOf("/src/");
  if (src >= 0) return `src/${url.slice(src + 5).split("/")[0]}`;
  return url;
}

function summarize(profile: CpuProfile) {
  const selfTime = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    selfTime.set(profile.samples[i]!, (selfTime.get(profile.samples[i]!) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const total = [...selfTime.values()].reduce((a, b) => a + b, 0);
  const frames = new Map<string, number>();
  const owners = new Map<string, number>();
  for (const [id, time] of selfTime) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.split("/").slice(-2).join("/");
    const name = `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}`;
    frames.set(name, (frames.get(name) ?? 0) + time);
    const owner = ownerOf(url);
    owners.set(owner, (owners.get(owner) ?? 0) + time);
  }
  const pct = (t: number) => ((100 * t) / total).toFixed(1).padStart(5);
  console.log(`\nTop frames by self time (${operation}, ${(total / 1e6).toFixed(1)} s sampled):`);
  for (const [name, time] of [...frames].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${pct(time)} %  ${name}`);
  // Inclusive time of the gateway's own functions (a frame counted once per sample however deep it recurs):
  // which of our steps the self times above add up under.
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const inclusive = new Map<string, number>();
  for (const [id, time] of selfTime) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const { functionName, url, lineNumber } = byId.get(at)!.callFrame;
      if (!/\/(dist|src)\//.test(url) || url.includes("node_modules/")) continue;
      const name = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + time);
    }
  }
  console.log("\nThe gateway's own functions by inclusive time:");
  for (const [name, time] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${pct(time)} %  ${name}`);
  console.log("\nSelf time by package:");
  for (const [owner, time] of [...owners].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`${pct(time)} %  ${owner}`);
}

const logLevel = process.env.LOG_LEVEL ?? "info";

/** CPU ticks (user + system) so far of the gateway's process and of every PostgreSQL process, from /proc. */
function cpuTicks(gatewayPid: number): { gateway: number; postgres: number } {
  const ticks = { gateway: 0, postgres: 0 };
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    const command = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const used = Number(fields[11]) + Number(fields[12]);
    if (Number(pid) === gatewayPid) ticks.gateway += used;
    else if (command.startsWith("postgres")) ticks.postgres += used;
  }
  return ticks;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

async function waitForHealth(url: string, child: ReturnType<typeof spawn>): Promise<string> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error("gateway exited");
    if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("gateway did not start");
}

async function main() {
  const port = await freePort();
  const pgServer = await startPostgres();
  const databaseUrl = await pgServer.createDatabase();
  const work = mkdtempSync(join(tmpdir(), "gateway-profile-"));
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    NODE_ENV: "production",
    LOG_LEVEL: "silent",
    RATE_LIMIT_ENABLED: "false",
    DATABASE_URL: databaseUrl,
    ENCRYPTION_KEY: randomBytes(32).toString("hex"),
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: work,
    ...(jobsOff ? { JOBS_ENABLED: "false" } : {}),
  };
  const created = JSON.parse(
    execFileSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "merchant", "create", "--name", "Bench", "--email", "bench@bench.test"], {
      cwd: repoRoot,
      env: { ...env, LOG_LEVEL: "warn" },
    }).toString(),
  );
  const key: string = created.keys.test;
  const redis = production && !noLimits ? await startRedis() : undefined;
  const productionEnv = redis
    ? { RATE_LIMIT_ENABLED: "true", REDIS_URL: redis.url, RATE_LIMIT_PER_MINUTE: "1000000000", RATE_LIMIT_IP_PER_MINUTE: "1000000000" }
    : {};
  // The compiled build, as production runs it: no TypeScript loader in the profile.
  execFileSync("npm", ["run", "build", "--silent"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
  const child = spawn(process.execPath, ["--cpu-prof", "--cpu-prof-dir", work, "dist/main.js"], {
    cwd: repoRoot,
    // LOG_LEVEL=silent profiles what bench/http.ts measures; the default shows production's request lines too.
    env: { ...env, LOG_LEVEL: logLevel, PORT: String(port), ...productionEnv },
    // --production: the log lines go to a file, as an operator's do.
    stdio: ["ignore", production ? openSync(join(work, "gateway.log"), "a") : "pipe", "inherit"],
  });
  const url = logLevel !== "info" || production ? await waitForHealth(`http://127.0.0.1:${port}`, child) : await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const m = out.match(/"address":"(http:\/\/[^"]+)"/);
      if (m) resolve(m[1]!);
    });
    child.on("exit", () => reject(new Error(`gateway exited: ${out}`)));
  });
  const headers = { "x-api-key": key, "content-type": "application/json" };
  await fetch(`${url}/api/payment-channels/create`, { method: "POST", headers, body: JSON.stringify({ name: "Sandbox", provider: "sandbox" }) });
  let reference = "";
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${url}/api/transactions/initialize`, { method: "POST", headers, body: JSON.stringify({ amount: 1000 + i, email: `p${i % 20}@bench.test` }) });
    reference = ((await res.json()) as { reference: string }).reference;
  }
  const lua = join(work, "post.lua");
  writeFileSync(lua, `wrk.method = "POST"\nwrk.body = '{"amount":2500,"email":"wrk@bench.test"}'\nwrk.headers["Content-Type"] = "application/json"\n`);
  // --production: a fresh Idempotency-Key on every write.
  if (production) writeFileSync(lua, `local n = 0\nrequest = function()\n  n = n + 1\n  wrk.headers["Idempotency-Key"] = "${randomBytes(6).toString("hex")}-" .. n\n  return wrk.format()\nend\n`, { flag: "a" });
  if (operation === "card") {
    // Each payment its own pending row (a row pays once), paid with the sandbox's success card.
    const references: string[] = [];
    for (let batch = 0; batch < 100; batch++) {
      const made = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          fetch(`${url}/api/transactions/initialize`, { method: "POST", headers, body: JSON.stringify({ amount: 1500, email: `payer${(batch * 40 + i) % 50}@bench.test` }) }).then(
            (res) => res.json() as Promise<{ reference: string }>,
          ),
        ),
      );
      references.push(...made.map((t) => t.reference));
    }
    writeFileSync(join(work, "references.txt"), references.join("\n"));
    const card = `'{"card_number":"4084084084084081","expiry_month":12,"expiry_year":2030,"cvc":"408"}'`;
    writeFileSync(
      lua,
      `local ids = {}\nfor line in io.lines("${join(work, "references.txt")}") do ids[#ids + 1] = line end\nlocal n = 0\n` +
        `request = function()\n  n = n + 1\n  return wrk.format("POST", "/payment/checkout/" .. (ids[n] or ids[#ids]) .. "/pay", { ["Content-Type"] = "application/json" }, ${card})\nend\n`,
    );
  }
  const path = { verify: `/api/transactions/verify/${reference}`, initialize: "/api/transactions/initialize", list: "/api/transactions/list", card: "/" }[operation]!;
  const wrkArgs = ["-t1", "-c32", `-d${seconds}s`, "--latency", "-H", `X-API-Key: ${key}`, ...(operation === "initialize" || operation === "card" ? ["-s", lua] : []), `${url}${path}`];
  const before = cpuTicks(child.pid!);
  const output = execFileSync("wrk", wrkArgs).toString();
  const after = cpuTicks(child.pid!);
  console.log(output);
  const requests = Number(/(\d+) requests in/.exec(output)?.[1] ?? 0);
  for (const side of ["gateway", "postgres"] as const) {
    // Linux counts ticks of 10 ms (USER_HZ 100).
    console.log(`CPU ${side}: ${(((after[side] - before[side]) * 10) / Math.max(1, requests)).toFixed(2)} ms per request`);
  }
  child.kill("SIGTERM");
  await new Promise((r) => child.on("exit", r));
  const file = readdirSync(work).find((f) => f.endsWith(".cpuprofile"));
  if (!file) throw new Error("no profile written");
  summarize(JSON.parse(readFileSync(join(work, file), "utf8")) as CpuProfile);
  rmSync(work, { recursive: true, force: true });
  await redis?.stop();
  await pgServer.stop();
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
