import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, paidTransaction } from "../support/gateway.ts";
import { gatewayProcesses, printedTestKey, processEnv } from "../support/process.ts";
import { until } from "../support/wait.ts";

/**
 * Deliveries go out in batches, recorded after the whole batch is sent (issue 27). A gateway killed (SIGKILL) after
 * some deliveries of a batch were acknowledged but before the batch was recorded loses none: once the lease runs out
 * the restarted gateway sends every delivery of the batch again, with the same webhook-id, and records each once.
 */
describe("webhook batch across a gateway crash", () => {
  // Longer than the steps between the sends and the kill can take on a busy machine: the slow delivery must still be
  // in flight when the gateway dies (timed out first, its failure is recorded alone, and its retry is a second attempt).
  const WEBHOOK_TIMEOUT_MS = 10_000;
  /** What the gateway makes of JOB_LEASE_MS=1000: never less than the webhook timeout plus 5 s. */
  const LEASE_MS = WEBHOOK_TIMEOUT_MS + 5000;
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  let env: Record<string, string>;
  const processes = gatewayProcesses();

  beforeAll(async () => {
    database = await createTestDatabase();
    // The fast endpoints answer at once; the slow one holds its request, so the batch never finishes.
    receiver = await startWebhookReceiver({ respond: (req) => (req.path === "/slow" ? "hang" : 200) });
    env = processEnv(database, { WEBHOOK_ALLOW_PRIVATE_URLS: "true", WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS), JOB_LEASE_MS: "1000" });
  });

  afterAll(async () => {
    await processes.killAll();
    await receiver?.close();
    await database?.drop();
  });

  it("kill -9 with a batch half acknowledged: every delivery of it is sent again after the lease and recorded once", async () => {
    const first = await processes.start(env);
    const key = await printedTestKey(first);
    const api = apiClient(first.url, key);
    const paths = ["/fast-1", "/fast-2", "/fast-3", "/slow"];
    for (const path of paths) {
      const res = await api.post("/v1/webhooks", { url: `${receiver.url}${path}`, events: ["transaction.completed"] });
      expect(res.status, res.text).toBe(201);
    }
    // One event, four deliveries queued in one statement: one claim, one batch.
    await paidTransaction(first.url, key, { amount: 1000, email: "a@b.test" });
    const sent = await receiver.waitFor(4);
    const eventId = sent[0]!.headers["webhook-id"]!;
    expect(sent.map((r) => r.headers["webhook-id"])).toEqual([eventId, eventId, eventId, eventId]);

    // Three acknowledged, none recorded yet: the batch records its successes when all of it is done.
    const query = `query D($eventId: ID) { webhookDeliveries(eventId: $eventId) { status attempts lastStatusCode endpoint { url } } }`;
    const read = async (url: string) => {
      const res = await apiClient(url, key).post("/graphql", { query, variables: { eventId } });
      expect(res.body.errors, res.text).toBeUndefined();
      return res.body.data.webhookDeliveries as { status: string; attempts: number; lastStatusCode: number | null; endpoint: { url: string } }[];
    };
    expect((await read(first.url)).map((d) => d.status)).toEqual(["pending", "pending", "pending", "pending"]);
    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    receiver.setResponder(() => 200);

    const second = await processes.start(env);
    const again = (await receiver.waitFor(8, LEASE_MS + 15_000)).slice(4);
    expect(again.map((r) => r.path).sort()).toEqual([...paths].sort());
    expect(again.every((r) => r.headers["webhook-id"] === eventId)).toBe(true);
    // Not before the dead instance's lease ran out.
    expect(Math.min(...again.map((r) => r.receivedAt)) - Math.max(...sent.map((r) => r.receivedAt))).toBeGreaterThanOrEqual(LEASE_MS - 1000);

    const settled = await until(
      () => read(second.url),
      (ds) => ds.length === 4 && ds.every((d) => d.status === "succeeded"),
      15_000,
    );
    // The killed batch recorded nothing; the attempt after the restart is the first recorded.
    for (const d of settled) expect(d).toMatchObject({ status: "succeeded", attempts: 1, lastStatusCode: 200 });
    expect(receiver.received).toHaveLength(8);
  });
});
