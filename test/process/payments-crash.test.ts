import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, type HttpResult } from "../support/gateway.ts";
import { gatewayProcesses, printedTestKey, processEnv, type StartedGatewayProcess } from "../support/process.ts";
import { retryingUnavailable } from "../support/retry.ts";
import { until, waitUntil } from "../support/wait.ts";

/**
 * kill -9 of the gateway in the middle of a burst of Idempotency-Keyed payments, then a restart and a
 * retry of every request with its key (what a client does when its connection drops): nothing that
 * was acknowledged is lost, nothing is created twice, and every retry is answered with the payment
 * the key stands for (the acknowledged one where there was one). The same for checkout card payments,
 * which carry no key: the transaction's charge claim lapses, a retry settles what the crash left open,
 * and each transaction completes exactly once.
 */
const LEASE_MS = 1000;

/**
 * Every lease the dead process held (idempotency keys in flight, card-charge claims) was taken before it died,
 * so it has lapsed LEASE_MS after the death (plus a margin for clock granularity): the restarted gateway, whose
 * database this test cannot read while the gateway holds it, then lets a retry through.
 */
const leasesLapsed = (diedAt: number) => waitUntil(() => Date.now() >= diedAt + LEASE_MS + 100, "the dead process's leases to lapse");
const BURST = 40;

interface Attempt {
  key: string;
  body: Record<string, unknown>;
  /** The answer before the crash, when one came. */
  acknowledged?: HttpResult;
}

describe("Idempotency-Keyed payments across a gateway crash", () => {
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  let env: Record<string, string>;
  let apiKey: string;
  let gateway: StartedGatewayProcess;
  const processes = gatewayProcesses();

  const start = () => processes.start(env);

  beforeAll(async () => {
    database = await createTestDatabase();
    receiver = await startWebhookReceiver();
    env = processEnv(database, {
      IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
      CHECKOUT_CHARGE_LEASE_MS: String(LEASE_MS),
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      // Deliveries the dead instance had claimed are taken over after the job lease (here 2 s + 5 s).
      JOB_LEASE_MS: "1000",
      WEBHOOK_TIMEOUT_MS: "2000",
      // A delivery that timed out on a loaded machine is tried again within seconds, not after the default 5 min.
      WEBHOOK_RETRY_SCHEDULE: "0,1s,2s,4s,8s,16s",
      SANDBOX_STK_DELAY_MS: "600000",
    });
    gateway = await start();
    apiKey = await printedTestKey(gateway);
  });

  afterAll(async () => {
    await processes.killAll();
    await receiver?.close();
    await database?.drop();
  });

  /** Sends every attempt at once and kills the gateway once `killAfter` of them have been answered. */
  async function burstThenKill(path: string, attempts: Attempt[], killAfter: number) {
    const api = apiClient(gateway.url, apiKey);
    let answered = 0;
    let killed = false;
    const sends = attempts.map((attempt) =>
      api.post(path, attempt.body, { "idempotency-key": attempt.key }).then(
        (res) => {
          if (!killed) attempt.acknowledged = res;
          if (++answered >= killAfter && !killed) {
            killed = true;
            gateway.child.kill("SIGKILL");
          }
        },
        () => undefined, // cut off by the crash: the client never heard back
      ),
    );
    await Promise.all(sends);
    if (!killed) gateway.child.kill("SIGKILL");
    expect(await gateway.exited).toBe("SIGKILL");
    const diedAt = Date.now();
    gateway = await start();
    await leasesLapsed(diedAt);
  }

  /** Every transaction the merchant has, by client-visible field. */
  async function allTransactions(): Promise<{ reference: string; description: string | null; clientReference: string | null }[]> {
    const api = apiClient(gateway.url, apiKey);
    const res = await api.post("/graphql", {
      query: `{ transactions(first: 100) { totalCount edges { node { reference description clientReference } } } }`,
    });
    expect(res.body.errors, res.text).toBeUndefined();
    return res.body.data.transactions.edges.map((e: { node: unknown }) => e.node);
  }

  /** Every attempt sent again with its key, as a client does (which also waits out a 503 + Retry-After). */
  async function retryAll(path: string, attempts: Attempt[]) {
    const api = apiClient(gateway.url, apiKey);
    return Promise.all(attempts.map((a) => retryingUnavailable(() => api.post(path, a.body, { "idempotency-key": a.key }))));
  }

  it("initialize: 0 acknowledged lost, 0 duplicated, every retry answered with the key's transaction", async () => {
    const attempts: Attempt[] = Array.from({ length: BURST }, (_, i) => ({
      key: `init-${i}`,
      body: { amount: 1000 + i, email: `payer${i}@crash.test`, description: `crash-init-${i}` },
    }));
    await burstThenKill("/api/transactions/initialize", attempts, 8);
    const acknowledged = attempts.filter((a) => a.acknowledged?.status === 200);
    expect(acknowledged.length).toBeGreaterThanOrEqual(8);

    const retries = await retryAll("/api/transactions/initialize", attempts);
    retries.forEach((res, i) => {
      expect(res.status, `${attempts[i]!.key}: ${res.text}`).toBe(200);
      const original = attempts[i]!.acknowledged;
      if (original?.status === 200) expect(res.body.reference, attempts[i]!.key).toBe(original.body.reference);
    });

    const rows = (await allTransactions()).filter((t) => t.description?.startsWith("crash-init-"));
    for (const [i, attempt] of attempts.entries()) {
      const mine = rows.filter((t) => t.description === attempt.body.description);
      expect(mine.map((t) => t.reference), attempt.key).toEqual([retries[i]!.body.reference]);
    }
    // And from now on the answers are plain replays.
    const again = await retryAll("/api/transactions/initialize", attempts.slice(0, 5));
    again.forEach((res, i) => {
      expect(res.headers.get("idempotent-replayed")).toBe("true");
      expect(res.body.reference).toBe(retries[i]!.body.reference);
    });
  });

  it("STK push: 0 acknowledged lost, 0 duplicated, never pushed twice for one key", async () => {
    const attempts: Attempt[] = Array.from({ length: BURST }, (_, i) => ({
      key: `stk-${i}`,
      body: { amount: 100 * (i + 1), phone_number: "254708374149", reference: `STK-${i}`, description: "crash" },
    }));
    await burstThenKill("/v1/collections/stk", attempts, 8);

    const retries = await retryAll("/v1/collections/stk", attempts);
    retries.forEach((res, i) => {
      expect(res.status, `${attempts[i]!.key}: ${res.text}`).toBe(201);
      const original = attempts[i]!.acknowledged;
      if (original?.status === 201) expect(res.body.data.reference, attempts[i]!.key).toBe(original.body.data.reference);
    });
    const rows = (await allTransactions()).filter((t) => t.clientReference?.startsWith("STK-"));
    for (const [i, attempt] of attempts.entries()) {
      const mine = rows.filter((t) => t.clientReference === attempt.body.reference);
      expect(mine.map((t) => t.reference), attempt.key).toEqual([retries[i]!.body.data.reference]);
    }
  });

  it("checkout pay: nothing acknowledged lost, every transaction completed exactly once", async () => {
    const api = apiClient(gateway.url, apiKey);
    // A card processor that takes a moment, so the crash lands in the middle of charges.
    const channel = await api.post("/api/payment-channels/create", { name: "Slow cards", provider: "sandbox", config: { charge_delay_ms: 200 } });
    expect(channel.status, channel.text).toBe(201);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/completed`, events: ["transaction.completed"] });
    expect(hook.status, hook.text).toBe(201);
    const references: string[] = [];
    for (let i = 0; i < BURST; i++) {
      const init = await api.post("/api/transactions/initialize", { amount: 500 + i, email: `card${i}@crash.test`, payment_channel_id: channel.body.channel.id });
      expect(init.status, init.text).toBe(200);
      references.push(init.body.reference);
    }
    const card = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };
    const pay = (reference: string) => apiClient(gateway.url).post(`/payment/checkout/${reference}/pay`, card);

    const acknowledged = new Set<string>();
    let answered = 0;
    let killed = false;
    await Promise.all(
      references.map((reference) =>
        pay(reference).then(
          (res) => {
            if (killed) return;
            if (res.status === 200) acknowledged.add(reference);
            if (++answered >= 8) {
              killed = true;
              gateway.child.kill("SIGKILL");
            }
          },
          () => undefined,
        ),
      ),
    );
    if (!killed) gateway.child.kill("SIGKILL");
    expect(await gateway.exited).toBe("SIGKILL");
    expect(acknowledged.size).toBeGreaterThanOrEqual(1);
    const diedAt = Date.now();
    gateway = await start();
    await leasesLapsed(diedAt);

    // The payer tries again: an acknowledged payment is already completed (409), any other one is charged now.
    const retries = await Promise.all(references.map((reference) => retryingUnavailable(() => pay(reference))));
    retries.forEach((res, i) => {
      const reference = references[i]!;
      if (acknowledged.has(reference)) {
        expect(res.status, res.text).toBe(409);
        expect(res.body.message).toBe("Transaction is already completed");
      } else {
        expect([200, 409], res.text).toContain(res.status);
        if (res.status === 409) expect(res.body.message).toBe("Transaction is already completed");
      }
    });
    for (const reference of references) {
      const verify = await retryingUnavailable(() => apiClient(gateway.url, apiKey).get(`/api/transactions/verify/${reference}`));
      expect(verify.body.transaction.status, reference).toBe("completed");
    }
    // One transaction.completed event per transaction (webhooks are at-least-once: a delivery cut off by the
    // crash comes again with the same id, so count distinct event ids).
    const eventsByReference = new Map<string, Set<string>>();
    await until(
      () => {
        for (const delivery of receiver.received) {
          const reference = delivery.json.data.reference as string;
          const ids = eventsByReference.get(reference) ?? new Set<string>();
          ids.add(delivery.headers["webhook-id"]!);
          eventsByReference.set(reference, ids);
        }
        return eventsByReference.size;
      },
      (n) => n === BURST,
      60_000,
    );
    expect([...eventsByReference.keys()].sort()).toEqual([...references].sort());
    for (const [reference, ids] of eventsByReference) expect(ids.size, reference).toBe(1);
  });
});
