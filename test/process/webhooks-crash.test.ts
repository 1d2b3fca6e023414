import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, paidTransaction } from "../support/gateway.ts";
import { gatewayProcesses, printedTestKey, processEnv } from "../support/process.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * A gateway process killed (SIGKILL) while a webhook is in flight: the delivery job is durable, so once
 * its lease runs out the restarted gateway sends the same event again, and only until it is acknowledged.
 */
describe("webhook delivery across a gateway crash", () => {
  // Long enough that the kill always comes first: the test kills the gateway once the receiver holds the request, and
  // on a busy machine that took more than 2 s once, so the gateway had recorded a timeout (attempt 1) before it died.
  const WEBHOOK_TIMEOUT_MS = 10_000;
  /** What the gateway makes of JOB_LEASE_MS=1000: never less than the webhook timeout plus 5 s. */
  const LEASE_MS = WEBHOOK_TIMEOUT_MS + 5000;
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  let env: Record<string, string>;
  const processes = gatewayProcesses();

  const start = () => processes.start(env);

  beforeAll(async () => {
    database = await createTestDatabase();
    receiver = await startWebhookReceiver({ respond: () => "hang" });
    env = processEnv(database, {
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
      JOB_LEASE_MS: "1000",
    });
  });

  afterAll(async () => {
    await processes.killAll();
    await receiver?.close();
    await database?.drop();
  });

  it("a delivery cut off by kill -9 is sent again after restart with the same webhook-id, and only once acknowledged", async () => {
    const first = await start();
    const key = await printedTestKey(first);
    const api = apiClient(first.url, key);
    const endpoint = await api.post("/v1/webhooks", { url: `${receiver.url}/crash`, events: ["transaction.completed"] });
    expect(endpoint.status, endpoint.text).toBe(201);
    const secret: string = endpoint.body.data.secret;

    // The demo merchant's default channel is a sandbox one.
    const reference = await paidTransaction(first.url, key, { amount: 1000, email: "a@b.test" });

    // The receiver holds the request open; the gateway dies before its WEBHOOK_TIMEOUT_MS could record anything.
    const [hung] = await receiver.waitFor(1);
    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    expect(hung!.json).toMatchObject({ type: "transaction.completed", data: { reference } });
    receiver.setResponder(() => 200);

    const second = await start();
    expect(second.output()).not.toMatch(/Test API key/);
    const [, again] = await receiver.waitFor(2, LEASE_MS + 15_000);
    expect(again!.headers["webhook-id"]).toBe(hung!.headers["webhook-id"]);
    expect(again!.body).toBe(hung!.body);
    expect(new Webhook(secret).verify(again!.body, again!.headers)).toEqual(hung!.json);
    // Not before the dead instance's lease ran out: it was never handed over early.
    expect(again!.receivedAt - hung!.receivedAt).toBeGreaterThanOrEqual(LEASE_MS - 500);

    // The killed attempt left no trace; the one after the restart is the first recorded, and it succeeded.
    const api2 = apiClient(second.url, key);
    const query = `query D($eventId: ID) { webhookDeliveries(eventId: $eventId) { eventId status attempts lastStatusCode nextAttemptAt } }`;
    const [delivery] = await until(
      async () => {
        const res = await api2.post("/graphql", { query, variables: { eventId: hung!.headers["webhook-id"] } });
        expect(res.body.errors, res.text).toBeUndefined();
        return res.body.data.webhookDeliveries as any[];
      },
      (deliveries) => deliveries[0]?.status === "succeeded",
    );
    expect(delivery).toEqual({ eventId: hung!.headers["webhook-id"], status: "succeeded", attempts: 1, lastStatusCode: 200, nextAttemptAt: null });

    // Acknowledged means done: not even a lease expiring later brings it back.
    await expectNothingMoreWithin(LEASE_MS + 500, () => receiver.received.length, "no delivery after the acknowledged one");
    expect(receiver.received).toHaveLength(2);
  });
});
