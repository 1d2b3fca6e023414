import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient as plainApiClient, startTwoInstances, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";
import { inParallel } from "../support/load.ts";
import { retrying } from "../support/retry.ts";

/** Requests retried on 503 + Retry-After as a client does: many at once can find the database busy on a loaded machine. */
const apiClient = (url: string, key?: string) => retrying(plainApiClient(url, key));

/** Two gateway instances on one PostgreSQL, both working the job queue: each event reaches the endpoint once. */
describe("webhook delivery across two instances", () => {
  const SUCCESS_CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: 2040, cvc: "123" };
  let a: TestGateway;
  let b: TestGateway;
  let receiver: WebhookReceiver;
  let apiA: ReturnType<typeof apiClient>;
  let apiB: ReturnType<typeof apiClient>;
  let secret: string;
  /** 2xx answers per webhook-id; every request is answered 200, so any second request is a duplicate. */
  const answered = new Map<string, number>();

  beforeAll(async () => {
    receiver = await startWebhookReceiver({
      respond: (req) => {
        const id = req.headers["webhook-id"]!;
        answered.set(id, (answered.get(id) ?? 0) + 1);
        return 200;
      },
    });
    const env = {
      WEBHOOK_ALLOW_PRIVATE_URLS: "true",
      WEBHOOK_RETRY_SCHEDULE: "0,200ms,200ms,200ms",
      JOB_POLL_INTERVAL_MS: "100",
      RATE_LIMIT_ENABLED: "false",
    };
    [a, b] = await startTwoInstances({ env });
    const merchant = await a.createMerchant();
    apiA = apiClient(a.url, merchant.testKey);
    apiB = apiClient(b.url, merchant.testKey);
    expect((await apiA.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
    const endpoint = await apiB.post("/v1/webhooks", { url: `${receiver.url}/hooks`, events: ["transaction.completed"] });
    expect(endpoint.status, endpoint.text).toBe(201);
    secret = endpoint.body.data.secret;
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
    await receiver?.close();
  });

  it("100 payments made through both instances' APIs: each event id arrives exactly once, answered 200 the first time", async () => {
    const total = 100;
    // Each instance runs the payments made through it (its own nudge) and polls for the other's.
    const references = await inParallel(total, 10, async (index) => {
      const api = index % 2 ? apiA : apiB;
      const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "a@b.test" });
      expect(init.status, init.text).toBe(200);
      const paid = await apiClient(api === apiA ? a.url : b.url).post(`/payment/checkout/${init.body.reference}/pay`, SUCCESS_CARD);
      expect(paid.status, paid.text).toBe(200);
      return init.body.reference as string;
    });

    const received = await receiver.waitFor(total, 30_000);
    const duplicated = (list: typeof received) => [...new Set(list.map((d) => d.headers["webhook-id"]))].filter((id) => list.filter((d) => d.headers["webhook-id"] === id).length > 1);
    expect(duplicated(received), "webhook-ids delivered more than once").toEqual([]);
    expect(new Set(received.map((d) => d.json.data.reference))).toEqual(new Set(references));
    for (const delivery of received) expect(new Webhook(secret).verify(delivery.body, delivery.headers)).toEqual(delivery.json);

    // Every delivery is recorded as succeeded on its first attempt; then nothing else arrives.
    const prisma = a.gateway.db.prisma;
    await waitUntil(async () => (await prisma.webhookDelivery.count({ where: { status: { not: "succeeded" } } })) === 0, "every delivery to succeed");
    expect(await prisma.webhookDelivery.count({ where: { status: "succeeded", attempts: 1 } })).toBe(total);
    expect(await prisma.job.count({ where: { kind: "webhook.deliver" } })).toBe(0);
    // A second claim of a job would show up within a couple of polls.
    await expectNothingMoreWithin(500, () => receiver.received.length, "no second claim of a delivery job");
    expect(receiver.received).toHaveLength(total);
    expect(answered.size).toBe(total);
    expect([...answered.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  });
});
