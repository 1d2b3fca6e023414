import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, type HttpResult } from "../support/gateway.ts";
import { startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";

/**
 * kill -9 of the gateway in the middle of a burst of Idempotency-Keyed payments, then a restart and a
 * retry of every request with its key (what a client does when its connection drops): nothing that
 * was acknowledged is lost, nothing is created twice, and every retry is answered with the payment
 * the key stands for (the acknowledged one where there was one).
 */
const LEASE_MS = 1000;
const BURST = 40;

interface Attempt {
  key: string;
  body: Record<string, unknown>;
  /** The answer before the crash, when one came. */
  acknowledged?: HttpResult;
}

describe("Idempotency-Keyed payments across a gateway crash", () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let apiKey: string;
  let gateway: StartedGatewayProcess;
  const running: StartedGatewayProcess[] = [];

  async function start(): Promise<StartedGatewayProcess> {
    const started = await startGatewayProcess(env);
    running.push(started);
    return started;
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    env = {
      ...database.env,
      ENCRYPTION_KEY: database.encryptionKeyHex,
      IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
      RATE_LIMIT_ENABLED: "false",
      SANDBOX_STK_DELAY_MS: "600000",
    };
    gateway = await start();
    [, apiKey] = (await gateway.waitFor(/Test API key \(shown once, keep it\): (sk_test_\S+)/)) as unknown as [string, string];
  });

  afterAll(async () => {
    for (const p of running) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
      await p.exited;
    }
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
    gateway = await start();
    await new Promise((r) => setTimeout(r, LEASE_MS + 300));
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

  async function retryAll(path: string, attempts: Attempt[]) {
    const api = apiClient(gateway.url, apiKey);
    return Promise.all(attempts.map((a) => api.post(path, a.body, { "idempotency-key": a.key })));
  }

  it("initialize: 0 acknowledged lost, 0 duplicated, every retry answered with the key's transaction", { timeout: 90_000 }, async () => {
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

  it("STK push: 0 acknowledged lost, 0 duplicated, never pushed twice for one key", { timeout: 90_000 }, async () => {
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
});
