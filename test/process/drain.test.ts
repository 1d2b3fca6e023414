import { request as httpRequest, type IncomingMessage } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, paidTransaction } from "../support/gateway.ts";
import { printedTestKey, processEnv, startGatewayProcess, type StartedGatewayProcess } from "../support/process.ts";
import { wsClient, type ClosedSocket } from "../support/subscriptions.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { until } from "../support/wait.ts";

/**
 * SIGTERM drains the gateway (src/main.ts): /ready answers 503 at once while requests are still served for
 * SHUTDOWN_DRAIN_DELAY_MS (each closing its connection), then WebSocket clients are closed with 1001, the port
 * closes, a request in flight finishes with its answer, and the process exits 0 within SHUTDOWN_TIMEOUT_MS.
 * A job still running near the deadline goes back to the queue and the next instance runs it at once.
 */
// The window in which the test checks that requests are still served (a /ready poll and a request, each of which may
// take seconds on a busy machine), and the deadline, far enough beyond it for the request in flight to be finished.
const DRAIN_DELAY_MS = 10_000;
const TIMEOUT_MS = 40_000;
/** The gateway's own line when SHUTDOWN_TIMEOUT_MS cut the shutdown off (src/main.ts; it then exits 1). */
const CUT_OFF = /shutdown took longer than SHUTDOWN_TIMEOUT_MS/;

interface Answer {
  status: number;
  headers: IncomingMessage["headers"];
  body: string;
}

/** A plain node:http request on a connection of its own (no pool): answers status, headers and body. */
function get(url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { agent: false }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    })
      .on("error", reject)
      .end();
  });
}

/** A POST whose body arrives in two parts: in flight on the server from its headers until finish() sends the rest. */
function postInTwoParts(url: string, headers: Record<string, string>, body: string) {
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  let answered!: Promise<Answer>;
  const req = httpRequest(url, { method: "POST", agent: false, headers: { ...headers, "content-type": "application/json", "content-length": String(bytes.length) } });
  answered = new Promise((resolve, reject) => {
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on("error", reject);
  });
  req.flushHeaders();
  req.write(bytes.subarray(0, half));
  return {
    answered,
    finish() {
      req.end(bytes.subarray(half));
    },
  };
}

describe("SIGTERM drains the gateway", () => {
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  let apiKey: string;
  const running: StartedGatewayProcess[] = [];
  let env: Record<string, string>;

  const start = async (extra: Record<string, string> = {}) => {
    const gateway = await startGatewayProcess({ ...env, ...extra });
    running.push(gateway);
    return gateway;
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    receiver = await startWebhookReceiver();
    env = processEnv(database, {
      ALLOW_PRIVATE_URLS: "true",
      SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
      SHUTDOWN_TIMEOUT_MS: String(TIMEOUT_MS),
    });
  });

  afterEach(async () => {
    for (const p of running.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
      await p.exited;
    }
  });

  afterAll(async () => {
    await receiver?.close();
    await database?.drop();
  });

  it("/ready 503 at once, requests still served meanwhile, WebSockets closed with 1001, the in-flight request answered, exit 0", async () => {
    const gateway = await start();
    apiKey = await printedTestKey(gateway);
    expect((await get(`${gateway.url}/ready`)).status).toBe(200);

    // A live subscriber, listening (its first message says so).
    const closed: ClosedSocket[] = [];
    const client = wsClient(gateway.url, apiKey, (event) => closed.push(event));
    const messages: unknown[] = [];
    let completed = false;
    client.subscribe(
      { query: "subscription { transactionEvents(ready: true) { id } }" },
      { next: (m) => void messages.push(m), error: () => {}, complete: () => (completed = true) },
    );
    await until(() => messages.length, (n) => n >= 1);

    // A payment in flight: its headers are in, half its body.
    const inFlight = postInTwoParts(`${gateway.url}/api/transactions/initialize`, { "x-api-key": apiKey }, JSON.stringify({ amount: 4200, email: "drain@drain.test", description: "in flight at SIGTERM" }));
    // It reached the server once a request sent after it on another connection was answered.
    expect((await get(`${gateway.url}/health`)).status).toBe(200);

    const sigtermAt = Date.now();
    gateway.child.kill("SIGTERM");
    // "At once": while the drain delay still runs (the status request below is served, the socket still open).
    const ready = await until(() => get(`${gateway.url}/ready`), (r) => r.status === 503, DRAIN_DELAY_MS);
    expect(JSON.parse(ready.body)).toMatchObject({ status: "error", code: "service_unavailable", message: "Shutting down" });
    expect(ready.headers.connection).toBe("close");
    // Still serving during the drain delay, each answer closing its connection.
    const status = await new Promise<Answer>((resolve, reject) => {
      httpRequest(`${gateway.url}/v1/status`, { agent: false, headers: { "x-api-key": apiKey } }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      })
        .on("error", reject)
        .end();
    });
    expect(status.status, status.body).toBe(200);
    expect(status.headers.connection).toBe("close");
    expect(closed).toEqual([]);

    // After the delay: the subscriber's socket closes with 1001 (going away), not a completed subscription.
    await until(() => closed.length, (n) => n === 1, TIMEOUT_MS);
    expect(closed[0]!.code).toBe(1001);
    expect(completed).toBe(false);
    expect(Date.now() - sigtermAt).toBeGreaterThanOrEqual(DRAIN_DELAY_MS - 50);
    // The port is closed now: new connections are refused.
    await expect(get(`${gateway.url}/health`)).rejects.toThrow(/ECONNREFUSED/);
    expect(gateway.child.exitCode).toBeNull(); // still finishing the request in flight

    inFlight.finish();
    const answer = await inFlight.answered;
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ status: "success", reference: expect.any(String) });

    // Exit 0 with "shutdown complete": finished within SHUTDOWN_TIMEOUT_MS, which would have cut it off with exit 1.
    expect(await gateway.exited).toBe(0);
    expect(gateway.output()).toMatch(/shutdown complete/);
    expect(gateway.output()).not.toMatch(CUT_OFF);
    await client.dispose();

    // The acknowledged payment is there for the next instance.
    const next = await start();
    const verify = await apiClient(next.url, apiKey).get(`/api/transactions/verify/${JSON.parse(answer.body).reference}`);
    expect(verify.status, verify.text).toBe(200);
    expect(verify.body.transaction).toMatchObject({ amount: 4200 });
  });

  it("a job still running near SHUTDOWN_TIMEOUT_MS is released, and the next instance runs it at once (not after its lease)", async () => {
    // The receiver hangs on the first delivery: that delivery job is still running when the deadline nears.
    let hang = true;
    receiver.setResponder(() => (hang ? "hang" : 200));
    // Jobs still running a second before it are released; the rest of it is for closing, on a busy machine too.
    const SHORT_TIMEOUT_MS = 10_000;
    // A lease (WEBHOOK_TIMEOUT_MS + 5 s) far beyond the test: only a release lets another instance run the job within it.
    const WEBHOOK_TIMEOUT_MS = 20 * 60_000;
    const jobEnv = { SHUTDOWN_DRAIN_DELAY_MS: "0", SHUTDOWN_TIMEOUT_MS: String(SHORT_TIMEOUT_MS), WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS) };
    const gateway = await start(jobEnv);
    const api = apiClient(gateway.url, apiKey);
    const hook = await api.post("/v1/webhooks", { url: `${receiver.url}/drain`, events: ["transaction.completed"] });
    expect(hook.status, hook.text).toBe(201);
    const channel = await api.post("/api/payment-channels/create", { name: "Cards", provider: "sandbox" });
    expect(channel.status, channel.text).toBe(201);
    await paidTransaction(gateway.url, apiKey, { amount: 900, email: "job@drain.test", payment_channel_id: channel.body.channel.id });
    const first = await until(() => receiver.received.filter((r) => r.path === "/drain"), (r) => r.length === 1);

    gateway.child.kill("SIGTERM");
    // Exit 0, not cut off: the hanging job was released before the deadline, not waited for.
    expect(await gateway.exited).toBe(0);
    expect(gateway.output()).not.toMatch(CUT_OFF);
    expect(gateway.output()).toMatch(/releasing jobs still running/);

    hang = false;
    const claimedBy = Date.now();
    await start(jobEnv);
    const again = await until(() => receiver.received.filter((r) => r.path === "/drain"), (r) => r.length === 2, EVENTUALLY_MS);
    // The same event again (webhooks are at-least-once), well within the lease the dead claim had.
    expect(again[1]!.headers["webhook-id"]).toBe(first[0]!.headers["webhook-id"]);
    expect(Date.now() - claimedBy).toBeLessThan(WEBHOOK_TIMEOUT_MS);
  });
});
