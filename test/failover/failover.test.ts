import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client } from "graphql-ws";
import pg from "pg";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, startFakeDaraja } from "../fakes/daraja.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { SANDBOX_CARD } from "../support/gateway.ts";
import { startPatroniCluster, type PatroniCluster } from "../support/patroni.ts";
import { printedTestKey, runCli, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { startRedisCluster, type RedisCluster } from "../support/redis-cluster.ts";
import { retryingUnavailable } from "../support/retry.ts";
import { LONG_TEST_TIMEOUT_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * The failover drill (issue 43), every part real and on loopback: etcd, two PostgreSQL 15 nodes under Patroni
 * (deploy/patroni/patroni.yml: synchronous mode), HAProxy (deploy/patroni/haproxy.cfg) routing DATABASE_URL to
 * whichever node Patroni calls the primary, a three-master Redis Cluster, two gateway processes, and a client
 * paying at a steady pace: keyed initializes paid by card on the checkout, keyed M-Pesa STK pushes to a loopback
 * Daraja whose callbacks come back over HTTP to either gateway (one that meets the switch is not sent again, as
 * Daraja does not: the reconciler's status query settles that payment), a webhook endpoint and a live subscriber.
 *
 * Case 1 kills -9 the primary's postmaster (and a Redis master with it, as a lost machine would); case 2 kills -9
 * the new primary's Patroni (its PostgreSQL goes on, unfenced, until HAProxy's check cuts it off). After each: every
 * answer was a 2xx or a 503 with Retry-After (never a 500), requests succeed again soon after the promotion,
 * /ready said `failing_over` meanwhile, and after the client retried what failed (with its Idempotency-Key):
 * every acknowledged payment is on the new primary, once, every key stands for one payment, `ledger check` is
 * clean, every completed payment's webhook came once (one event id), and the subscriber still gets events.
 */

/** One request of the client and what came back. */
interface Sent {
  op: "initialize" | "pay" | "stk";
  /** Which gateway it went to (0 or 1). */
  gateway: number;
  /** Its Idempotency-Key (for a card payment, its initialize's). */
  key: string;
  startedAt: number;
  /** 0 until it was answered (or failed without an answer). */
  endedAt: number;
  status: number | undefined;
  retryAfter: string | null;
  /** The error envelope's code and message, when it was one. */
  code: string | undefined;
  message?: string;
  /** Why no answer came (a fetch failure). */
  error: string | undefined;
  /** Whether it carried X-RateLimit-Limit: a limiter counted it. */
  rateLimited: boolean;
  reference?: string;
}

interface CaseReport {
  name: string;
  killedAt: number;
  promotedAt: number;
  firstFailure?: number;
  lastFailure?: number;
  recoveredAt?: number;
  unavailable: number;
  errors: number;
}

describe("failover drill: Patroni, HAProxy, Redis Cluster under load", () => {
  // What runs: the database cluster, Redis, the merchant's endpoint and two gateways.
  let cluster: PatroniCluster;
  let redis: RedisCluster;
  let receiver: WebhookReceiver;
  let daraja: Awaited<ReturnType<typeof startFakeDaraja>>;
  const gateways: StartedGatewayProcess[] = [];
  let dataDir: string;
  let env: Record<string, string>;
  /** The demo merchant's test key, its sandbox channel (cards) and its M-Pesa channel (on the loopback Daraja). */
  let apiKey: string;
  let channelId: number;
  let mpesaChannelId: number;
  /** Straight to the cluster's primary (through HAProxy), for the final count. */
  let db: pg.Pool;
  let subscriber: Client | undefined;

  // What the drill saw, in order.
  const events: { at: number; reference: string; status: string }[] = [];
  const sent: Sent[] = [];
  const readiness: { at: number; status: number; database?: string; redis?: string }[] = [];
  const leaders: { at: number; leader: string | undefined }[] = [];
  const reports: CaseReport[] = [];
  /** Each STK callback Daraja posted: when, and the gateway's answer (undefined: no answer). */
  const callbacks: { at: number; status: number | undefined }[] = [];
  let loadRunning = false;
  let watching = false;
  let background: Promise<void>[] = [];

  /** Pacing of each client loop (light: two cores shared with other files); not a wait for a condition. */
  const PAUSE_MS = 40;
  /** The bound from promotion to requests succeeding again is 10 s; doubled for a busy 2-core machine. */
  const RECOVERY_BOUND_MS = 20_000;
  /** How long the payer takes to accept an STK push, before Daraja calls back. */
  const PAYER_TAKES_MS = 1500;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "failover-drill-"));
    [cluster, redis, receiver, daraja] = await Promise.all([startPatroniCluster(), startRedisCluster(), startWebhookReceiver(), startFakeDaraja()]);
    env = {
      ...darajaGatewayEnv(daraja),
      DATABASE_URL: cluster.url("gateway"),
      DATABASE_READ_URL: cluster.url("gateway", "replicas"),
      ENCRYPTION_KEY: randomBytes(32).toString("hex"),
      DATA_DIR: dataDir,
      REDIS_CLUSTER_NODES: redis.nodes,
      // Limits stay on, shared in Redis (and in memory while a master is down), but out of the load's reach.
      RATE_LIMIT_PER_MINUTE: "1000000",
      RATE_LIMIT_IP_PER_MINUTE: "1000000",
      ALLOW_PRIVATE_URLS: "true",
      JOB_POLL_INTERVAL_MS: "200",
      WEBHOOK_TIMEOUT_MS: "2000",
      JOB_LEASE_MS: "1000",
      WEBHOOK_RETRY_SCHEDULE: "0,1s,2s,3s,5s,5s,10s,10s,10s,10s",
      // A retry after the switch takes over a key (or a card charge) the cut-off request held.
      IDEMPOTENCY_LEASE_MS: "2000",
      CHECKOUT_CHARGE_LEASE_MS: "2000",
      // A push whose callback was lost in the switch is asked about (STK query) this long after it was sent.
      STK_CALLBACK_OVERDUE_MS: "3000",
      STK_QUERY_BACKOFF_MS: "1000",
    };
    // The first migrates the empty database and creates the demo merchant, once.
    gateways.push(await startGatewayProcess(env));
    apiKey = await printedTestKey(gateways[0]!);
    gateways.push(await startGatewayProcess(env));
    db = new pg.Pool({ connectionString: cluster.url("gateway"), max: 2 });
    db.on("error", () => {});

    const post = (path: string, body: unknown) =>
      fetch(`${gateways[0]!.url}${path}`, { method: "POST", headers: { "x-api-key": apiKey, "content-type": "application/json" }, body: JSON.stringify(body) });
    const hook = await post("/v1/webhooks", { url: `${receiver.url}/hooks`, events: ["transaction.completed"] });
    expect(hook.status, await hook.clone().text()).toBe(201);
    const channel = await post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    expect(channel.status).toBe(201);
    channelId = ((await channel.json()) as { channel: { id: number } }).channel.id;
    const mpesa = await post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig() });
    expect(mpesa.status, await mpesa.clone().text()).toBe(201);
    mpesaChannelId = ((await mpesa.json()) as { channel: { id: number } }).channel.id;

    // A live subscriber as a frontend runs one: it reconnects if its socket drops.
    subscriber = createClient({
      lazy: false,
      retryAttempts: 100,
      shouldRetry: () => true,
      retryWait: () => new Promise((resolve) => setTimeout(resolve, 500)),
      url: `${gateways[1]!.url.replace(/^http/, "ws")}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { "X-API-Key": apiKey },
    });
    subscriber.subscribe<{ transactionEvents: { transaction: { reference: string; status: string } } }>(
      { query: "subscription { transactionEvents { transaction { reference status } } }" },
      { next: (m) => void (m.data && events.push({ at: Date.now(), ...m.data.transactionEvents.transaction })), error: () => {}, complete: () => {} },
    );
  });

  afterAll(async () => {
    loadRunning = false;
    watching = false;
    await Promise.all(background);
    await subscriber?.dispose();
    for (const gateway of gateways) if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill("SIGKILL");
    await Promise.all(gateways.map((g) => g.exited));
    await db?.end().catch(() => {});
    await receiver?.close();
    await daraja?.close();
    await redis?.stop();
    await cluster?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  async function send(op: Sent["op"], gateway: number, key: string, path: string, body: unknown, headers: Record<string, string>): Promise<Sent> {
    const record: Sent = { op, gateway, key, startedAt: Date.now(), endedAt: 0, status: undefined, retryAfter: null, code: undefined, error: undefined, rateLimited: false };
    sent.push(record);
    try {
      const res = await fetch(`${gateways[gateway]!.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(60_000),
      });
      const json = (await res.json().catch(() => undefined)) as { reference?: string; code?: string; message?: string; data?: { reference?: string } } | undefined;
      record.status = res.status;
      record.retryAfter = res.headers.get("retry-after");
      record.code = json?.code;
      record.message = json?.message;
      record.rateLimited = res.headers.has("x-ratelimit-limit");
      record.reference = json?.reference ?? json?.data?.reference;
    } catch (error) {
      record.error = String(error);
    }
    record.endedAt = Date.now();
    return record;
  }

  /** The loop's counter in a key (`card-<loop>-<n>`): a retry sends the same body, as the key requires. */
  const serial = (key: string) => Number(key.split("-").at(-1));
  const initialize = (gateway: number, key: string) =>
    send("initialize", gateway, key, "/api/transactions/initialize", { amount: 1000 + serial(key), email: "drill@failover.test", description: key, payment_channel_id: channelId }, { "x-api-key": apiKey, "idempotency-key": key });
  const pay = (gateway: number, key: string, reference: string) => send("pay", gateway, key, `/payment/checkout/${reference}/pay`, SANDBOX_CARD, {});
  const stk = (gateway: number, key: string) =>
    send("stk", gateway, key, "/v1/collections/stk", { amount: 100 * (1 + (serial(key) % 50)), phone_number: "254708374149", description: key, payment_channel_id: mpesaChannelId }, { "x-api-key": apiKey, "idempotency-key": key });

  /** One client: a keyed initialize paid by card, then a keyed STK push; on one gateway, again until told to stop. */
  async function loop(n: number) {
    const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    for (let i = 0; loadRunning; i++) {
      const gateway = (n + i) % gateways.length;
      const init = await initialize(gateway, `card-${n}-${i}`);
      await pause();
      if (init.status === 200 && init.reference) await pay(gateway, init.key, init.reference);
      await pause();
      await stk(gateway, `stk-${n}-${i}`);
      await pause();
    }
  }

  /**
   * Daraja's side of every push: the payer accepts a moment later (so pushes made just before a kill are called back
   * during the switch), its status query says paid from then on, and the callback is posted once, to each gateway in
   * turn (the URL the push named, on that gateway's address).
   */
  async function answerPushes() {
    const answered = new Set<string>();
    const seenAt = new Map<string, number>();
    while (watching) {
      for (const [checkoutRequestId, push] of daraja.pushes) {
        if (answered.has(checkoutRequestId)) continue;
        if (!seenAt.has(checkoutRequestId)) seenAt.set(checkoutRequestId, Date.now());
        if (Date.now() - seenAt.get(checkoutRequestId)! < PAYER_TAKES_MS) continue;
        answered.add(checkoutRequestId);
        daraja.queryResults.set(checkoutRequestId, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
        const { pathname, search } = new URL(push.body.CallBackURL as string);
        const at = Date.now();
        const answer = await daraja.sendStkCallback(checkoutRequestId, {}, `${gateways[answered.size % 2]!.url}${pathname}${search}`).catch(() => undefined);
        callbacks.push({ at, status: answer?.status });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** /ready of the first gateway, every quarter second, while the drill runs. */
  async function watchReady() {
    while (watching) {
      const at = Date.now();
      const ready = await fetch(`${gateways[0]!.url}/ready`, { signal: AbortSignal.timeout(5000) })
        .then(async (r) => ({ ...((await r.json()) as { database?: string; redis?: string }), status: r.status }))
        .catch(() => ({ status: 0 }));
      readiness.push({ at, ...ready });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** The cluster's running leader as Patroni reports it, every quarter second: when it changed. */
  async function watchLeader() {
    while (watching) {
      const at = Date.now();
      const leader = (await cluster.members()).find((m) => m.role === "leader" && m.state === "running")?.name;
      if (leaders.at(-1)?.leader !== leader) leaders.push({ at, leader });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** Kills with `kill`, waits for another node to be promoted and for the load to succeed again on both gateways. */
  async function drill(name: string, kill: (leader: string) => Promise<void> | void): Promise<CaseReport> {
    const leader = await cluster.healthy();
    await until(() => sent.filter((r) => r.status === 200 || r.status === 201).length, (n) => n >= 10, 60_000);
    const killedAt = Date.now();
    await kill(leader);
    const promoted = await until(() => leaders.find((l) => l.at >= killedAt && l.leader && l.leader !== leader), Boolean, 120_000).catch((error: Error) => {
      throw new Error(`${error.message}\n${cluster.logs().slice(-5000)}`);
    });
    const promotedAt = promoted!.at;
    // Requests succeed again on both gateways, with the pool's connections to the dead primary replaced.
    const succeeded = (gateway: number) => sent.find((r) => r.gateway === gateway && r.startedAt > promotedAt && (r.status === 200 || r.status === 201));
    const recovered = await until(() => [succeeded(0), succeeded(1)], (both) => both.every(Boolean), 60_000);
    // Everything sent from just before the kill until a moment after both recovered, once it has all been answered.
    const windowEnd = Date.now() + 2000;
    await until(() => Date.now(), (now) => now > windowEnd, 5000);
    const during = sent.filter((r) => r.startedAt >= killedAt - 1000 && r.startedAt <= windowEnd);
    await until(() => during.filter((r) => r.endedAt === 0).length, (n) => n === 0, 90_000);
    const failed = during.filter((r) => r.status !== 200 && r.status !== 201);
    const report: CaseReport = {
      name,
      killedAt,
      promotedAt,
      firstFailure: failed[0]?.startedAt,
      lastFailure: failed.at(-1)?.endedAt,
      recoveredAt: Math.max(...recovered.map((r) => r!.endedAt)),
      unavailable: failed.filter((r) => r.status === 503).length,
      errors: failed.filter((r) => r.status !== 503).length,
    };
    reports.push(report);
    const first = report.firstFailure ?? killedAt;
    console.log(
      `${name}: new primary ${promoted!.leader} promoted ${promotedAt - killedAt} ms after the kill; ` +
        `requests failing from ${first - killedAt} ms to ${(report.lastFailure ?? first) - killedAt} ms after it (unavailable ${(report.lastFailure ?? first) - first} ms), ` +
        `${report.unavailable} answers 503 of ${during.length} sent, ${report.errors} other failures; both gateways succeeding ${report.recoveredAt! - promotedAt} ms after the promotion`,
    );
    // Never a 500 (or a cut-off answer): what met the switch is a 503 the client may retry, after Retry-After.
    const unhandled = () => gateways.flatMap((g) => g.output().split("\n").filter((line) => line.includes('"unhandled error"'))).slice(-3).join("\n");
    expect(failed.filter((r) => r.status !== 503), unhandled()).toEqual([]);
    for (const r of failed) {
      expect(r.retryAfter, r.key).toMatch(/^\d+$/);
      expect(r.code, r.key).toBe("service_unavailable");
    }
    expect(report.recoveredAt! - promotedAt).toBeLessThan(RECOVERY_BOUND_MS);
    // /ready said so meanwhile (and the balancer in front of the gateways took them out).
    const readyMeanwhile = readiness.filter((r) => r.at >= killedAt && r.at <= report.recoveredAt!);
    expect(readyMeanwhile.some((r) => r.status === 503 && r.database === "failing_over"), JSON.stringify(readyMeanwhile)).toBe(true);
    return report;
  }

  /** A sent request as retryingUnavailable reads an answer (its status and Retry-After). */
  const answered = async (request: Promise<Sent>) => {
    const r = await request;
    return { ...r, status: r.status ?? 0, headers: new Headers(r.retryAfter ? { "retry-after": r.retryAfter } : {}) };
  };

  /** Retries, as the client would, every request that did not get a 2xx: keyed ones with their key, card payments as the payer. */
  async function retryFailed() {
    const failedKeys = new Map<string, Sent>();
    for (const r of sent) if (r.status !== 200 && r.status !== 201) failedKeys.set(`${r.op}:${r.key}`, r);
    const acknowledged = new Set(sent.filter((r) => r.status === 200 || r.status === 201).map((r) => `${r.op}:${r.key}`));
    for (const [id, r] of failedKeys) {
      if (acknowledged.has(id)) continue;
      if (r.op === "stk" && r.code === "provider_unavailable") {
        // A push refused on the provider's side is a recorded answer: the key replays it (the payment failed).
        const again = await stk(r.gateway, r.key);
        expect({ status: again.status, code: again.code }, r.key).toEqual({ status: 503, code: "provider_unavailable" });
      } else if (r.op === "stk") {
        const again = await retryingUnavailable(() => answered(stk(r.gateway, r.key)));
        expect(again.status, `${r.key}: ${again.error ?? again.code}`).toBe(201);
      } else {
        // An initialize that failed is sent again with its key; the payment it stands for is then paid, as the payer
        // would: again while a cut-off charge still holds it (409 in progress), until paid or already completed.
        const init = r.op === "initialize" ? await retryingUnavailable(() => answered(initialize(r.gateway, r.key))) : sent.find((s) => s.op === "initialize" && s.key === r.key && s.reference)!;
        expect(init.status, `${r.key}: ${init.error ?? init.code}`).toBe(200);
        const paid = await until(
          () => retryingUnavailable(() => answered(pay(r.gateway, r.key, init.reference!))),
          (answer) => answer.status === 200 || (answer.status === 409 && answer.message === "Transaction is already completed"),
          60_000,
        );
        expect(paid.status, r.key).not.toBe(503);
      }
    }
  }

  it("kill -9 of the primary's postmaster, then of the new primary's Patroni: no acknowledged payment lost or doubled, 503s only, ledger clean", { timeout: LONG_TEST_TIMEOUT_MS }, async () => {
    watching = true;
    loadRunning = true;
    background = [watchReady(), watchLeader(), answerPushes(), loop(0), loop(1)];

    // Case 1: the primary's postmaster dies. Patroni fails over to the synchronous standby at once
    // (primary_start_timeout: 0) and rejoins the old primary as a replica.
    await drill("postmaster killed", (leader) => cluster.killPostmaster(leader));

    // A Redis Cluster master dies (no replica: its slots are unserved) and comes back: rate limits fall back to each
    // instance's memory and return to Redis; payments go on.
    const redisKilledAt = Date.now();
    await redis.kill(0);
    await until(() => readiness.filter((r) => r.at > redisKilledAt).at(-1), (r) => r?.redis === "degraded", 60_000);
    const degradedAt = Date.now();
    await until(() => sent.filter((r) => r.startedAt > degradedAt && r.status === 200 && r.op === "initialize").length, (n) => n >= 5, 60_000);
    await redis.restart(0);
    const redisBack = Date.now();
    await until(() => readiness.filter((r) => r.at > redisBack).at(-1), (r) => r?.redis === "ok", 60_000);
    const redisWindow = sent.filter((r) => r.startedAt >= redisKilledAt && r.startedAt <= redisBack);
    await until(() => redisWindow.filter((r) => r.endedAt === 0).length, (n) => n === 0, 60_000);
    const redisFailures = redisWindow.filter((r) => r.status !== 200 && r.status !== 201);
    const failedBy = new Map<string, number>();
    for (const r of redisFailures) failedBy.set(`${r.op} ${r.status} ${r.code}`, (failedBy.get(`${r.op} ${r.status} ${r.code}`) ?? 0) + 1);
    console.log(`Redis master killed for ${redisBack - redisKilledAt} ms: ${redisWindow.length} requests, failed: ${JSON.stringify(Object.fromEntries(failedBy))}`);
    // Never a 500: an M-Pesa push whose Daraja token is cached on the dead master's slots is a 503 provider_unavailable
    // (src/providers/mpesa/token-store.ts has no fallback), which the client retries like any 503.
    for (const r of redisFailures) expect({ key: r.key, status: r.status, retryAfter: r.retryAfter }).toEqual({ key: r.key, status: 503, retryAfter: expect.stringMatching(/^\d+$/) });
    // Every API answer was counted by a limiter: Redis's, or the instance's own while the master was down.
    const uncounted = sent.filter((r) => (r.status === 200 || r.status === 201) && r.op !== "pay" && !r.rateLimited);
    expect(uncounted.map((r) => r.key)).toEqual([]);

    // Case 2: the (new) primary's Patroni dies; its PostgreSQL runs on until the leader key expires (ttl) and the
    // standby is promoted. Then that machine is "back": Patroni starts again and rewinds it into a replica.
    await cluster.healthy(180_000);
    await drill("Patroni killed", (leader) => cluster.killPatroni(leader));
    const lastLeader = leaders.at(-1)!.leader!;
    const stale = cluster.nodes.find((n) => n.name !== lastLeader)!.name;
    await cluster.restartNode(stale);
    expect(await cluster.healthy(180_000)).toBe(lastLeader);

    loadRunning = false;
    await Promise.all(background.slice(3));
    await retryFailed();

    // Every key stands for one payment; every acknowledged one is there with what it was acknowledged with.
    const { rows } = await db.query<{ description: string; reference: string; status: string }>(
      "SELECT description, reference, status::text FROM transactions WHERE description LIKE 'card-%' OR description LIKE 'stk-%'",
    );
    const byKey = new Map<string, string[]>();
    for (const row of rows) byKey.set(row.description, [...(byKey.get(row.description) ?? []), row.reference]);
    const keys = new Set(sent.filter((r) => r.op !== "pay").map((r) => r.key));
    for (const key of keys) expect(byKey.get(key)?.length, key).toBe(1);
    expect(byKey.size).toBe(keys.size);
    for (const r of sent.filter((s) => s.op !== "pay" && (s.status === 200 || s.status === 201))) expect(byKey.get(r.key), r.key).toEqual([r.reference]);
    // Every payment completes (STK pushes whose callback met the switch through the reconciler's query), but the
    // pushes refused while Redis was down, which failed.
    const refused = new Set(sent.filter((r) => r.code === "provider_unavailable").map((r) => r.key));
    // What an open payment's history was, should one stay open: its requests, attempts, pushes at Daraja and log lines.
    const unsettled = async () => {
      const open = (
        await db.query<{ description: string; status: string; reference: string; attempts: unknown }>(
          `SELECT t.description, t.status::text, t.reference,
                  (SELECT json_agg(json_build_object('status', a.status, 'sendClaim', a.send_claim, 'request', a.checkout_request_id, 'at', a.created_at)) FROM transaction_attempts a WHERE a.transaction_id = t.id) AS attempts
             FROM transactions t WHERE (t.description LIKE 'card-%' OR t.description LIKE 'stk-%') AND t.status = 'pending'`,
        )
      ).rows;
      return open.map((t) => ({
        ...t,
        sent: sent.filter((r) => r.key === t.description).map((r) => `${r.op} ${r.status ?? r.error} ${r.code ?? ""} at ${r.startedAt - reports[0]!.killedAt} ms`),
        pushed: [...daraja.pushes.values()].filter((p) => p.body.TransactionDesc === t.description).map((p) => p.checkoutRequestId),
        logs: gateways.flatMap((g) => g.output().split("\n").filter((line) => line.includes(t.reference))).slice(-8),
      }));
    };
    await until(unsettled, (open) => open.length === 0, 90_000);
    const settled = (
      await db.query<{ description: string; reference: string; status: string; failure: string | null }>(
        "SELECT description, reference, status::text, failure_code || ': ' || failure_reason AS failure FROM transactions WHERE description LIKE 'card-%' OR description LIKE 'stk-%'",
      )
    ).rows;
    const history = (key: string) => sent.filter((r) => r.key === key).map((r) => `${r.op} ${r.status ?? r.error} ${r.code ?? ""} at ${r.startedAt - reports[0]!.killedAt} ms`);
    const pushedFor = (description: string) => [...daraja.pushes.values()].filter((p) => p.body.TransactionDesc === description).map((p) => p.checkoutRequestId);
    const logsOf = (reference: string) => gateways.flatMap((g) => g.output().split("\n").filter((line) => line.includes(reference))).slice(-8);
    for (const row of settled) {
      const story = `${row.description} (${row.failure}): ${history(row.description).join("; ")}; pushed ${JSON.stringify(pushedFor(row.description))}; logs ${logsOf(row.reference).join("\n")}`;
      expect(row.status, story).toBe(refused.has(row.description) ? "failed" : "completed");
    }

    // Callbacks that met a switch got a 503 (Daraja does not resend them; the status query settled those payments).
    expect(callbacks.filter((c) => c.status !== 200 && c.status !== 503)).toEqual([]);
    console.log(`STK callbacks: ${callbacks.length}, ${callbacks.filter((c) => c.status === 503).length} answered 503`);

    const ledger = await runCli(["ledger", "check"], { DATABASE_URL: cluster.url("gateway"), ENCRYPTION_KEY: env.ENCRYPTION_KEY!, DATA_DIR: dataDir });
    expect(ledger.code, ledger.output).toBe(0);

    // One transaction.completed event per completed payment, each delivered (at least once, with one event id).
    const completed = new Set(settled.filter((r) => r.status === "completed").map((r) => r.reference));
    const eventIds = new Map<string, Set<string>>();
    await until(
      () => {
        for (const delivery of receiver.received) {
          const reference = delivery.json.data.reference as string;
          eventIds.set(reference, (eventIds.get(reference) ?? new Set()).add(delivery.headers["webhook-id"]!));
        }
        return [...completed].filter((reference) => !eventIds.has(reference)).length;
      },
      (missing) => missing === 0,
      90_000,
    );
    for (const reference of completed) expect(eventIds.get(reference)?.size, reference).toBe(1);
    expect([...eventIds.keys()].filter((reference) => !completed.has(reference))).toEqual([]);

    // The subscriber heard of payments completed after both switches.
    const lastSwitch = reports.at(-1)!.recoveredAt!;
    await until(() => events.filter((e) => e.at > lastSwitch && e.status.toLowerCase() === "completed").length, (n) => n > 0, 30_000);

    const total = sent.length;
    const unavailable = sent.filter((r) => r.status === 503).length;
    console.log(`drill: ${total} requests, ${unavailable} answered 503 (Retry-After), ${rows.length} payments, ${receiver.received.length} webhook deliveries, ${events.length} subscription events`);
  });
});
