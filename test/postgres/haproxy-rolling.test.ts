import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "graphql-ws";
import pg from "pg";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { freePort } from "../support/local-server.ts";
import { repoRoot, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { until } from "../support/wait.ts";
import { LONG_TEST_TIMEOUT_MS } from "../support/timing.ts";

/**
 * The real HAProxy (Debian's package) with deploy/haproxy.cfg in front of three gateway processes on one
 * PostgreSQL and one Redis, under a constant, paced load from this test (initialize, pay by card, verify):
 * - a rolling restart of all three (SIGTERM, wait for the exit, start again, wait until HAProxy has it UP)
 *   loses zero requests;
 * - kill -9 of the instance holding running webhook jobs fails only requests that were in flight on it
 *   (HAProxy names the server of every answer in the test's copy of the config), every acknowledged
 *   initialize is in the database once, none twice, and its jobs are run by the others after their lease.
 */
const SERVERS = 3;
const LOOPS = 3;
/** Pacing of each load loop (light: two cores shared with other work); not a wait for a condition. */
const PAUSE_MS = 15;

interface Sent {
  op: "initialize" | "pay" | "verify";
  description: string;
  startedAt: number;
  endedAt: number;
  status: number | undefined;
  /** The server HAProxy sent it to: its X-Served-By answer header, or its log line when no answer came back. */
  servedBy: string | undefined;
  error: string | undefined;
  requestId: string;
  reference?: string;
}

describe("three gateways behind HAProxy", () => {
  let database: TestDatabase;
  let redis: RedisServer;
  let receiver: WebhookReceiver;
  let db: pg.Pool;
  let work: string;
  let haproxy: ChildProcess;
  let haproxyOutput = "";
  let publicUrl: string;
  let statsUrl: string;
  const ports: number[] = [];
  const instances: (StartedGatewayProcess | undefined)[] = [];
  let env: Record<string, string>;
  let apiKey: string;
  let channelId: number;
  const sent: Sent[] = [];
  let loadRunning = false;
  let loads: Promise<void>[] = [];

  const start = async (index: number) => {
    instances[index] = await startGatewayProcess({ ...env, PORT: String(ports[index]) });
    return instances[index]!;
  };

  /** Each server's state as HAProxy sees it (UP, DOWN, ...), from its stats page. */
  async function serverStates(): Promise<Record<string, string>> {
    const csv = await (await fetch(`${statsUrl};csv`)).text();
    const [header, ...rows] = csv.trim().split("\n");
    const columns = header!.replace(/^# /, "").split(",");
    const states: Record<string, string> = {};
    for (const row of rows) {
      const cells = row.split(",");
      if (cells[columns.indexOf("pxname")] === "gateways" && /^gw\d$/.test(cells[columns.indexOf("svname")]!)) {
        states[cells[columns.indexOf("svname")]!] = cells[columns.indexOf("status")]!;
      }
    }
    return states;
  }

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "haproxy-test-"));
    [database, redis, receiver] = await Promise.all([
      createTestDatabase(),
      startRedis(),
      // A merchant endpoint that takes a moment, so deliveries are in flight at any time under load.
      // Slow enough that deliveries hold running jobs long past the moment the victim is chosen, even on a busy machine.
      startWebhookReceiver({ respond: () => new Promise((resolve) => setTimeout(() => resolve(200), 600)) }),
    ]);
    db = new pg.Pool({ connectionString: database.databaseUrl, max: 2 });
    db.on("error", () => {});
    for (let i = 0; i < SERVERS + 3; i++) ports.push(await freePort());
    const [publicPort, statsPort, redirectPort] = ports.splice(SERVERS, 3) as [number, number, number];
    publicUrl = `http://127.0.0.1:${publicPort}`;
    statsUrl = `http://127.0.0.1:${statsPort}/stats`;
    env = {
      ...database.env,
      ENCRYPTION_KEY: database.encryptionKeyHex,
      REDIS_URL: redis.url,
      TRUST_PROXY: "loopback",
      // The load comes from one key and one address; limits stay on (in Redis) but out of reach.
      RATE_LIMIT_PER_MINUTE: "1000000",
      RATE_LIMIT_IP_PER_MINUTE: "1000000",
      // What deploy/compose.yaml sets: longer than HAProxy's two failed checks one second apart.
      SHUTDOWN_DRAIN_DELAY_MS: "3000",
      SHUTDOWN_TIMEOUT_MS: "15000",
      ALLOW_PRIVATE_URLS: "true",
      JOB_POLL_INTERVAL_MS: "200",
      // Jobs of a dead instance are due again after this lease (at least WEBHOOK_TIMEOUT_MS + 5 s).
      WEBHOOK_TIMEOUT_MS: "1000",
      JOB_LEASE_MS: "1000",
    };
    // The first one alone: on an empty database it creates the demo merchant, once.
    const first = await start(0);
    [, apiKey] = (await first.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/)) as unknown as [string, string];
    await Promise.all([start(1), start(2)]);

    // deploy/haproxy.cfg as it ships, with these three servers in place of the Docker DNS template, each answer
    // naming the server it came from (HAProxy's own 502s included), and its public frontend without TLS: the load
    // uses fetch, which cannot be told to trust a test CA (test/postgres/haproxy-tls.test.ts covers TLS).
    const shipped = readFileSync(join(repoRoot, "deploy/haproxy.cfg"), "utf8");
    const servers = ports.map((port, i) => `    server gw${i + 1} 127.0.0.1:${port}`).join("\n");
    const plainBind = /^( {4}bind "\$\{HAPROXY_HTTPS_BIND[^"]*\}") ssl .*$/m;
    expect(shipped).toMatch(plainBind);
    const config = shipped
      .replace(plainBind, "$1")
      // Log connections closed before a request too, to tell where a request without an answer went.
      .replace(/^ {4}option dontlognull\n/m, "")
      .replace(/^ {4}server-template .*$/gm, servers)
      .replace(/^frontend public\n/m, "frontend public\n    http-after-response set-header X-Served-By %s\n    capture request header X-Request-Id len 64\n");
    expect(config).toContain(servers);
    writeFileSync(join(work, "haproxy.cfg"), config);
    haproxy = spawn("haproxy", ["-db", "-f", join(work, "haproxy.cfg")], {
      env: { PATH: process.env.PATH ?? "", HAPROXY_HTTPS_BIND: `127.0.0.1:${publicPort}`, HAPROXY_HTTP_BIND: `127.0.0.1:${redirectPort}`, HAPROXY_STATS: `127.0.0.1:${statsPort}`, HAPROXY_SOCKET: join(work, "haproxy.sock") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    haproxy.stdout!.on("data", (c: Buffer) => (haproxyOutput += c.toString()));
    haproxy.stderr!.on("data", (c: Buffer) => (haproxyOutput += c.toString()));
    await until(() => serverStates().catch(() => ({})), (s) => Object.values(s).filter((v) => v === "UP").length === SERVERS, 20_000);

    const api = (path: string, body: unknown) =>
      fetch(`${publicUrl}${path}`, { method: "POST", headers: { "x-api-key": apiKey, "content-type": "application/json" }, body: JSON.stringify(body) });
    const hook = await api("/v1/webhooks", { url: `${receiver.url}/hooks`, events: ["transaction.completed"] });
    expect(hook.status, await hook.clone().text()).toBe(201);
    const channel = await api("/api/payment-channels/create", { name: "Cards", provider: "sandbox" });
    expect(channel.status).toBe(201);
    channelId = ((await channel.json()) as { channel: { id: number } }).channel.id;
  });

  afterAll(async () => {
    loadRunning = false;
    await Promise.all(loads);
    haproxy?.kill("SIGKILL");
    for (const instance of instances) if (instance && instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill("SIGKILL");
    await Promise.all(instances.map((i) => i?.exited));
    await db?.end();
    await receiver?.close();
    await redis?.stop();
    await database?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  async function send(op: Sent["op"], description: string, path: string, init: RequestInit): Promise<Sent> {
    const requestId = `load-${sent.length}-${Date.now()}`;
    const record: Sent = { op, description, startedAt: Date.now(), endedAt: 0, status: undefined, servedBy: undefined, error: undefined, requestId };
    sent.push(record);
    try {
      const res = await fetch(`${publicUrl}${path}`, { ...init, headers: { ...(init.headers as Record<string, string>), "x-request-id": requestId } });
      const text = await res.text();
      record.status = res.status;
      record.servedBy = res.headers.get("x-served-by") ?? undefined;
      if (res.status === 200 && op === "initialize") record.reference = (JSON.parse(text) as { reference: string }).reference;
      if (res.status !== 200) record.error = text.slice(0, 200);
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      record.error = `${String(error)}${cause ? ` (${cause.code ?? ""} ${cause.message ?? ""})` : ""}`;
    }
    record.endedAt = Date.now();
    return record;
  }

  const card = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };
  /** One client: initialize, pay the checkout by card, verify; again until told to stop. */
  async function loop(n: number) {
    for (let i = 0; loadRunning; i++) {
      const description = `load-${n}-${i}-${Date.now()}`;
      const json = { "x-api-key": apiKey, "content-type": "application/json" };
      const init = await send("initialize", description, "/api/transactions/initialize", {
        method: "POST",
        headers: json,
        body: JSON.stringify({ amount: 1000 + i, email: `load${n}@haproxy.test`, description, payment_channel_id: channelId }),
      });
      await new Promise((r) => setTimeout(r, PAUSE_MS));
      if (!init.reference) continue;
      await send("pay", description, `/payment/checkout/${init.reference}/pay`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(card) });
      await new Promise((r) => setTimeout(r, PAUSE_MS));
      await send("verify", description, `/api/transactions/verify/${init.reference}`, { headers: { "x-api-key": apiKey } });
      await new Promise((r) => setTimeout(r, PAUSE_MS));
    }
  }

  /** Answered requests (or cut off ones) started in [from, to) that did not get a 200. */
  const failures = (from: number, to = Infinity) => sent.filter((r) => r.endedAt > 0 && r.startedAt >= from && r.startedAt < to && r.status !== 200);

  it("a rolling restart of all three under load loses zero requests; a live subscriber reconnects through HAProxy", { timeout: LONG_TEST_TIMEOUT_MS }, async () => {
    // A subscriber as a frontend connects: through the balancer, retrying when its socket drops.
    const closes: number[] = [];
    let connects = 0;
    const events: { at: number; reference: string }[] = [];
    const subscriber = createClient({
      url: `${publicUrl.replace(/^http/, "ws")}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { "X-API-Key": apiKey },
      lazy: false,
      retryAttempts: 30,
      shouldRetry: () => true,
      retryWait: () => new Promise((resolve) => setTimeout(resolve, 200)),
      on: { connected: () => void connects++, closed: (event) => void closes.push((event as { code: number }).code) },
    });
    subscriber.subscribe<{ transactionEvents: { transaction: { reference: string } } }>(
      { query: "subscription { transactionEvents { transaction { reference } } }" },
      { next: (m) => void events.push({ at: Date.now(), reference: m.data!.transactionEvents.transaction.reference }), error: () => {}, complete: () => {} },
    );
    loadRunning = true;
    loads = Array.from({ length: LOOPS }, (_, n) => loop(n));
    await until(() => sent.length, (n) => n >= 30, 20_000);
    await until(() => events.length, (n) => n > 0, 20_000);
    const began = Date.now();
    for (let i = 0; i < SERVERS; i++) {
      const instance = instances[i]!;
      const before = sent.length;
      const t0 = Date.now();
      instance.child.kill("SIGTERM");
      expect(await instance.exited, instance.output().slice(-2000)).toBe(0);
      const t1 = Date.now();
      await start(i);
      const t2 = Date.now();
      await until(serverStates, (s) => s[`gw${i + 1}`] === "UP", 20_000);
      console.log(`gw${i + 1}: drained and exited in ${t1 - t0} ms, started in ${t2 - t1} ms, UP in HAProxy after ${Date.now() - t2} ms`);
      // The load went on meanwhile.
      expect(sent.length - before).toBeGreaterThan(10);
    }
    const ended = Date.now();
    const during = sent.filter((r) => r.startedAt >= began && r.startedAt < ended);
    const byServer = new Map<string, number>();
    for (const r of during) byServer.set(r.servedBy ?? "none", (byServer.get(r.servedBy ?? "none") ?? 0) + 1);
    console.log(`rolling restart: ${during.length} requests in ${ended - began} ms, by server ${JSON.stringify(Object.fromEntries(byServer))}`);
    expect(failures(0), haproxyOutput.slice(-3000)).toEqual([]);
    expect(during.length).toBeGreaterThan(100);

    // Its instance drained under it (1001, going away), it reconnected and subscribed again, and events flow.
    console.log(`subscriber: closed with ${JSON.stringify(closes)}, connected ${connects} times, ${events.length} events`);
    expect(closes).toContain(1001);
    expect(closes.every((code) => code === 1001)).toBe(true);
    expect(connects).toBe(closes.length + 1);
    const paidAfter = await until(() => sent.filter((r) => r.op === "pay" && r.status === 200 && r.startedAt > ended), (paid) => paid.length > 0, 10_000);
    const reference = (r: Sent) => sent.find((i) => i.op === "initialize" && i.description === r.description)!.reference!;
    await until(() => events.filter((e) => e.reference === reference(paidAfter[0]!)), (seen) => seen.length > 0, 10_000);
    await subscriber.dispose();
  });

  it("kill -9 of one fails only requests in flight on it, loses no acknowledged payment, duplicates none; the others take over its jobs", async () => {
    // The victim: an instance holding running jobs (webhook deliveries) right now. On a busy machine its deliveries can
    // all end between the choice and the kill: then it is started again and another is chosen, up to three times.
    const victims = new Set<string>();
    let victim = "";
    let workerId = "";
    let held: string[] = [];
    let goneAt = 0;
    const firstKillAt = Date.now();
    for (let round = 1; ; round++) {
      const pids = new Map(instances.map((instance, i) => [instance!.child.pid!, i]));
      const holder = await until(
        async () => (await db.query<{ locked_by: string }>("SELECT locked_by FROM jobs WHERE status = 'running' AND locked_by IS NOT NULL")).rows.map((r) => r.locked_by),
        (lockers) => lockers.some((l) => pids.has(Number(l.split(":")[1]))),
        30_000,
      );
      workerId = holder.find((l) => pids.has(Number(l.split(":")[1])))!;
      const index = pids.get(Number(workerId.split(":")[1]))!;
      victim = `gw${index + 1}`;
      victims.add(victim);
      instances[index]!.child.kill("SIGKILL");
      await instances[index]!.exited;
      // Gone: its sockets are closed. What was sent before may have been in flight on it; nothing sent after may fail.
      goneAt = Date.now();
      held = (await db.query<{ id: string }>("SELECT id::text FROM jobs WHERE locked_by = $1", [workerId])).rows.map((r) => r.id);
      if (held.length || round === 3) break;
      await until(serverStates, (s) => s[victim] === "DOWN", 10_000);
      await start(index);
      await until(serverStates, (s) => s[victim] === "UP", 20_000);
    }
    const killedAt = firstKillAt;
    await until(serverStates, (s) => s[victim] === "DOWN", 10_000);
    // Load on the two survivors for a while after HAProxy took it out.
    const afterDown = sent.length;
    await until(() => sent.length, (n) => n >= afterDown + 60, 30_000);
    loadRunning = false;
    await Promise.all(loads);

    const failed = failures(killedAt - 60_000);
    // HAProxy's log line names the server of a request that got no answer header (when it logged one).
    for (const f of failed) f.servedBy ??= new RegExp(`public gateways/(\\S+) .*\\{${f.requestId}\\}`).exec(haproxyOutput)?.[1];
    console.log(
      `kill -9 of ${[...victims].join(", then ")} holding ${held.length} running job(s), gone ${goneAt - killedAt} ms after the first kill: ${failed.length} request(s) failed: ${JSON.stringify(failed.map((f) => [f.op, f.status ?? f.error, f.servedBy, f.startedAt - killedAt]))}`,
    );
    for (const failure of failed) {
      expect(failure.startedAt, JSON.stringify(failure)).toBeLessThanOrEqual(goneAt);
      if (failure.status !== undefined) {
        // HAProxy's 502 for the instance that died under it.
        expect(failure.status, JSON.stringify(failure)).toBe(502);
        expect(victims, JSON.stringify(failure)).toContain(failure.servedBy);
      } else {
        // Cut off without an answer: HAProxy closed the client's connection. Where its log names a server, the victim.
        expect(failure.error, JSON.stringify(failure)).toMatch(/fetch failed/);
        if (failure.servedBy !== undefined) expect(victims, JSON.stringify(failure)).toContain(failure.servedBy);
      }
    }
    // Not everything failed: a few at most, of the load in flight at the kill.
    expect(failed.length).toBeLessThanOrEqual(LOOPS * victims.size);

    // Every acknowledged initialize is in the database, each description at most once.
    const inits = sent.filter((r) => r.op === "initialize");
    const rows = (await db.query<{ description: string; reference: string; status: string }>("SELECT description, reference, status FROM transactions WHERE description LIKE 'load-%'")).rows;
    const byDescription = new Map<string, string[]>();
    for (const row of rows) byDescription.set(row.description, [...(byDescription.get(row.description) ?? []), row.reference]);
    for (const [description, references] of byDescription) expect(references, description).toHaveLength(1);
    for (const init of inits.filter((r) => r.reference)) expect(byDescription.get(init.description), init.description).toEqual([init.reference]);
    // Unacknowledged ones (cut off on the victim) may have been committed; never twice (checked above).
    expect(rows.length).toBeGreaterThanOrEqual(inits.filter((r) => r.reference).length);

    // Its jobs: claimed again after their lease and finished by the survivors (a finished job is deleted).
    if (held.length) await until(async () => (await db.query("SELECT id FROM jobs WHERE id = ANY($1::bigint[])", [held])).rowCount, (n) => n === 0, 30_000);
    // And every completed payment was announced to the merchant at least once.
    const completed = rows.filter((r) => r.status === "completed").map((r) => r.reference);
    const paidAcknowledged = sent.filter((r) => r.op === "pay" && r.status === 200).length;
    expect(completed.length).toBeGreaterThanOrEqual(paidAcknowledged);
    await until(
      () => new Set(receiver.received.map((d) => d.json?.data?.reference as string)),
      (announced) => completed.every((reference) => announced.has(reference)),
      30_000,
    );
    expect(held.length).toBeGreaterThan(0);
  });
});
