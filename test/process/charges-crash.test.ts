import { connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, type HttpResult } from "../support/gateway.ts";
import { runLedgerCheck } from "../support/ledger-check.ts";
import { gatewayProcesses, printedTestKey, processEnv, type StartedGatewayProcess } from "../support/process.ts";
import { until, waitUntil } from "../support/wait.ts";

/**
 * POST /v1/charges (a saved Paystack card charged without the payer) across a kill -9 of the gateway. The payment,
 * its attempt and the key's recovery point commit before Paystack is asked, under a reference fixed then; so a retry
 * of the key on the restarted gateway asks Paystack GET /transaction/verify/<reference> before anything else, and
 * charges only when Paystack never heard of it. Killed after Paystack charged (its answer held on the way back): the
 * retry finds the charge and completes the payment, with no second charge_authorization. Killed before the charge
 * reached Paystack (held on the way there): the retry finds the reference unknown and charges it, once. The ledger
 * check (the CLI) is clean after both.
 */
const LEASE_MS = 1000;
const CHARGE_PATH = "/transaction/charge_authorization";

/**
 * A loopback TCP relay in front of the fake Paystack that can hold one direction: "requests" keeps what the gateway
 * sends (a call that never reaches Paystack), "replies" keeps what Paystack answers (a call made whose answer never
 * comes back). Held bytes are counted, never passed on.
 */
interface HoldingRelay {
  url: string;
  hold: "nothing" | "requests" | "replies";
  held: { requests: number; replies: number };
  close(): Promise<void>;
}

async function startHoldingRelay(target: string): Promise<HoldingRelay> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const relay = { hold: "nothing", held: { requests: 0, replies: 0 } } as HoldingRelay;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    const pass = (from: Socket, to: Socket, direction: "requests" | "replies") =>
      from.on("data", (chunk) => (relay.hold === direction ? relay.held[direction]++ : to.write(chunk)));
    pass(client, upstream, "requests");
    pass(upstream, client, "replies");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
      socket.on("error", () => socket.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  relay.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  relay.close = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return relay;
}

describe("POST /v1/charges across a gateway crash between the Paystack call and our commit", () => {
  let database: TestDatabase;
  let fake: FakePaystack;
  let relay: HoldingRelay;
  let env: Record<string, string>;
  let gateway: StartedGatewayProcess;
  let key: string;
  let customer: number;
  let method: string;
  const processes = gatewayProcesses();

  /** What the fake was asked about one reference, in order: "POST /transaction/charge_authorization", "GET /transaction/verify/...". */
  const askedAbout = (reference: string) =>
    fake.requests.filter((r) => r.body?.reference === reference || r.path === `/transaction/verify/${reference}`).map((r) => `${r.method} ${r.path}`);

  beforeAll(async () => {
    database = await createTestDatabase();
    fake = await startFakePaystack();
    relay = await startHoldingRelay(fake.url);
    // Settled by asking: no webhook reaches these processes.
    fake.switches.chargeWebhooks = false;
    env = processEnv(database, {
      PAYSTACK_BASE_URL: relay.url,
      PUBLIC_BASE_URL: "https://pay.gateway.test",
      // The dead process's Idempotency-Key lease lapses soon after it dies, so the retry is let through.
      IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
      // The reconcile job waits longer than the test: what settles each charge is the retry of its key.
      PAYSTACK_VERIFY_AFTER_MS: "600000",
    });
    gateway = await processes.start(env);
    key = await printedTestKey(gateway);
    const api = apiClient(gateway.url, key);
    const channel = await api.post("/api/payment-channels/create", { name: "Paystack", provider: "paystack", config: fake.channelConfig() });
    expect(channel.status, channel.text).toBe(201);

    // A card saved through a real payment with the merchant's save request, confirmed by the payer's return (which verifies).
    const created = await api.post("/v1/customers", { email: "subscriber@example.com" });
    expect(created.status, created.text).toBe(201);
    customer = created.body.data.id;
    const init = await api.post("/api/transactions/initialize", {
      amount: 10_000, currency: "NGN", customer, save_payment_method: true, payment_channel_id: channel.body.channel.id,
    });
    expect(init.status, init.text).toBe(200);
    await fake.pay(init.body.reference);
    await fetch(`${gateway.url}/payment/checkout/${init.body.reference}/return?reference=${init.body.reference}`);
    const listed = await until(() => api.get(`/v1/customers/${customer}/payment-methods`), (r) => r.body?.data?.length === 1);
    method = listed.body.data[0].id;
  });

  afterAll(async () => {
    await processes.killAll();
    await relay?.close();
    await fake?.close();
    await database?.drop();
  });

  /**
   * Sends the charge under `idempotencyKey` with the relay holding `hold`, SIGKILLs the gateway once `held` says the
   * moment has come, and restarts it once the dead one's key lease has lapsed; answers how many requests the fake had
   * seen at the kill and the charge_authorization calls it received for this charge before it.
   */
  async function chargeThenKill(body: Record<string, unknown>, idempotencyKey: string, hold: "requests" | "replies", held: () => boolean) {
    const seenBefore = new Set(fake.requests);
    relay.hold = hold;
    const inFlight = apiClient(gateway.url, key).post("/v1/charges", body, { "idempotency-key": idempotencyKey }).then(
      (answered) => ({ answered }),
      (error: unknown) => ({ error }),
    );
    await waitUntil(held, `the ${hold} of the charge to be held`);
    gateway.child.kill("SIGKILL");
    expect(await gateway.exited).toBe("SIGKILL");
    const diedAt = Date.now();
    // The client lost its connection: no answer came.
    expect(await inFlight).toMatchObject({ error: expect.anything() });
    relay.hold = "nothing";
    const seenAtKill = fake.requests.length;
    const chargesBefore = fake.requests.filter((r) => !seenBefore.has(r) && r.path === CHARGE_PATH);

    gateway = await processes.start(env);
    await waitUntil(() => Date.now() >= diedAt + LEASE_MS + 100, "the dead process's key lease to lapse");
    return { seenAtKill, chargesBefore };
  }

  /** The retry a client makes after its connection dropped: the same body and key, again while the key is still in use. */
  async function retry(body: Record<string, unknown>, idempotencyKey: string): Promise<HttpResult> {
    const api = apiClient(gateway.url, key);
    return until(() => api.post("/v1/charges", body, { "idempotency-key": idempotencyKey }), (r) => r.status !== 409);
  }

  it("killed after Paystack charged, before the outcome was committed: the retry verifies the reference and completes it, never charging again", async () => {
    const body = { customer, payment_method: method, amount: 31_000, currency: "NGN" };
    const idempotencyKey = `crash-after-charge-${Date.now()}`;
    // The fake makes the charge (success) and answers; the relay holds the answer.
    const { seenAtKill, chargesBefore } = await chargeThenKill(body, idempotencyKey, "replies", () =>
      fake.requests.some((r) => r.path === CHARGE_PATH && r.body?.amount === 31_000) && relay.held.replies > 0,
    );
    expect(chargesBefore).toHaveLength(1);
    const reference = chargesBefore[0]!.body.reference as string;
    expect(fake.transactions.get(reference)!.status).toBe("success");

    const retried = await retry(body, idempotencyKey);
    expect(retried.status, retried.text).toBe(201);
    expect(retried.body.data).toMatchObject({ reference, status: "completed", amount: 31_000, payment_method: "card" });
    // Paystack was asked about the reference before anything else, and charged once in all.
    expect(askedAbout(reference)).toEqual([`POST ${CHARGE_PATH}`, `GET /transaction/verify/${reference}`]);
    expect(fake.requests.slice(seenAtKill).filter((r) => r.path === CHARGE_PATH)).toEqual([]);
    // Asked once more, the key answers the same payment.
    const again = await apiClient(gateway.url, key).post("/v1/charges", body, { "idempotency-key": idempotencyKey });
    expect(again.body.data).toMatchObject({ reference, status: "completed" });
    await expectOnePayment(31_000, reference);
  });

  it("killed before the charge reached Paystack: the retry finds the reference unknown and charges it then, once", async () => {
    const body = { customer, payment_method: method, amount: 32_000, currency: "NGN" };
    const idempotencyKey = `crash-before-charge-${Date.now()}`;
    // The gateway sends the charge; the relay keeps it from Paystack.
    const { chargesBefore } = await chargeThenKill(body, idempotencyKey, "requests", () => relay.held.requests > 0);
    expect(chargesBefore).toEqual([]);

    const retried = await retry(body, idempotencyKey);
    expect(retried.status, retried.text).toBe(201);
    const reference = retried.body.data.reference as string;
    expect(retried.body.data).toMatchObject({ status: "completed", amount: 32_000, payment_method: "card" });
    expect(fake.transactions.get(reference)!.status).toBe("success");
    expect(askedAbout(reference)).toEqual([`GET /transaction/verify/${reference}`, `POST ${CHARGE_PATH}`]);
    await expectOnePayment(32_000, reference);
  });

  /** The customer's one payment of this amount is the reference, completed; and the ledger check (the CLI process) is clean. */
  async function expectOnePayment(amount: number, reference: string) {
    const listed = await apiClient(gateway.url, key).get("/api/transactions/list?search=subscriber@example.com&limit=100");
    expect(listed.status, listed.text).toBe(200);
    const ofAmount = (listed.body.data as { reference: string; amount: number; status: string }[]).filter((t) => t.amount === amount);
    expect(ofAmount).toMatchObject([{ reference, status: "completed" }]);
    const { code, output } = await runLedgerCheck(database);
    expect(code, output).toBe(0);
    expect(output).toContain("Clean");
  }
});
