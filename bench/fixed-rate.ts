/**
 * A fixed-rate HTTP load in its own process, stopped by SIGINT or after --seconds: the API traffic of a working day
 * rather than a flood, so a bench measures the latency its own work adds, not CPU starvation. Open loop: request i is
 * due at start + i / rate, sent then on a free keep-alive connection (at most --connections; a request finding none
 * waits for one), and its latency runs from when it was due, not from when it went out, so a server that stalls is
 * charged for every request it held back (wrk2's "coordinated omission" correction).
 *
 * Why not autocannon's `overallRate`: it is a per-connection quota reset every second (lib/httpClient.js
 * `reqsMadeThisSecond`), so each second opens with every connection sending back to back at full speed until its
 * share is spent, then idles. Its latencies are those of a full-speed burst of 8 or 32 requests at a time, half of each
 * second, not of the rate asked for.
 *
 * The first --warmup seconds (default 2) are sent at the same rate but not counted: this process's own start (its
 * connections opened, its code compiled) otherwise holds a whole percent of a short run's answers.
 *
 * Prints one JSON line: { requests, rps, p50, p99, max, errors, sendLagP99 } (latencies in ms; errors: non-2xx and
 * failed requests; sendLagP99: how late this process itself sent, which should stay near 0).
 *
 *   node --import tsx bench/fixed-rate.ts <url> --rate 500 [--connections 8] [--seconds 60] [--header "x-api-key: ..."]
 *     [--method POST] [--body '{"amount":100}'] [--requests file.jsonl]
 *
 * `[<id>]` in a header or the body becomes a fresh id on every request (an Idempotency-Key each). `--requests`: one
 * JSON object per line, {"path": "/...", "body": "..."}, each sent once in order (the last again once they run out),
 * for requests that each need their own row (a payment settled once). `--samples file`: every answer as
 * [epoch ms it was due at, latency ms, ms this process sent it late], JSON, for finding when a tail happens (bench/tail-probe.ts).
 */
import { Agent, request } from "node:http";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};

const target = new URL(process.argv[2]!);
const rate = Number(argument("--rate") ?? 500);
const connections = Number(argument("--connections") ?? 8);
const seconds = Number(argument("--seconds") ?? 60);
const warmupMs = Number(argument("--warmup") ?? 2) * 1000;
const fixedBody = argument("--body");
const method = argument("--method") ?? (fixedBody === undefined ? "GET" : "POST");
const headerTemplates = Object.fromEntries(
  process.argv.flatMap((arg, i) => (process.argv[i - 1] === "--header" ? [arg.split(/:\s*/, 2) as [string, string]] : [])),
);
const requestsFile = argument("--requests");
const samplesFile = argument("--samples");
const listed: { path: string; body?: string }[] = requestsFile
  ? readFileSync(requestsFile, "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line) as { path: string; body?: string })
  : [];
if (!(rate > 0) || !(connections > 0) || !(seconds > 0)) throw new Error("--rate, --connections and --seconds must be positive");

const agent = new Agent({ keepAlive: true, maxSockets: connections });
const idPrefix = randomBytes(6).toString("hex");
const withId = (text: string, n: number) => text.replaceAll("[<id>]", `${idPrefix}-${n}`);

const latencies: number[] = [];
const samples: [number, number, number][] = [];
const sendLags: number[] = [];
let errors = 0;
let inFlight = 0;
let sent = 0;
let stopped = false;
const started = performance.now();
const intervalMs = 1000 / rate;
/** Requests due from here on are the run's; those before are the warm-up. */
const measuredFrom = started + warmupMs;
const endAt = measuredFrom + seconds * 1000;

function send(n: number, dueAt: number) {
  const item = listed.length ? listed[Math.min(n, listed.length - 1)]! : undefined;
  const path = item ? item.path : target.pathname + target.search;
  const rawBody = item ? item.body : fixedBody;
  const body = rawBody === undefined ? undefined : withId(rawBody, n);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(headerTemplates)) headers[name] = withId(value, n);
  if (body !== undefined) {
    headers["content-type"] ??= "application/json";
    headers["content-length"] = String(Buffer.byteLength(body));
  }
  inFlight++;
  const counted = dueAt >= measuredFrom;
  const sendLag = performance.now() - dueAt;
  if (counted) sendLags.push(sendLag);
  const req = request({ host: target.hostname, port: target.port, method: item?.body !== undefined ? "POST" : method, path, headers, agent }, (res) => {
    res.resume();
    res.on("end", () => {
      if (counted) latencies.push(performance.now() - dueAt);
      if (counted && samplesFile) samples.push([Math.round(performance.timeOrigin + dueAt), Math.round((performance.now() - dueAt) * 100) / 100, Math.round(sendLag * 100) / 100]);
      if (res.statusCode! >= 300) errors++;
      inFlight--;
    });
  });
  req.on("error", () => {
    errors++;
    inFlight--;
  });
  req.end(body);
}

function tick() {
  const now = performance.now();
  while (!stopped && started + sent * intervalMs <= now) {
    const dueAt = started + sent * intervalMs;
    if (dueAt >= endAt) {
      stopped = true;
      break;
    }
    send(sent, dueAt);
    sent++;
  }
  if (stopped) return void finish();
  setTimeout(tick, Math.max(0, started + sent * intervalMs - performance.now()));
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]! : 0);
const round = (ms: number) => Math.round(ms * 100) / 100;

let finishing = false;
async function finish() {
  if (finishing) return;
  finishing = true;
  stopped = true;
  const sentUntil = Math.min(performance.now(), started + sent * intervalMs);
  // The answers still coming are part of the run: wait for them (a server that never answers is cut after 30 s).
  for (const waitFrom = performance.now(); inFlight > 0 && performance.now() - waitFrom < 30_000; ) await new Promise((r) => setTimeout(r, 20));
  errors += inFlight;
  if (samplesFile) writeFileSync(samplesFile, JSON.stringify(samples));
  const sorted = latencies.sort((a, b) => a - b);
  const lags = sendLags.sort((a, b) => a - b);
  process.stdout.write(
    `${JSON.stringify({
      requests: sorted.length,
      rps: round(sorted.length / Math.max(0.001, (sentUntil - measuredFrom) / 1000)),
      p50: round(percentile(sorted, 50)),
      p99: round(percentile(sorted, 99)),
      max: round(sorted.at(-1) ?? 0),
      errors,
      sendLagP99: round(percentile(lags, 99)),
    })}\n`,
  );
  agent.destroy();
  process.exit(0);
}

process.once("SIGINT", () => void finish());
tick();
