import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, SANDBOX_CARD, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { currentBackend } from "../support/backend.ts";
import { runCli } from "../support/process.ts";
import { inParallel } from "../support/load.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * Bounded tables (issue 26): the retention job deletes what is no longer needed, in batches, and nothing else.
 * The clock is moved by writing older timestamps: after each round of work every bounded row is made a day older.
 * On both backends: the embedded PGlite runs the same statements (and, for the CLI, the handoff to the gateway).
 */
describe("retention", () => {
  let gw: TestGateway;
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  let api: ReturnType<typeof apiClient>;
  let user: { email: string; password: string };
  const prisma = () => gw.gateway.db.prisma;
  const retention = () => gw.gateway.services.retention;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    gw = await startTestGateway({
      env: {
        WEBHOOK_ALLOW_PRIVATE_URLS: "true",
        JOB_POLL_INTERVAL_MS: "100",
        RATE_LIMIT_ENABLED: "false",
        JOB_RETENTION_DAYS: "1",
        WEBHOOK_DELIVERY_RETENTION_DAYS: "2",
        EVENT_RETENTION_DAYS: "3",
        MAIL_RETENTION_DAYS: "2",
        REFRESH_TOKEN_TTL_DAYS: "1",
      },
    });
    merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    user = await gw.createUser(merchant.id, "developer");
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
    expect((await api.post("/v1/webhooks", { url: `${receiver.url}/hooks`, events: ["transaction.completed"] })).status).toBe(201);
    // The tests run retention themselves: the hourly run, should this file be running at minute 40, waits a day.
    await postponeScheduledRun();
  });

  const postponeScheduledRun = () => prisma().job.updateMany({ where: { kind: "retention.run", status: "queued" }, data: { runAt: new Date(Date.now() + 86_400_000) } });

  afterAll(async () => {
    await gw?.close();
    await receiver?.close();
  });

  const counts = async () => {
    const [transactions, events, deliveries, jobs, idempotencyKeys, refreshTokens, mails] = await Promise.all([
      prisma().transaction.count(),
      prisma().event.count(),
      prisma().webhookDelivery.count(),
      prisma().job.count(),
      prisma().idempotencyKey.count(),
      prisma().refreshToken.count(),
      prisma().mailMessage.count(),
    ]);
    return { transactions, events, deliveries, jobs, idempotencyKeys, refreshTokens, mails };
  };

  /** The clock moves a day: every row retention looks at is made a day older (queued jobs keep their run_at). */
  async function aDayPasses() {
    const db = prisma();
    await db.$executeRaw`UPDATE transactions SET created_at = created_at - interval '1 day'`;
    await db.$executeRaw`UPDATE events SET created_at = created_at - interval '1 day'`;
    await db.$executeRaw`UPDATE webhook_deliveries SET created_at = created_at - interval '1 day', updated_at = updated_at - interval '1 day'`;
    await db.$executeRaw`UPDATE jobs SET created_at = created_at - interval '1 day', updated_at = updated_at - interval '1 day' WHERE status = 'failed'`;
    await db.$executeRaw`UPDATE idempotency_keys SET created_at = created_at - interval '1 day', expires_at = expires_at - interval '1 day'`;
    await db.$executeRaw`UPDATE refresh_tokens SET created_at = created_at - interval '1 day', expires_at = expires_at - interval '1 day'`;
    await db.$executeRaw`UPDATE mail_messages SET created_at = created_at - interval '1 day'`;
  }

  /** A day's work: payments (keyed, so each leaves an Idempotency-Key record) with their webhooks, a sign-in and a refresh, a job that gave up. */
  async function aDaysWork(round: number, payments: number) {
    await inParallel(payments, 5, async (index) => {
      const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "payer@example.test" }, { "idempotency-key": `day-${round}-${index}` });
      expect(init.status, init.text).toBe(200);
      const paid = await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, SANDBOX_CARD);
      expect(paid.status, paid.text).toBe(200);
    });
    const login = await apiClient(gw.url).post("/v1/auth/login", user);
    expect(login.status, login.text).toBe(200);
    expect((await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: login.body.data.refresh_token })).status).toBe(200);
    await prisma().job.create({ data: { kind: "test.gave-up", payload: { round }, status: "failed", lastError: "gave up" } });
    await waitUntil(async () => (await prisma().webhookDelivery.count({ where: { status: "pending" } })) === 0, "every webhook delivered");
    await waitUntil(async () => (await prisma().mailMessage.count({ where: { status: "queued" } })) === 0, "every receipt written");
  }

  it("under a steady workload, jobs, deliveries, events, keys and tokens stop growing while transactions grow", async () => {
    const payments = 10;
    const history: Awaited<ReturnType<typeof counts>>[] = [];
    for (let round = 1; round <= 6; round++) {
      await aDaysWork(round, payments);
      await retention().runNow();
      history.push(await counts());
      await aDayPasses();
    }
    // Transactions are never deleted.
    expect(history.map((c) => c.transactions)).toEqual([1, 2, 3, 4, 5, 6].map((day) => day * payments));
    // From the fourth day on, each day deletes as much as it adds: the counts after each run are the same.
    const bounded = history.map(({ transactions: _, ...rest }) => rest);
    expect(bounded[4]).toEqual(bounded[3]);
    expect(bounded[5]).toEqual(bounded[3]);
    const plateau = bounded[5]!;
    // What is kept is the retention window's worth: deliveries 2 days, keys until a day after expiry (2 days),
    // the newest day's failed job (plus the queued retention schedule) and the newest day's session (2 tokens).
    expect(plateau.deliveries).toBe(2 * payments);
    expect(plateau.mails).toBe(2 * payments); // a receipt per payment, kept 2 days
    expect(plateau.idempotencyKeys).toBe(2 * payments);
    expect(plateau.refreshTokens).toBe(2);
    expect(await prisma().job.count({ where: { status: "failed" } })).toBe(1);
    expect(plateau.events).toBeLessThan(history[5]!.transactions);
    expect(plateau.events).toBe(bounded[2]!.events); // 3 days of events
    // Whatever the runs deleted, every payment is still there with its ledger.
    expect(await prisma().ledgerEntry.count({ where: { merchantId: merchant.id, type: "payment" } })).toBe(6 * payments);
  });

  it("keeps what is still needed, however old: a pending delivery and its event, a pending payment's events, queued jobs, unexpired keys, live sessions", async () => {
    const db = prisma();
    const old = new Date(Date.now() - 400 * 86_400_000);
    // A payment still pending (initialized, never paid), with an old event.
    const init = await api.post("/api/transactions/initialize", { amount: 500, email: "pending@example.test" });
    const pending = await db.transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
    const pendingEvent = await db.event.create({ data: { merchantId: merchant.id, mode: "test", type: "transaction.created", transactionId: pending.id, payload: {}, createdAt: old } });
    // An old event whose delivery is waiting for its next retry.
    const endpoint = await db.webhookEndpoint.findFirstOrThrow({ where: { merchantId: merchant.id } });
    const retriedEvent = await db.event.create({ data: { merchantId: merchant.id, mode: "test", type: "transaction.completed", payload: {}, createdAt: old } });
    const due = await db.webhookDelivery.create({
      data: { endpointId: endpoint.id, eventId: retriedEvent.id, merchantId: merchant.id, mode: "test", status: "pending", attempts: 3, nextAttemptAt: new Date(Date.now() + 3_600_000), createdAt: old },
    });
    // Old e-mails: one sent (goes), one still queued (stays: it has not been sent yet).
    const mailBase = { merchantId: merchant.id, mode: "test" as const, kind: "payment_receipt", createdAt: old };
    const sentMail = await db.mailMessage.create({ data: { ...mailBase, key: `retention-sent-${old.getTime()}`, status: "sent" } });
    const queuedMail = await db.mailMessage.create({ data: { ...mailBase, key: `retention-queued-${old.getTime()}`, status: "queued" } });
    // An old event nothing needs, as a control.
    const control = await db.event.create({ data: { merchantId: merchant.id, mode: "test", type: "transaction.completed", payload: {}, createdAt: old } });
    // A queued job (of a kind nobody runs) made long ago, and a failed one that is recent.
    const queued = await db.job.create({ data: { kind: "test.waiting", payload: {}, runAt: new Date(Date.now() + 3_600_000), createdAt: old, updatedAt: old } });
    const recentFailure = await db.job.create({ data: { kind: "test.gave-up", payload: {}, status: "failed" } });
    // A key made long ago whose record has not expired yet (a lease taken over keeps it), and an expired one.
    const keyBase = { merchantId: merchant.id, mode: "test" as const, principal: "key:0", requestFingerprint: "f", createdAt: old };
    const unexpired = await db.idempotencyKey.create({ data: { ...keyBase, key: "unexpired", expiresAt: new Date(Date.now() + 60_000) } });
    await db.idempotencyKey.create({ data: { ...keyBase, key: "expired", expiresAt: new Date(Date.now() - 25 * 3_600_000) } });
    // A session whose first token expired but whose latest has not: the whole family stays (logout with either ends it).
    const userRow = await db.user.findFirstOrThrow({ where: { merchantId: merchant.id } });
    const family = "6f1c1e3a-0b5f-4a7e-9f7d-2d8a7c1b9e01";
    const tokenBase = { userId: userRow.id, familyId: family, mode: "test" as const, createdAt: old };
    await db.refreshToken.create({ data: { ...tokenBase, hash: "used-and-expired", expiresAt: new Date(Date.now() - 86_400_000), usedAt: old } });
    await db.refreshToken.create({ data: { ...tokenBase, hash: "live", expiresAt: new Date(Date.now() + 86_400_000) } });
    await db.refreshToken.create({ data: { ...tokenBase, familyId: "6f1c1e3a-0b5f-4a7e-9f7d-2d8a7c1b9e02", hash: "ended", expiresAt: new Date(Date.now() - 1000) } });

    const { deleted } = await retention().runNow();
    expect(deleted.events).toBeGreaterThanOrEqual(1);
    expect(deleted.mail_messages).toBeGreaterThanOrEqual(1);
    expect(await db.mailMessage.findUnique({ where: { id: sentMail.id } })).toBeNull();
    expect(await db.mailMessage.findUnique({ where: { id: queuedMail.id } })).not.toBeNull();
    expect(await db.event.findUnique({ where: { id: control.id } })).toBeNull();
    expect(await db.event.findUnique({ where: { id: pendingEvent.id } })).not.toBeNull();
    expect(await db.event.findUnique({ where: { id: retriedEvent.id } })).not.toBeNull();
    expect(await db.webhookDelivery.findUnique({ where: { id: due.id } })).not.toBeNull();
    expect(await db.job.findUnique({ where: { id: queued.id } })).not.toBeNull();
    expect(await db.job.findUnique({ where: { id: recentFailure.id } })).not.toBeNull();
    expect(await db.idempotencyKey.findUnique({ where: { id: unexpired.id } })).not.toBeNull();
    expect(await db.idempotencyKey.count({ where: { key: "expired" } })).toBe(0);
    expect(await db.refreshToken.count({ where: { familyId: family } })).toBe(2);
    expect(await db.refreshToken.count({ where: { hash: "ended" } })).toBe(0);
    // The retention schedule itself stays queued, once.
    expect(await db.job.count({ where: { kind: "retention.run", status: "queued" } })).toBe(1);

    // Once the delivery has finished (and is old), it goes, and its event with it on the same run.
    await db.webhookDelivery.update({ where: { id: due.id }, data: { status: "failed", nextAttemptAt: null } });
    const later = await retention().runNow();
    expect(later.deleted.webhook_deliveries).toBe(1);
    expect(await db.event.findUnique({ where: { id: retriedEvent.id } })).toBeNull();
    await db.job.delete({ where: { id: queued.id } });
  });

  it("a writer re-using old keys while 200,000 (PGlite: 50,000) of them are deleted waits at most a batch, and every key it used is kept", async () => {
    const db = prisma();
    const apiKey = await db.apiKey.findFirstOrThrow({ where: { merchantId: merchant.id, mode: "test", revokedAt: null } });
    const principal = `key:${apiKey.id}`;
    // PGlite has one connection, so there a single statement would hold up every request, not only colliding ones.
    const total = currentBackend() === "postgres" ? 200_000 : 50_000;
    // Records that expired three days ago, under the keys this merchant's key will send again.
    await db.$executeRaw`
      INSERT INTO idempotency_keys (merchant_id, mode, principal, key, request_fingerprint, status, created_at, expires_at)
      SELECT ${merchant.id}, 'test', ${principal}, 'old-' || i, 'f', 'completed', now() - interval '4 days', now() - interval '3 days'
      FROM generate_series(1, ${total}) AS i`;

    // The writer: payments keyed with old keys (each claim takes over an expired record: a row retention is
    // deleting), timed one by one, until the run ends.
    const latencies: number[] = [];
    const used: string[] = [];
    let running = true;
    const writer = (async () => {
      for (let i = 0; running; i++) {
        const key = `old-${1 + ((i * 7919) % total)}`;
        const started = performance.now();
        const res = await api.post("/api/transactions/initialize", { amount: 100, email: "w@example.test" }, { "idempotency-key": key });
        latencies.push(performance.now() - started);
        expect(res.status, res.text).toBe(200);
        used.push(key);
      }
    })();
    // A baseline of the writer alone first.
    await waitUntil(() => latencies.length >= 20, "the writer's first requests");
    const baseline = Math.max(...latencies);
    const before = latencies.length;
    const startedAt = performance.now();
    const run = await retention().runNow();
    const runMs = performance.now() - startedAt;
    running = false;
    await writer;
    const during = latencies.slice(before);
    const worst = Math.max(...during);
    console.log(`${currentBackend()}: retention of ${total} rows: ${Math.round(runMs)} ms; writer alone max ${Math.round(baseline)} ms; during the run ${during.length} writes, max ${Math.round(worst)} ms`);

    expect(during.length).toBeGreaterThan(5);
    // One batch is a few tens of ms; a single statement over 200,000 rows holds a re-claimed key for (nearly) its whole
    // run (measured: 2.5 s of 2.75 s). The bound allows for a loaded machine (the writer's own worst alone, half the
    // run, which a busy machine stretches too) yet fails that.
    expect(worst).toBeLessThan(Math.max(500, 3 * baseline, runMs / 2));
    // Every key the writer used is kept (claimed again with a new expiry, or claimed afresh); the rest are gone.
    expect(run.deleted.idempotency_keys).toBeGreaterThan(total - used.length - 1);
    expect(await db.idempotencyKey.count({ where: { principal, key: { startsWith: "old-" } } })).toBe(new Set(used).size);
  });

  it("runs as an hourly job on the runner, which queues its next run (one stays queued)", async () => {
    const db = prisma();
    const old = await db.job.create({ data: { kind: "test.gave-up", payload: {}, status: "failed", updatedAt: new Date(Date.now() - 2 * 86_400_000) } });
    const [schedule] = await db.job.findMany({ where: { kind: "retention.run" } });
    // Its hour has come.
    await db.job.update({ where: { id: schedule!.id }, data: { runAt: new Date() } });
    gw.gateway.services.jobs.nudge();
    await waitUntil(async () => (await db.job.findUnique({ where: { id: old.id } })) === null, "the due retention job to delete the old failed job");
    await waitUntil(async () => (await db.job.findMany({ where: { kind: "retention.run" } })).every((j) => j.id !== schedule!.id && j.status === "queued"), "the next run queued");
    const next = await db.job.findMany({ where: { kind: "retention.run" } });
    expect(next).toHaveLength(1);
    expect(next[0]!.runAt.getTime() - Date.now()).toBeGreaterThan(0);
    expect(next[0]!.runAt.getTime() - Date.now()).toBeLessThanOrEqual(3_600_000);
    expect(next[0]!.runAt.getUTCMinutes()).toBe(40);
    await postponeScheduledRun();
  });

  it("settings are days, fractions allowed; 0 or a word is refused with the setting's name", () => {
    expect(loadConfig({ EVENT_RETENTION_DAYS: "0.5" }).retention.eventsMs).toBe(12 * 3_600_000);
    expect(loadConfig({}).retention).toEqual({ failedJobsMs: 7 * 86_400_000, webhookDeliveriesMs: 30 * 86_400_000, eventsMs: 90 * 86_400_000, mailMessagesMs: 90 * 86_400_000 });
    expect(() => loadConfig({ JOB_RETENTION_DAYS: "0" })).toThrow(/JOB_RETENTION_DAYS: must be a number of days greater than 0/);
    expect(() => loadConfig({ WEBHOOK_DELIVERY_RETENTION_DAYS: "forever" })).toThrow(/WEBHOOK_DELIVERY_RETENTION_DAYS/);
  });

  it("npm run cli -- retention run deletes once and prints the counts per table", async () => {
    const db = prisma();
    await db.job.create({ data: { kind: "test.gave-up", payload: {}, status: "failed", updatedAt: new Date(Date.now() - 2 * 86_400_000) } });
    const { code, output } = await runCli(["retention", "run"], { ...gw.database.env, ENCRYPTION_KEY: gw.database.encryptionKeyHex, JOB_RETENTION_DAYS: "1" });
    expect(code, output).toBe(0);
    const printed = JSON.parse(output.trim().split("\n").at(-1)!);
    expect(printed.deleted, output).toEqual({ webhook_deliveries: expect.any(Number), events: expect.any(Number), jobs: 1, idempotency_keys: expect.any(Number), refresh_tokens: expect.any(Number), provider_calls: expect.any(Number), mail_messages: expect.any(Number) });
  });
});
