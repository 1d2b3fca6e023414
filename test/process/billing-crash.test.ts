import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient as plainApiClient } from "../support/gateway.ts";
import { runLedgerCheck } from "../support/ledger-check.ts";
import { inParallel } from "../support/load.ts";
import { gatewayProcesses, printedTestKey, processEnv, type StartedGatewayProcess } from "../support/process.ts";
import { retrying } from "../support/retry.ts";
import { LONG_TEST_TIMEOUT_MS } from "../support/timing.ts";
import { until, waitUntil } from "../support/wait.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

/**
 * kill -9 of the gateway (`npm start`, its own process) while it bills: many subscriptions on saved Paystack cards fall
 * due together, and the process is killed once some of their invoices are charged but not all. Paystack (the loopback
 * fake, which outlives the process) answers each charge_authorization slowly, so the kill lands with charges at
 * Paystack, charges committed but not sent, and periods not invoiced yet. The restarted gateway takes the dead one's
 * jobs over: every period ends with one invoice, paid, by one transaction whose reference Paystack charged once
 * (it asks GET /transaction/verify before charging a reference again); the ledger is clean.
 */
const SUBSCRIPTIONS = 120;
/** Charges sent to Paystack before the kill: some, far from all. */
const KILL_AFTER_CHARGES = 25;
/** How long Paystack takes to take a charge: 20 at a time per job kind, so 120 take seconds, and the kill lands amid them. */
const CHARGE_DELAY_MS = 300;
/** How far ahead the subscriptions start: every one is created by then (one created later bills at once all the same). */
const LEAD_MS = 8_000;
const CHARGE_PATH = "/transaction/charge_authorization";

describe("billing across a gateway crash", () => {
  let database: TestDatabase;
  let fake: FakePaystack;
  let env: Record<string, string>;
  let gateway: StartedGatewayProcess;
  let key: string;
  const processes = gatewayProcesses();

  /** The test's database, opened here once its gateway has stopped (PGlite has one user at a time). */
  async function openStopped() {
    const { openDatabase } = await import("../../src/db/database.ts");
    const { createLogger } = await import("../../src/logger.ts");
    return openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir }, createLogger("silent"));
  }
  const chargeRequests = () => fake.requests.filter((r) => r.method === "POST" && r.path === CHARGE_PATH);

  beforeAll(async () => {
    database = await createTestDatabase();
    fake = await startFakePaystack();
    // Payments are settled by asking Paystack (the payer's return, the reconcile job): no webhook reaches these processes.
    fake.switches.chargeWebhooks = false;
    env = processEnv(database, {
      PAYSTACK_BASE_URL: fake.url,
      PUBLIC_BASE_URL: "https://pay.gateway.test",
      JOB_POLL_INTERVAL_MS: "100",
      // A job the dead process had claimed (a period to bill, an invoice to charge) is taken over after its lease.
      JOB_LEASE_MS: "1000",
    });
    gateway = await processes.start(env);
    key = await printedTestKey(gateway);
  });

  afterAll(async () => {
    await processes.killAll();
    await fake?.close();
    await database?.drop();
  });

  it(`kill -9 amid ${SUBSCRIPTIONS} subscriptions' billing: after a restart each period has one invoice, paid, charged once at Paystack`, async () => {
    const api = apiClient(gateway.url, key);
    const channel = await api.post("/api/payment-channels/create", { name: "Paystack", provider: "paystack", config: fake.channelConfig() });
    expect(channel.status, channel.text).toBe(201);
    const channelId = channel.body.channel.id as number;

    // Customers with a card saved on Paystack: each pays once at Paystack's page and returns (which verifies and saves it).
    const customers = await inParallel(SUBSCRIPTIONS, 10, async (i) => {
      const created = await api.post("/v1/customers", { email: `crash${i}@billing.test` });
      expect(created.status, created.text).toBe(201);
      const customer = created.body.data.id as number;
      const init = await api.post("/api/transactions/initialize", { amount: 10_000, currency: "NGN", customer, payment_channel_id: channelId, save_payment_method: true });
      expect(init.status, init.text).toBe(200);
      await fake.pay(init.body.reference);
      // The payer's return; on a busy machine its answer can be an error page, which a payer reloads (the same card
      // saved again is the same method).
      for (let reloads = 0; ; reloads++) {
        await fetch(`${gateway.url}/payment/checkout/${init.body.reference}/return?reference=${init.body.reference}`, { redirect: "manual" }).catch(() => undefined);
        try {
          const methods = await until(() => api.get(`/v1/customers/${customer}/payment-methods`), (r) => r.body?.data?.length === 1);
          return { customer, method: methods.body.data[0].id as string };
        } catch (error) {
          if (reloads === 3) throw error;
        }
      }
    });
    const seeded = new Set(fake.transactions.keys());
    const plan = await api.post("/v1/plans", { name: "Crash", amount: 250_000, currency: "NGN", interval: "month" });
    expect(plan.status, plan.text).toBe(201);

    fake.switches.delayMs = { [CHARGE_PATH]: CHARGE_DELAY_MS };
    const startAt = new Date(Date.now() + LEAD_MS).toISOString();
    const subs = await inParallel(SUBSCRIPTIONS, 10, async (i) => {
      const { customer, method } = customers[i]!;
      const created = await api.post("/v1/subscriptions", { customer, plan: plan.body.data.id, payment_method: method, start_at: startAt }, { "idempotency-key": `crash-sub-${i}` });
      expect(created.status, created.text).toBe(201);
      return created.body.data.id as string;
    });

    // Billing under way: some charges sent to Paystack, far from all. Then kill -9.
    await until(() => chargeRequests().length, (n) => n >= KILL_AFTER_CHARGES, 120_000);
    gateway.child.kill("SIGKILL");
    expect(await gateway.exited).toBe("SIGKILL");
    const sentBeforeKill = chargeRequests().length;
    expect(sentBeforeKill).toBeLessThan(SUBSCRIPTIONS);

    gateway = await processes.start(env);
    const api2 = apiClient(gateway.url, key);
    try {
      await waitUntil(async () => (await api2.get("/v1/invoices?status=paid&limit=1")).body?.total === SUBSCRIPTIONS, `all ${SUBSCRIPTIONS} invoices paid after the restart`, 360_000);
    } catch (error) {
      // What was left, for whoever reads a failed run: invoices by status, and the restarted gateway's last words.
      const left = Object.fromEntries(await Promise.all(["open", "paid", "uncollectible", "void"].map(async (s) => [s, (await api2.get(`/v1/invoices?status=${s}&limit=1`)).body?.total])));
      const said = gateway.output().split("\n").filter((line) => !line.includes('"msg":"request completed"'));
      console.info(`billing-crash: invoices by status ${JSON.stringify(left)}; the restarted gateway's log but its requests (tail):\n${said.slice(-150).join("\n")}`);
      // And the open invoices' charges and jobs, as the database holds them (the process stopped at once, as it stands).
      gateway.child.kill("SIGKILL");
      await gateway.exited;
      const db = await openStopped();
      try {
        const open = await db.prisma.$queryRaw<{ id: number }[]>`SELECT id, reference, attempts, next_attempt_at FROM invoices WHERE status = 'open'`;
        const show = (rows: unknown) => JSON.stringify(rows, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v));
        console.info(`billing-crash: open invoices ${show(open)}`);
        console.info(`billing-crash: their charges ${show(await db.prisma.$queryRaw`SELECT t.invoice_id, t.reference, t.status, t.invoice_attempt, a.status AS attempt FROM transactions t LEFT JOIN transaction_attempts a ON a.transaction_id = t.id WHERE t.invoice_id = ANY(${open.map((i) => i.id)}::int[])`)}`);
        console.info(`billing-crash: at Paystack ${show(open.length ? [...fake.transactions.values()].filter((t) => !seeded.has(t.reference)).map((t) => [t.reference, t.status]) : [])}`);
        // The next periods' subscription.bill jobs (one per subscription) are not what is left.
        console.info(`billing-crash: jobs ${show(await db.prisma.$queryRaw`SELECT kind, status, payload, attempts, run_at, locked_by, last_error FROM jobs WHERE kind <> 'subscription.bill' ORDER BY id`)}`);
      } finally {
        await db.close();
      }
      throw error;
    }
    expect((await api2.get("/v1/invoices?limit=1")).body.total).toBe(SUBSCRIPTIONS);

    // Stopped (SIGTERM drains it), so the database can be read here on either backend.
    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
    const db = await openStopped();
    let charges: { reference: string; status: string; invoice_attempt: number | null }[];
    try {
      const perPeriod = await db.prisma.$queryRaw<{ subscription: string; invoices: bigint; paid: bigint; charges: bigint; completed: bigint }[]>`
        SELECT s.reference AS subscription, count(DISTINCT i.id) AS invoices, count(DISTINCT i.id) FILTER (WHERE i.status = 'paid' AND i.attempts = 1) AS paid,
               count(t.id) AS charges, count(t.id) FILTER (WHERE t.status = 'completed' AND t.amount = 250000) AS completed
        FROM subscriptions s JOIN invoices i ON i.subscription_id = s.id LEFT JOIN transactions t ON t.invoice_id = i.id
        GROUP BY s.reference, i.period_start`;
      expect(perPeriod).toHaveLength(SUBSCRIPTIONS);
      expect(new Set(perPeriod.map((p) => p.subscription))).toEqual(new Set(subs));
      expect(perPeriod.filter((p) => !(p.invoices === 1n && p.paid === 1n && p.charges === 1n && p.completed === 1n))).toEqual([]);
      charges = await db.prisma.$queryRaw`SELECT t.reference, t.status, t.invoice_attempt FROM transactions t WHERE t.invoice_id IS NOT NULL`;
      // One invoice.paid event per invoice, however many times the steps ran.
      const [events] = await db.prisma.$queryRaw<{ paid: bigint; created: bigint }[]>`
        SELECT count(*) FILTER (WHERE type = 'invoice.paid') AS paid, count(*) FILTER (WHERE type = 'invoice.created') AS created FROM events`;
      expect(events).toEqual({ paid: BigInt(SUBSCRIPTIONS), created: BigInt(SUBSCRIPTIONS) });
    } finally {
      await db.close();
    }

    // Paystack charged each invoice's reference once, and nothing else: no charge of a reference the gateway does not
    // know, no second charge under another reference (a duplicate reference would have been refused by the fake).
    const invoiceCharges = new Set(charges.map((c) => c.reference));
    expect(charges.every((c) => c.status === "completed" && c.invoice_attempt === 1)).toBe(true);
    const chargedAtPaystack = [...fake.transactions.entries()].filter(([reference]) => !seeded.has(reference));
    expect(new Set(chargedAtPaystack.map(([reference]) => reference))).toEqual(invoiceCharges);
    expect(chargedAtPaystack.every(([, t]) => t.status === "success" && t.amount === 250_000)).toBe(true);
    expect(new Set(chargeRequests().map((r) => r.body.reference as string))).toEqual(invoiceCharges);
    // A reference sent again (the dead process's request was cut off before Paystack took it) was asked about first.
    const resent = chargeRequests().length - invoiceCharges.size;
    for (const reference of invoiceCharges) {
      const asked = fake.requests.filter((r) => (r.path === CHARGE_PATH && r.body?.reference === reference) || r.path === `/transaction/verify/${reference}`).map((r) => (r.path === CHARGE_PATH ? "charge" : "verify"));
      const charges = asked.filter((a) => a === "charge").length;
      if (charges > 1) expect(asked.slice(0, asked.lastIndexOf("charge")), reference).toContain("verify");
      expect(charges, reference).toBeLessThanOrEqual(2);
    }
    console.info(`billing-crash: ${sentBeforeKill} charges sent before the kill; ${resent} charge requests sent again after it (each for a reference Paystack had not charged)`);

    const ledger = await runLedgerCheck(database);
    expect(ledger.code, ledger.output).toBe(0);
  }, LONG_TEST_TIMEOUT_MS);
});
