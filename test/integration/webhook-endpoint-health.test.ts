import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/** Endpoint health: disabled after 5 days of failures, re-enabled by the merchant; the delivery-time address guard. */
let gw: TestGateway;
let receiver: WebhookReceiver;
let api: ReturnType<typeof apiClient>;
let testKey: string;
let merchantId: number;
const prisma = () => gw.gateway.db.prisma;


/** A completed sandbox card payment; returns its reference. */
function pay(): Promise<string> {
  return paidTransaction(gw.url, testKey, { amount: 1000, email: "payer@example.test" });
}

async function createEndpoint(url: string): Promise<number> {
  const res = await api.post("/v1/webhooks", { url });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

async function endpointsView() {
  const res = await api.post("/graphql", { query: "{ webhookEndpoints { databaseId enabled disabledReason failingSince } }" });
  return res.body.data.webhookEndpoints as { databaseId: number; enabled: boolean; disabledReason: string | null; failingSince: string | null }[];
}

beforeAll(async () => {
  receiver = await startWebhookReceiver({ respond: () => 500 });
  gw = await startTestGateway({
    // A hanging endpoint is given up on after WEBHOOK_TIMEOUT_MS: far beyond the test's waits, so a fast endpoint served
    // within them was not waiting behind it, however busy the machine.
    env: { WEBHOOK_ALLOW_PRIVATE_URLS: "true", WEBHOOK_RETRY_SCHEDULE: "0,50ms,50ms", JOB_POLL_INTERVAL_MS: "100", RATE_LIMIT_ENABLED: "false", WEBHOOK_TIMEOUT_MS: "300000" },
  });
  ({ testKey, id: merchantId } = await createSandboxMerchant(gw));
  api = apiClient(gw.url, testKey);
});

afterAll(async () => {
  await gw?.close();
  await receiver?.close();
});

describe("endpoint health", () => {
  it("records when failures began, disables an endpoint failing for 5 days, and says why", async () => {
    const owner = await gw.createUser(merchantId, "owner");
    const id = await createEndpoint(`${receiver.url}/failing`);
    await pay();
    const first = await until(endpointsView, (e) => e.find((x) => x.databaseId === id)?.failingSince != null);
    expect(first.find((x) => x.databaseId === id)).toMatchObject({ enabled: true, disabledReason: null });
    // The first delivery's retries run out before the clock moves: a retry landing after it would be
    // the one to disable the endpoint, and the second payment would then queue nothing.
    await until(() => prisma().webhookDelivery.findMany({ where: { endpointId: id } }), (d) => d.length === 1 && d[0]!.status === "failed");

    // Five days of failures later (the clock is moved back rather than waited for).
    await prisma().webhookEndpoint.update({ where: { id }, data: { failingSince: new Date(Date.now() - 5 * 24 * 3600_000 - 60_000) } });
    const before = receiver.received.length;
    await pay();
    const disabled = await until(endpointsView, (e) => e.find((x) => x.databaseId === id)?.enabled === false);
    expect(disabled.find((x) => x.databaseId === id)!.disabledReason).toMatch(/failed for 5 days/);
    expect((await api.get("/v1/webhooks")).body.data.find((e: { id: number }) => e.id === id)).toMatchObject({ enabled: false, disabled_reason: expect.stringMatching(/5 days/) });
    const failed = await until(
      () => prisma().webhookDelivery.findMany({ where: { endpointId: id }, orderBy: { id: "desc" }, take: 1 }),
      (d) => d[0]?.status === "failed",
    );
    expect(failed[0]!.attempts).toBe(1);
    // The team hears of it once: a notice to the owner (kept in the test inbox: no SMTP server here).
    const notices = await until(
      () => prisma().mailMessage.findMany({ where: { merchantId, kind: "webhook_disabled" } }),
      (rows) => rows.length > 0 && rows.every((r) => r.status === "kept"),
    );
    expect(notices).toHaveLength(1);
    expect(notices[0]!.userId).toBe(owner.id);
    expect(notices[0]!.textBody).toContain(`${receiver.url}/failing`);

    // Disabled: new events are not queued for it at all.
    await until(async () => receiver.received.length, (n) => n >= before + 1);
    const afterDisable = receiver.received.length;
    const queuedBefore = await prisma().webhookDelivery.count({ where: { endpointId: id } });
    await pay();
    await expectNothingMoreWithin(300, async () => [await prisma().webhookDelivery.count({ where: { endpointId: id } }), receiver.received.length], "nothing queued or sent to a disabled endpoint");
    expect(await prisma().webhookDelivery.count({ where: { endpointId: id } })).toBe(queuedBefore);
    expect(receiver.received.length).toBe(afterDisable);

    // Re-enabled by the merchant, with a working receiver: delivered, and the failure record is clear.
    receiver.setResponder(() => 200);
    const res = await api.post("/graphql", {
      query: "mutation($input: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(input: $input) { __typename ... on WebhookEndpoint { enabled disabledReason failingSince } } }",
      variables: { input: { id, enabled: true } },
    });
    expect(res.body.data.updateWebhookEndpoint).toEqual({ __typename: "WebhookEndpoint", enabled: true, disabledReason: null, failingSince: null });
    const reference = await pay();
    const delivered = await until(async () => receiver.received.filter((r) => r.json?.data?.reference === reference), (r) => r.length === 1);
    expect(delivered[0]!.headers["webhook-id"]).toMatch(/^\d+$/);
    await prisma().webhookEndpoint.delete({ where: { id } });
  });

  it("a success ends the endpoint's run of failures", async () => {
    receiver.setResponder(() => 500);
    const id = await createEndpoint(`${receiver.url}/flaky`);
    await pay();
    await until(endpointsView, (e) => e.find((x) => x.databaseId === id)?.failingSince != null);
    receiver.setResponder(() => 200);
    await until(endpointsView, (e) => e.find((x) => x.databaseId === id)?.failingSince === null);
    await prisma().webhookEndpoint.delete({ where: { id } });
  });

  it("a hanging endpoint holds at most 5 deliveries at once and delays no other endpoint", async () => {
    const slow = await startWebhookReceiver({ respond: () => "hang" });
    receiver.setResponder(() => 200);
    try {
      const slowId = await createEndpoint(`${slow.url}/slow`);
      const fastId = await createEndpoint(`${receiver.url}/fast`);
      const references: string[] = [];
      for (let i = 0; i < 8; i++) references.push(await pay());
      const fast = await until(async () => receiver.received.filter((r) => r.path === "/fast"), (r) => r.length === 8);
      expect(fast.map((r) => r.json.data.reference).sort()).toEqual([...references].sort());
      // Meanwhile the slow endpoint has exactly its bound in flight; the rest wait their turn.
      await until(async () => slow.received.length, (n) => n >= 5);
      await expectNothingMoreWithin(200, () => slow.received.length, "no sixth delivery in flight");
      expect(slow.received).toHaveLength(5);
      await prisma().webhookEndpoint.deleteMany({ where: { id: { in: [slowId, fastId] } } });
    } finally {
      await slow.close();
    }
  });

  it("checks the address it connects to: a private address is refused at delivery unless allowed", async () => {
    // A gateway that does not allow private URLs, given (as by DNS rebinding or a changed policy) an endpoint on loopback.
    const strict = await startTestGateway({ env: { WEBHOOK_RETRY_SCHEDULE: "0", RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await strict.createMerchant();
      const strictApi = apiClient(strict.url, merchant.testKey);
      const refused = await strictApi.post("/v1/webhooks", { url: `${receiver.url}/strict` });
      expect(refused.status).toBe(400);
      expect(refused.body.message).toMatch(/^url: /);
      const endpoint = await strict.gateway.services.webhooks.createEndpoint({ merchantId: merchant.id, mode: "test", role: "owner" as const, userId: null, keyId: null, keyPrefix: null }, { url: "https://93.184.216.34/hooks" });
      await strict.gateway.db.prisma.webhookEndpoint.update({ where: { id: endpoint.endpoint.id }, data: { url: `${receiver.url}/strict` } });
      expect((await strictApi.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
      const init = await strictApi.post("/api/transactions/initialize", { amount: 500, email: "p@example.test" });
      await strictApi.post(`/payment/checkout/${init.body.reference}/pay`, { card_number: "4242424242424242", expiry_month: 12, expiry_year: 2040, cvc: "123" });
      const [delivery] = await until(
        () => strict.gateway.db.prisma.webhookDelivery.findMany({ where: { endpointId: endpoint.endpoint.id } }),
        (d) => d[0]?.status === "failed",
      );
      expect(delivery).toMatchObject({ lastError: "address not allowed", lastStatusCode: null });
      expect(receiver.received.filter((r) => r.path === "/strict")).toHaveLength(0);
    } finally {
      await strict.close();
    }
  });
});
