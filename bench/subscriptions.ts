/**
 * Live status fan-out: how long a committed status change takes to reach many GraphQL subscribers on another
 * gateway instance. Two in-process gateways, A and B, share one throwaway PostgreSQL database and one throwaway
 * Redis (REDIS_URL), as in test/postgres/subscriptions-multi.test.ts. SUBSCRIBERS graphql-ws connections to B each
 * subscribe to `transactionEvents`; transactions are completed on A through the sandbox card, so every event goes
 * A -> PostgreSQL commit -> Redis PUBLISH -> B -> one GraphQL execution and one WebSocket frame per subscriber.
 *
 * Measured in one run:
 *  - latency: LATENCY_EVENTS single completions, each timed from the event's occurredAt (stamped inside the
 *    status-change transaction) and from just before the pay request, to each subscriber's arrival;
 *  - the baselines, interleaved with those events so drift hits both alike: the same completion delivered to ONE
 *    subscriber (a second merchant, whose only subscriber is also on B), and a raw Redis PUBLISH -> message round
 *    trip with ioredis on the same Redis;
 *  - throughput: THROUGHPUT_COMPLETIONS completions on A, THROUGHPUT_CONCURRENCY at a time, against deliveries/s, and
 *    the same completions for a merchant without subscribers (A's completion rate alone, the baseline).
 *
 * Everything runs on 127.0.0.1 in this one process (gateways and clients share the CPUs: see the README).
 *
 *   node --import tsx bench/subscriptions.ts            # print the tables
 *   node --import tsx bench/subscriptions.ts --write    # and record them in bench/README.md
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createClient, type Client } from "graphql-ws";
import { Redis } from "ioredis";
import WebSocket from "ws";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/logger.ts";
import { createGateway, type Gateway } from "../src/server.ts";
import { startPostgres, type PostgresServer } from "../test/support/postgres.ts";
import { startRedis, type RedisServer } from "../test/support/redis.ts";
import { writeReadmeSection } from "./readme.ts";

const SUBSCRIBERS = 1000;
const OPEN_BATCH = 100;
const LATENCY_EVENTS = 20;
const THROUGHPUT_COMPLETIONS = 200;
const THROUGHPUT_CONCURRENCY = 10;
const REDIS_SAMPLES = 200;
const OVERALL_TIMEOUT_MS = 180_000;
const EVENT_TIMEOUT_MS = 20_000;
/** Sockets this process holds: a client and a server end per connection, plus PostgreSQL, Redis, HTTP, files. */
const FDS_NEEDED = 2 * (SUBSCRIBERS + 1) + 150;

const SUBSCRIPTION = "subscription { transactionEvents { id type occurredAt transaction { reference status } } }";

/** Wall-clock milliseconds with sub-millisecond resolution, comparable with occurredAt (same machine clock). */
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------------------
// Gateways

interface Instance {
  name: string;
  gateway: Gateway;
  url: string;
  dataDir: string;
}

async function startInstance(name: string, env: Record<string, string>): Promise<Instance> {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-subscriptions-"));
  const config = loadConfig({
    NODE_ENV: "production",
    LOG_LEVEL: "silent",
    DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: "0",
    RATE_LIMIT_ENABLED: "false",
    ...env,
  });
  const gateway = await createGateway(config, createLogger("silent"));
  const url = await gateway.app.listen({ port: 0, host: "127.0.0.1" });
  return { name, gateway, url, dataDir };
}

async function post(url: string, body: unknown, apiKey?: string): Promise<any> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(apiKey ? { "x-api-key": apiKey } : {}) },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200 && response.status !== 201) throw new Error(`POST ${url}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

const initialize = async (a: Instance, apiKey: string): Promise<string> =>
  (await post(`${a.url}/api/transactions/initialize`, { amount: 1500, email: "payer@example.test" }, apiKey)).reference as string;

const pay = (a: Instance, reference: string) =>
  post(`${a.url}/payment/checkout/${reference}/pay`, {
    card_number: "4242424242424242",
    expiry_month: 12,
    expiry_year: new Date().getUTCFullYear() + 3,
    cvc: "123",
  });

/** Runs `task` for each item, `concurrency` at a time. */
async function pool<T>(items: T[], concurrency: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

// ---------------------------------------------------------------------------------------------------------------
// Subscribers and event tracking

/** One status change being timed: when it was sent, when it was stamped, and every subscriber's arrival. */
interface Tracked {
  expected: number;
  sentAt: number;
  occurredAt: number | undefined;
  arrivals: number[];
  done: Promise<void>;
  resolve: () => void;
}

const tracked = new Map<string, Tracked>();
const warmupReferences = new Set<string>();
let subscriberFailure: unknown;

function track(reference: string, expected: number): Tracked {
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  const t: Tracked = { expected, sentAt: 0, occurredAt: undefined, arrivals: [], done, resolve };
  tracked.set(reference, t);
  return t;
}

async function arrived(t: Tracked, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: ${t.arrivals.length} of ${t.expected} subscribers got it within ${EVENT_TIMEOUT_MS} ms`)),
      EVENT_TIMEOUT_MS,
    );
  });
  try {
    await Promise.race([t.done, timeout]);
  } finally {
    clearTimeout(timer);
  }
  if (subscriberFailure) throw new Error(`a subscriber failed: ${String(subscriberFailure)}`);
}

interface Subscriber {
  client: Client;
  warm: boolean;
  unsubscribe: () => void;
}

/** Opens one graphql-ws connection to `url` and subscribes; resolves once the server acknowledged the connection. */
function openSubscriber(url: string, apiKey: string): Promise<Subscriber> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const client = createClient({
      url: `${url.replace(/^http/, "ws")}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { "X-API-Key": apiKey },
      retryAttempts: 0,
      lazy: true,
      on: {
        connected: () => {
          settled = true;
          resolve(subscriber);
        },
        closed: (event) => {
          if (!settled) {
            settled = true;
            reject(new Error(`WebSocket closed before connection_ack (${(event as { code?: number }).code})`));
          }
        },
      },
    });
    const subscriber: Subscriber = { client, warm: false, unsubscribe: () => {} };
    subscriber.unsubscribe = client.subscribe(
      { query: SUBSCRIPTION },
      {
        next: (value) => {
          const at = now();
          const event = (value.data as { transactionEvents?: { occurredAt: string; transaction: { reference: string } } } | undefined)?.transactionEvents;
          if (!event) {
            subscriberFailure ??= JSON.stringify(value.errors ?? value);
            return;
          }
          const reference = event.transaction.reference;
          if (warmupReferences.has(reference)) subscriber.warm = true;
          const t = tracked.get(reference);
          if (!t) return;
          t.occurredAt ??= Date.parse(event.occurredAt);
          t.arrivals.push(at);
          if (t.arrivals.length === t.expected) t.resolve();
        },
        error: (error) => {
          subscriberFailure ??= error instanceof Error ? error.message : JSON.stringify(error);
          if (!settled) {
            settled = true;
            reject(new Error(`subscription failed: ${String(subscriberFailure)}`));
          }
        },
        complete: () => {
          subscriberFailure ??= "the server completed a subscription";
        },
      },
    );
  });
}

async function openSubscribers(url: string, apiKey: string, count: number, list: Subscriber[]): Promise<void> {
  for (let opened = 0; opened < count; opened += OPEN_BATCH) {
    const batch = Math.min(OPEN_BATCH, count - opened);
    // Push each subscriber as it connects so a failure part-way still closes the ones that did.
    await Promise.all(Array.from({ length: batch }, () => openSubscriber(url, apiKey).then((s) => void list.push(s))));
  }
}

/**
 * graphql-ws acknowledges connections, not subscriptions: a subscriber is ready once it received an event. Sends
 * warm-up completions until every subscriber has had one (a subscription that was not registered yet misses one).
 */
async function warmUp(a: Instance, apiKey: string, subscribers: Subscriber[], what: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const reference = await initialize(a, apiKey);
    warmupReferences.add(reference);
    await pay(a, reference);
    const deadline = Date.now() + 5000;
    while (subscribers.some((s) => !s.warm) && Date.now() < deadline) await sleep(25);
    const cold = subscribers.filter((s) => !s.warm).length;
    if (cold === 0) return;
    if (attempt >= 5) throw new Error(`${what}: ${cold} of ${subscribers.length} subscribers never received a warm-up event`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Measurements

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

interface Row {
  name: string;
  samples: number;
  fromCommit: number[];
  fromSend: number[] | undefined;
}

/** Raw Redis PUBLISH -> message round trip, sequential, on its own two connections to the same Redis. */
async function redisRoundTrips(url: string, samples: number): Promise<number[]> {
  const publisher = new Redis(url, { lazyConnect: true });
  const subscriber = new Redis(url, { lazyConnect: true });
  try {
    await Promise.all([publisher.connect(), subscriber.connect()]);
    const channel = `bench:rtt:${randomBytes(4).toString("hex")}`;
    await subscriber.subscribe(channel);
    let waiting: ((message: string) => void) | undefined;
    subscriber.on("message", (_channel: string, message: string) => waiting?.(message));
    const out: number[] = [];
    for (let i = 0; i < samples + 20; i++) {
      const received = new Promise<string>((resolve) => (waiting = resolve));
      const started = now();
      await publisher.publish(channel, String(i));
      if ((await received) !== String(i)) throw new Error("Redis round trip: out-of-order message");
      if (i >= 20) out.push(now() - started); // the first 20 warm the connections up
    }
    return out;
  } finally {
    publisher.disconnect();
    subscriber.disconnect();
  }
}

interface LatencyResult {
  rows: Row[];
}

/**
 * LATENCY_EVENTS completions for the fan-out merchant, each followed by one for the baseline merchant (one
 * subscriber) and a slice of Redis round trips, so the baselines see the same machine state.
 */
async function measureLatency(a: Instance, fanoutKey: string, baselineKey: string, redisUrl: string): Promise<LatencyResult> {
  const perSubscriber: number[] = [];
  const perSubscriberFromSend: number[] = [];
  const allReceived: number[] = [];
  const allReceivedFromSend: number[] = [];
  const single: number[] = [];
  const singleFromSend: number[] = [];
  const redis: number[] = [];

  const fanoutRefs: string[] = [];
  const baselineRefs: string[] = [];
  for (let i = 0; i < LATENCY_EVENTS; i++) {
    fanoutRefs.push(await initialize(a, fanoutKey));
    baselineRefs.push(await initialize(a, baselineKey));
  }

  const complete = async (reference: string, expected: number, what: string) => {
    const t = track(reference, expected);
    t.sentAt = now();
    await pay(a, reference);
    await arrived(t, what);
    tracked.delete(reference);
    if (t.occurredAt === undefined) throw new Error(`${what}: no occurredAt`);
    return t;
  };

  for (let i = 0; i < LATENCY_EVENTS; i++) {
    const fan = await complete(fanoutRefs[i]!, SUBSCRIBERS, `fan-out event ${i + 1}`);
    for (const at of fan.arrivals) {
      perSubscriber.push(at - fan.occurredAt!);
      perSubscriberFromSend.push(at - fan.sentAt);
    }
    const last = Math.max(...fan.arrivals);
    allReceived.push(last - fan.occurredAt!);
    allReceivedFromSend.push(last - fan.sentAt);
    await sleep(50);

    const one = await complete(baselineRefs[i]!, 1, `baseline event ${i + 1}`);
    single.push(one.arrivals[0]! - one.occurredAt!);
    singleFromSend.push(one.arrivals[0]! - one.sentAt);
    await sleep(50);

    redis.push(...(await redisRoundTrips(redisUrl, REDIS_SAMPLES / LATENCY_EVENTS)));
    await sleep(50);
  }

  return {
    rows: [
      { name: "Redis PUBLISH -> message (ioredis), baseline", samples: redis.length, fromCommit: redis, fromSend: undefined },
      { name: "1 subscriber (baseline)", samples: single.length, fromCommit: single, fromSend: singleFromSend },
      { name: `${SUBSCRIBERS.toLocaleString("en")} subscribers, each`, samples: perSubscriber.length, fromCommit: perSubscriber, fromSend: perSubscriberFromSend },
      { name: `${SUBSCRIBERS.toLocaleString("en")} subscribers, until all received`, samples: allReceived.length, fromCommit: allReceived, fromSend: allReceivedFromSend },
    ],
  };
}

interface ThroughputResult {
  subscribers: number;
  completions: number;
  completionSeconds: number;
  deliveries: number;
  deliverySeconds: number;
  lagMs: number;
  latencies: number[];
}

/**
 * THROUGHPUT_COMPLETIONS completions on A, THROUGHPUT_CONCURRENCY at a time; deliveries counted at the `subscribers`
 * of the key's merchant (0: the completion rate of A alone, the baseline).
 */
async function measureThroughput(a: Instance, apiKey: string, subscribers: number): Promise<ThroughputResult> {
  const references: string[] = [];
  await pool(Array.from({ length: THROUGHPUT_COMPLETIONS }, (_, i) => i), THROUGHPUT_CONCURRENCY, async () => {
    references.push(await initialize(a, apiKey));
  });
  const all = subscribers ? references.map((reference) => [reference, track(reference, subscribers)] as const) : [];
  const started = now();
  await pool(references, THROUGHPUT_CONCURRENCY, async (reference) => {
    await pay(a, reference);
  });
  const paid = now();
  for (const [reference, t] of all) await arrived(t, `throughput event ${reference}`);
  let last = paid;
  let deliveries = 0;
  const latencies: number[] = [];
  for (const [reference, t] of all) {
    deliveries += t.arrivals.length;
    for (const at of t.arrivals) {
      last = Math.max(last, at);
      latencies.push(at - t.occurredAt!);
    }
    tracked.delete(reference);
  }
  return {
    subscribers,
    completions: references.length,
    completionSeconds: (paid - started) / 1000,
    deliveries,
    deliverySeconds: (last - started) / 1000,
    lagMs: last - paid,
    latencies,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Output

const ms = (v: number) => v.toFixed(2);
const ratio = (v: number, base: number) => `${(v / base).toFixed(1)}x`;

function latencyTable(rows: Row[]): string {
  const stats = rows.map((r) => {
    const commit = [...r.fromCommit].sort((x, y) => x - y);
    const send = r.fromSend ? [...r.fromSend].sort((x, y) => x - y) : undefined;
    return { ...r, p50: percentile(commit, 50), p99: percentile(commit, 99), sendP50: send && percentile(send, 50), sendP99: send && percentile(send, 99) };
  });
  const redis = stats[0]!;
  const single = stats[1]!;
  return [
    "| delivery | samples | p50 (ms) | p99 (ms) | p50 / 1 subscriber | p50 / Redis | p50 from pay request (ms) | p99 from pay request (ms) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...stats.map(
      (s) =>
        `| ${s.name} | ${s.samples.toLocaleString("en")} | ${ms(s.p50)} | ${ms(s.p99)} | ${s === redis ? "" : ratio(s.p50, single.p50)} | ${ratio(s.p50, redis.p50)} | ${s.sendP50 === undefined ? "" : ms(s.sendP50)} | ${s.sendP99 === undefined ? "" : ms(s.sendP99)} |`,
    ),
  ].join("\n");
}

function throughputTable(runs: ThroughputResult[]): string {
  const baseRate = runs[0]!.completions / runs[0]!.completionSeconds;
  return [
    "| subscribers on B | completions/s on A | ratio | deliveries | deliveries/s | deliveries/s / (completions/s x subscribers) | last delivery after last completion (ms) | delivery p50 / p99 from occurredAt (ms) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...runs.map((t) => {
      const completionRate = t.completions / t.completionSeconds;
      if (!t.subscribers) return `| none (baseline) | ${completionRate.toFixed(1)} | 1.00x | | | | | |`;
      const deliveryRate = t.deliveries / t.deliverySeconds;
      const sorted = [...t.latencies].sort((x, y) => x - y);
      return `| ${t.subscribers.toLocaleString("en")} | ${completionRate.toFixed(1)} | ${(completionRate / baseRate).toFixed(2)}x | ${t.deliveries.toLocaleString("en")} | ${Math.round(deliveryRate).toLocaleString("en")} | ${(deliveryRate / (completionRate * t.subscribers)).toFixed(2)} | ${Math.round(t.lagMs).toLocaleString("en")} | ${ms(percentile(sorted, 50))} / ${ms(percentile(sorted, 99))} |`;
    }),
  ].join("\n");
}

function interpretation(latency: Row[], runs: ThroughputResult[]): string {
  const [idle, t] = runs as [ThroughputResult, ThroughputResult];
  const p50 = (r: Row) => percentile([...r.fromCommit].sort((x, y) => x - y), 50);
  const [redis, single, each, all] = latency.map(p50) as [number, number, number, number];
  const completionRate = t.completions / t.completionSeconds;
  const deliveryRate = t.deliveries / t.deliverySeconds;
  const keepsUp = deliveryRate / (completionRate * SUBSCRIBERS);
  const idleRate = idle.completions / idle.completionSeconds;
  return [
    `One status change reaches one subscriber on the other instance in ${ms(single)} ms from its commit stamp (${ratio(single, redis)} a bare Redis round trip of ${ms(redis)} ms); reaching all ${SUBSCRIBERS.toLocaleString("en")} takes ${ms(all)} ms (p50; a typical subscriber ${ms(each)} ms, ${ratio(each, single)} the single one), i.e. about ${(((all - single) / SUBSCRIBERS) * 1000).toFixed(0)} µs of serial work per extra subscriber (B's GraphQL execution and frame, plus the in-process client's parse).`,
    `Under load deliveries ${keepsUp >= 0.9 ? "keep pace with" : "fall behind"} completions (${keepsUp.toFixed(2)}; last delivery ${Math.round(t.lagMs).toLocaleString("en")} ms after the last completion) only because A, B and the clients share one event loop: A completes ${completionRate.toFixed(1)}/s instead of ${idleRate.toFixed(1)}/s without subscribers (${(completionRate / idleRate).toFixed(2)}x), so about ${Math.round(deliveryRate).toLocaleString("en")} deliveries/s is this machine's fan-out ceiling, and events queue (delivery p50 ${ms(percentile([...t.latencies].sort((x, y) => x - y), 50))} ms) when changes come faster.`,
  ].join("\n");
}

function writeReadme(body: string): void {
  writeReadmeSection("## Live status fan-out (subscriptions)", body);
}

// ---------------------------------------------------------------------------------------------------------------

function openFileLimit(): number | undefined {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
    return soft === undefined ? undefined : soft === "unlimited" ? Infinity : Number(soft);
  } catch {
    return undefined; // not Linux: let the run tell
  }
}

async function main() {
  const limit = openFileLimit();
  if (limit !== undefined && limit < FDS_NEEDED) {
    console.error(
      `The open-file limit is ${limit}; this benchmark holds both ends of ${SUBSCRIBERS} WebSocket connections and needs about ${FDS_NEEDED}. ` +
        `Node cannot raise it: run \`ulimit -n ${Math.max(4096, FDS_NEEDED)}\` in the shell first (or ask for a higher hard limit).`,
    );
    process.exitCode = 1;
    return;
  }

  const started = Date.now();
  const timer = setTimeout(() => {
    console.error(`timed out after ${OVERALL_TIMEOUT_MS / 1000} s`);
    process.exit(2); // the exit handlers of test/support kill PostgreSQL and Redis
  }, OVERALL_TIMEOUT_MS);

  let postgres: PostgresServer | undefined;
  let redis: RedisServer | undefined;
  const instances: Instance[] = [];
  const subscribers: Subscriber[] = [];
  let latency: LatencyResult;
  const throughput: ThroughputResult[] = [];
  try {
    [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
    const databaseUrl = await postgres.createDatabase();
    const shared = { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: randomBytes(32).toString("hex"), REDIS_URL: redis.url };
    // One after the other: A applies the migrations, B finds them applied.
    const a = await startInstance("A", shared);
    const b = await startInstance("B", shared);
    instances.push(a, b);
    const fanout = await a.gateway.services.merchants.createMerchant({ name: "Fan-out", email: "fanout@example.test" });
    const baseline = await a.gateway.services.merchants.createMerchant({ name: "Baseline", email: "baseline@example.test" });
    const idle = await a.gateway.services.merchants.createMerchant({ name: "No subscribers", email: "idle@example.test" });
    const fanoutKey = fanout.keys.test.plaintext;
    const baselineKey = baseline.keys.test.plaintext;
    const idleKey = idle.keys.test.plaintext;
    for (const key of [fanoutKey, baselineKey, idleKey]) await post(`${a.url}/api/payment-channels/create`, { name: "Sandbox", provider: "sandbox", config: {} }, key);
    console.log(`gateways A ${a.url} and B ${b.url} up after ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const fanoutSubscribers: Subscriber[] = [];
    const opening = Date.now();
    await openSubscribers(b.url, fanoutKey, SUBSCRIBERS, fanoutSubscribers);
    subscribers.push(...fanoutSubscribers);
    const baselineSubscribers: Subscriber[] = [];
    await openSubscribers(b.url, baselineKey, 1, baselineSubscribers);
    subscribers.push(...baselineSubscribers);
    await sleep(500);
    await warmUp(a, fanoutKey, fanoutSubscribers, "fan-out");
    await warmUp(a, baselineKey, baselineSubscribers, "baseline");
    console.log(`${SUBSCRIBERS} + 1 subscribers on B ready after ${((Date.now() - opening) / 1000).toFixed(1)} s`);

    latency = await measureLatency(a, fanoutKey, baselineKey, redis.url);
    console.log(`\n${latencyTable(latency.rows)}`);
    throughput.push(await measureThroughput(a, idleKey, 0));
    await sleep(200);
    throughput.push(await measureThroughput(a, fanoutKey, SUBSCRIBERS));
    console.log(`\n${throughputTable(throughput)}`);
  } finally {
    await Promise.all(
      subscribers.map(async (s) => {
        s.unsubscribe();
        await s.client.dispose();
      }),
    );
    for (const instance of instances.reverse()) {
      await instance.gateway.close().catch((error) => console.error(`closing ${instance.name}:`, error));
      rmSync(instance.dataDir, { recursive: true, force: true });
    }
    await redis?.stop();
    await postgres?.stop();
    clearTimeout(timer);
  }

  const context =
    `${SUBSCRIBERS.toLocaleString("en")} graphql-ws subscribers on instance B, completions on instance A, one PostgreSQL database and one Redis, ` +
    `${LATENCY_EVENTS} latency events, Node ${process.version}, ${cpus().length} CPUs, ${new Date().toISOString().slice(0, 10)}, run took ${((Date.now() - started) / 1000).toFixed(0)} s`;
  const text = interpretation(latency.rows, throughput);
  console.log(`\n${context}\n\n${text}`);

  if (process.argv.includes("--write")) {
    writeReadme(
      [
        "A status change committed through instance A, delivered to 1,000 `transactionEvents` subscribers (graphql-ws) on",
        "instance B: A and B share one PostgreSQL database and one Redis (`REDIS_URL`), as in",
        "`test/postgres/subscriptions-multi.test.ts`. Latency runs from the event's `occurredAt` (stamped inside the",
        "status-change transaction, so commit and Redis included; millisecond resolution) to each arrival, and from just before",
        "the pay request (`POST /payment/checkout/<reference>/pay`, sandbox card) for comparison. Baselines, interleaved with",
        "the fan-out events: the same change delivered to one subscriber (another merchant's, also on B) and a bare Redis",
        "PUBLISH -> message round trip with ioredis. The p99 of \"until all received\" over 20 events is their maximum.",
        "Gateways, clients and their event loop share one process, so client-side parsing is in every figure and A's",
        "completions compete with B's fan-out for the CPU (hence the no-subscriber throughput baseline). Needs `initdb`/`pg_ctl`",
        `and \`redis-server\` (as \`test/support\` does) and about ${FDS_NEEDED} open files (\`ulimit -n\`; the script stops with a`,
        "message below that). Run with `node --import tsx bench/subscriptions.ts [--write]`; it takes about a minute and",
        "gives up after three.",
        "",
        "<!-- subscriptions:start -->",
        context,
        "",
        "Latency of one completion at a time:",
        "",
        latencyTable(latency.rows),
        "",
        `Throughput: ${THROUGHPUT_COMPLETIONS} completions on A, ${THROUGHPUT_CONCURRENCY} at a time, for a merchant with no subscribers (baseline) and for the one with ${SUBSCRIBERS.toLocaleString("en")}:`,
        "",
        throughputTable(throughput),
        "<!-- subscriptions:end -->",
        "",
        text,
      ].join("\n"),
    );
    console.log("recorded in bench/README.md");
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
