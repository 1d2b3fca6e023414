import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * "Allow local URLs (test mode only)" on one webhook endpoint, on a gateway without ALLOW_PRIVATE_URLS: that endpoint
 * may be on loopback (saved and delivered to), no other is, and live mode refuses the switch.
 */
const LOCAL_HINT = 'tick "Allow local URLs (test mode only)" on the endpoint (allow_local_urls: true) to allow it in test mode';
const ENDPOINT_FIELDS = "databaseId url allowLocalUrls";
const CREATE = `mutation ($input: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $input) { __typename ... on Error { message } ... on ValidationError { field } ... on WebhookEndpointWithSecret { endpoint { ${ENDPOINT_FIELDS} } } } }`;
const UPDATE = `mutation ($input: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(input: $input) { __typename ... on Error { message } ... on ValidationError { field } ... on WebhookEndpoint { ${ENDPOINT_FIELDS} } } }`;

describe("webhook endpoints with allow_local_urls", () => {
  let gw: TestGateway;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { JOB_POLL_INTERVAL_MS: "100", WEBHOOK_RETRY_SCHEDULE: "200,200" } });
    receiver = await startWebhookReceiver();
  });

  afterAll(async () => {
    await receiver?.close();
    await gw?.close();
  });

  it("lets a test-mode endpoint on loopback be saved and delivered to, that endpoint only; live mode refuses the switch", async () => {
    const merchant = await createSandboxMerchant(gw);
    const api = apiClient(gw.url, merchant.testKey);

    // Without the switch the guard refuses loopback and says where the switch is.
    const plain = await api.post("/v1/webhooks", { url: `${receiver.url}/plain` });
    expect(plain.status, plain.text).toBe(400);
    expect(plain.body.message).toBe(`url: must not point to a private, loopback or reserved address; ${LOCAL_HINT}`);

    const local = await api.post("/v1/webhooks", { url: `${receiver.url}/local`, allow_local_urls: true, events: ["transaction.completed"] });
    expect(local.status, local.text).toBe(201);
    expect(local.body.data).toMatchObject({ url: `${receiver.url}/local`, allow_local_urls: true });
    expect((await api.get("/v1/webhooks")).body.data).toEqual([expect.objectContaining({ id: local.body.data.id, allow_local_urls: true })]);

    // The switch does not open private addresses to other endpoints of the merchant.
    const other = await api.post("/v1/webhooks", { url: "http://10.1.2.3/hooks" });
    expect(other.status).toBe(400);

    const reference = await paidTransaction(gw.url, merchant.testKey, { amount: 1500, email: "local@example.com" });
    const delivered = await until(
      () => receiver.received.find((d) => d.path === "/local" && d.json?.data?.reference === reference),
      (found) => found !== undefined,
      20_000,
    );
    expect(delivered!.json.type).toBe("transaction.completed");

    // At delivery time the guard follows the endpoint's own flag: one saved local and then without the flag is not called.
    await gw.gateway.db.prisma.webhookEndpoint.update({ where: { id: local.body.data.id }, data: { allowLocalUrls: false } });
    const second = await paidTransaction(gw.url, merchant.testKey, { amount: 1600, email: "local@example.com" });
    const failedDelivery = await until(
      () => gw.gateway.db.prisma.webhookDelivery.findFirst({ where: { endpointId: local.body.data.id, status: "failed" } }),
      (found) => found !== null,
      20_000,
    );
    expect(failedDelivery!.lastError).toMatch(/address not allowed|private|loopback/);
    expect(receiver.received.some((d) => d.json?.data?.reference === second)).toBe(false);

    // GraphQL: the switch on an update; turning it off re-checks the URL it keeps.
    const gql = (query: string, input: Record<string, unknown>, key = merchant.testKey) => apiClient(gw.url, key).post("/graphql", { query, variables: { input } });
    const created = (await gql(CREATE, { url: "http://93.184.215.14/hooks" })).body.data.createWebhookEndpoint;
    expect(created.endpoint).toMatchObject({ allowLocalUrls: false });
    const id = created.endpoint.databaseId;
    const moved = (await gql(UPDATE, { id, url: `${receiver.url}/moved`, allowLocalUrls: true })).body.data.updateWebhookEndpoint;
    expect(moved).toMatchObject({ __typename: "WebhookEndpoint", url: `${receiver.url}/moved`, allowLocalUrls: true });
    const off = (await gql(UPDATE, { id, allowLocalUrls: false })).body.data.updateWebhookEndpoint;
    expect(off).toMatchObject({ __typename: "ValidationError", field: "url" });
    expect(off.message).toContain(LOCAL_HINT);

    // Live mode: refused with a clear error, whatever the URL, over REST and GraphQL.
    const live = await apiClient(gw.url, merchant.liveKey).post("/v1/webhooks", { url: "https://93.184.215.14/hooks", allow_local_urls: true });
    expect(live.status, live.text).toBe(400);
    expect(live.body).toMatchObject({ code: "validation_failed", message: "allow_local_urls: local URLs are allowed in test mode only: a live endpoint must be a public https URL" });
    const liveGql = (await gql(CREATE, { url: "https://127.0.0.1/hooks", allowLocalUrls: true }, merchant.liveKey)).body.data.createWebhookEndpoint;
    expect(liveGql).toMatchObject({ __typename: "ValidationError", field: "allow_local_urls" });
    expect(await gw.gateway.db.prisma.webhookEndpoint.count({ where: { merchantId: merchant.id, mode: "live" } })).toBe(0);
  });
});
