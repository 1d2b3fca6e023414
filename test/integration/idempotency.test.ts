import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprintKeyFrom, requestFingerprint } from "../../src/idempotency/hooks.ts";
import { IDEMPOTENCY_KEY_GRACE_MS } from "../../src/modules/retention/service.ts";
import { graphql } from "../gql/index.ts";
import { apiClient, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";

const IdempotentCreateCustomer = graphql(`
  mutation IdempotentCreateCustomer($input: CreateCustomerInput!) {
    createCustomer(input: $input) {
      __typename
      ... on Customer {
        databaseId
        email
      }
      ... on Error {
        code
        message
      }
    }
  }
`);

const IdempotentViewer = graphql(`
  query IdempotentViewer {
    viewer {
      name
    }
  }
`);

const CREATE_CHANNEL = "/api/payment-channels/create";
const RATE_LIMIT = 30;

describe("Idempotency-Key on POST", () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT) } });
  });
  afterAll(() => gw?.close());

  const prisma = () => gw.gateway.db.prisma;
  const newKey = () => `key-${randomUUID()}`;
  const channelBody = (name = "Sandbox") => ({ name, provider: "sandbox" });
  const createChannel = (apiKey: string, body: unknown, idempotencyKey?: string) =>
    apiClient(gw.url, apiKey).post(CREATE_CHANNEL, body, idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey });
  const channelCount = (merchantId: number) => prisma().paymentChannel.count({ where: { merchantId } });
  const records = (key: string) => prisma().idempotencyKey.findMany({ where: { key } });
  const replayed = (res: HttpResult) => res.headers.get("idempotent-replayed");

  it("replays the first response for a retry with the same key, and executes once", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    const first = await createChannel(merchant.testKey, channelBody(), key);
    expect(first.status).toBe(201);
    expect(replayed(first)).toBeNull();

    const retry = await createChannel(merchant.testKey, channelBody(), key);
    expect(retry.status).toBe(201);
    expect(replayed(retry)).toBe("true");
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get("content-type")).toBe(first.headers.get("content-type"));
    expect(await channelCount(merchant.id)).toBe(1);

    // The same body without a key is a new request.
    expect((await createChannel(merchant.testKey, channelBody())).status).toBe(201);
    expect(await channelCount(merchant.id)).toBe(2);
  });

  it("treats a body with its fields in another order as the same request", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    await createChannel(merchant.testKey, { name: "Ordered", provider: "sandbox" }, key);
    const retry = await createChannel(merchant.testKey, { provider: "sandbox", name: "Ordered" }, key);
    expect(replayed(retry)).toBe("true");
    expect(await channelCount(merchant.id)).toBe(1);
  });

  it("replays GraphQL mutations sent over HTTP POST", async () => {
    const merchant = await gw.createMerchant();
    const client = apiClient(gw.url, merchant.testKey);
    const key = newKey();
    const input = { email: `${randomUUID()}@customers.test` };
    const first = await client.graphql(IdempotentCreateCustomer, { input }, { "idempotency-key": key });
    expect(first.status).toBe(200);
    expect(first.body.data?.createCustomer.__typename).toBe("Customer");
    const retry = await client.graphql(IdempotentCreateCustomer, { input }, { "idempotency-key": key });
    expect(replayed(retry)).toBe("true");
    expect(retry.text).toBe(first.text);
    expect(await prisma().customer.count({ where: { merchantId: merchant.id } })).toBe(1);
  });

  it("does not key GraphQL queries: the header is ignored and nothing is stored", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    for (let i = 0; i < 2; i++) {
      const res = await apiClient(gw.url, merchant.testKey).graphql(IdempotentViewer, undefined, { "idempotency-key": key });
      expect(res.status).toBe(200);
      expect(replayed(res)).toBeNull();
    }
    expect(await records(key)).toEqual([]);
  });

  it("refuses the same key with a different request (body or path) with 422", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    expect((await createChannel(merchant.testKey, channelBody("First"), key)).status).toBe(201);

    const otherBody = await createChannel(merchant.testKey, channelBody("Second"), key);
    expect(otherBody.status).toBe(422);
    expect(otherBody.body).toMatchObject({ status: "error", code: "idempotency_key_reused" });
    expect(otherBody.body.message).toMatch(/Idempotency-Key .*different request/);

    const otherPath = await apiClient(gw.url, merchant.testKey).post(
      "/api/customers/create",
      { email: "someone@customers.test" },
      { "idempotency-key": key },
    );
    expect(otherPath.status).toBe(422);
    expect(otherPath.body.code).toBe("idempotency_key_reused");
    expect(await channelCount(merchant.id)).toBe(1);
    expect(await prisma().customer.count({ where: { merchantId: merchant.id } })).toBe(0);
  });

  it("answers 409 while a request with the same key is still in flight", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    const body = channelBody();
    // What another instance's claim looks like while its request runs (the same key sent by the same API key).
    const apiKey = await prisma().apiKey.findFirstOrThrow({ where: { merchantId: merchant.id, mode: "test" } });
    await prisma().idempotencyKey.create({
      data: {
        merchantId: merchant.id,
        mode: "test",
        principal: `key:${apiKey.id}`,
        key,
        requestFingerprint: requestFingerprint(fingerprintKeyFrom(Buffer.from(gw.database.encryptionKeyHex, "hex")), "POST", CREATE_CHANNEL, body),
        expiresAt: new Date(Date.now() + 3_600_000),
        lockedUntil: new Date(Date.now() + 60_000),
      },
    });
    const res = await createChannel(merchant.testKey, body, key);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ status: "error", message: "A request with this Idempotency-Key is in progress", code: "idempotency_key_in_use" });
    expect(await channelCount(merchant.id)).toBe(0);
  });

  it("lets exactly one of several simultaneous requests with one key execute", async () => {
    const merchant = await gw.createMerchant();
    for (let round = 0; round < 3; round++) {
      const key = newKey();
      const results = await Promise.all(Array.from({ length: 4 }, () => createChannel(merchant.testKey, channelBody(`Race ${round}`), key)));
      const executed = results.filter((r) => r.status === 201 && replayed(r) === null);
      expect(executed).toHaveLength(1);
      for (const other of results.filter((r) => r !== executed[0])) {
        if (other.status === 409) expect(other.body.code).toBe("idempotency_key_in_use");
        else expect([other.status, replayed(other), other.text]).toEqual([201, "true", executed[0]!.text]);
      }
      expect(await channelCount(merchant.id)).toBe(round + 1);
    }
  });

  it("treats an expired key as new, and prunes expired records", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    expect((await createChannel(merchant.testKey, channelBody("Yesterday"), key)).status).toBe(201);
    const [record] = await records(key);
    // Records live 24 h.
    const lifetimeHours = (record!.expiresAt.getTime() - record!.createdAt.getTime()) / 3_600_000;
    expect(lifetimeHours).toBeCloseTo(24, 5);

    // 24 h later (simulated): the key is free again, even for a different request.
    await prisma().idempotencyKey.updateMany({ where: { key }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const again = await createChannel(merchant.testKey, channelBody("Today"), key);
    expect(again.status).toBe(201);
    expect(replayed(again)).toBeNull();
    expect(again.body.channel.name).toBe("Today");
    expect(await channelCount(merchant.id)).toBe(2);
    expect(replayed(await createChannel(merchant.testKey, channelBody("Today"), key))).toBe("true");

    // The retention job keeps an expired record a day longer, then deletes it.
    await prisma().idempotencyKey.updateMany({ where: { key }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await gw.gateway.services.retention.runNow();
    expect(await records(key)).toHaveLength(1);
    await prisma().idempotencyKey.updateMany({ where: { key }, data: { expiresAt: new Date(Date.now() - IDEMPOTENCY_KEY_GRACE_MS - 1000) } });
    expect((await gw.gateway.services.retention.runNow()).deleted.idempotency_keys).toBeGreaterThanOrEqual(1);
    expect(await records(key)).toEqual([]);
  });

  it("does not store validation failures, so a corrected retry with the same key runs (REST)", async () => {
    const merchant = await gw.createMerchant();
    const key = newKey();
    const invalid = await createChannel(merchant.testKey, { name: "", provider: "sandbox" }, key);
    expect(invalid.status).toBe(400);
    expect(invalid.body.code).toBe("validation_failed");
    expect(await records(key)).toEqual([]);

    const malformed = await apiClient(gw.url, merchant.testKey).post(CREATE_CHANNEL, '{"name": "x",', { "idempotency-key": key });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe("malformed_json");

    const corrected = await createChannel(merchant.testKey, channelBody("Corrected"), key);
    expect(corrected.status).toBe(201);
    expect(replayed(corrected)).toBeNull();
    expect(await channelCount(merchant.id)).toBe(1);
  });

  it("does not store GraphQL requests refused before execution or answered with a ValidationError", async () => {
    const merchant = await gw.createMerchant();
    const client = apiClient(gw.url, merchant.testKey);
    const key = newKey();
    const header = { "idempotency-key": key };

    const invalid = await client.graphql(IdempotentCreateCustomer, { input: { email: "not-an-email" } }, header);
    expect(invalid.body.data?.createCustomer).toMatchObject({ __typename: "ValidationError", code: "validation_failed" });
    const syntax = await client.post("/graphql", { query: "mutation { createCustomer(" }, header);
    expect(syntax.body.errors[0].message).toMatch(/Syntax Error/);
    const badVariables = await client.graphql(IdempotentCreateCustomer, { input: {} as { email: string } }, header);
    expect(badVariables.body.data).toBeUndefined();
    expect(await records(key)).toEqual([]);

    const corrected = await client.graphql(IdempotentCreateCustomer, { input: { email: `${randomUUID()}@customers.test` } }, header);
    expect(corrected.body.data?.createCustomer.__typename).toBe("Customer");
    expect(replayed(corrected)).toBeNull();
  });

  it("does not store 429s: rate limiting runs first", async () => {
    const merchant = await gw.createMerchant();
    const client = apiClient(gw.url, merchant.testKey);
    for (let batch = 0; batch < RATE_LIMIT / 10; batch++) {
      await Promise.all(Array.from({ length: 10 }, () => client.get("/v1/status")));
    }
    const key = newKey();
    const limited = await createChannel(merchant.testKey, channelBody(), key);
    expect(limited.status).toBe(429);
    expect(await records(key)).toEqual([]);
    expect(await channelCount(merchant.id)).toBe(0);
  });

  it("refuses a key longer than 255 characters with a 400 naming Idempotency-Key", async () => {
    const merchant = await gw.createMerchant();
    const tooLong = await createChannel(merchant.testKey, channelBody(), "k".repeat(256));
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toEqual({ status: "error", message: "Idempotency-Key: must be at most 255 characters", code: "validation_failed", errors: [{ field: "Idempotency-Key", message: "must be at most 255 characters" }] });
    expect(await channelCount(merchant.id)).toBe(0);

    const longest = "k".repeat(255);
    expect((await createChannel(merchant.testKey, channelBody(), longest)).status).toBe(201);
    expect(replayed(await createChannel(merchant.testKey, channelBody(), longest))).toBe("true");
  });

  it("scopes keys per merchant and mode", async () => {
    const a: TestMerchant = await gw.createMerchant();
    const b: TestMerchant = await gw.createMerchant();
    const key = newKey();
    // A live key may not create channels (issue 35: live credentials are a signed-in owner's), so in live mode the
    // same key goes with another POST a live key may make: were keys not scoped by mode it would be replayed or refused.
    const results = [
      await createChannel(a.testKey, channelBody("A test"), key),
      await apiClient(gw.url, a.liveKey).post("/api/customers/create", { email: "a-live@example.com" }, { "idempotency-key": key }),
      await createChannel(b.testKey, channelBody("B test"), key),
    ];
    expect(results.map((r) => [r.status, replayed(r)])).toEqual([
      [201, null],
      [201, null],
      [201, null],
    ]);
    expect([results[0]!.body.channel.name, results[1]!.body.customer.email, results[2]!.body.channel.name]).toEqual(["A test", "a-live@example.com", "B test"]);
    expect(await records(key)).toHaveLength(3);
  });
});

describe("Idempotency-Key and a provider's refusal", () => {
  let gw: TestGateway;

  beforeAll(async () => {
    // Daraja unreachable: a closed loopback port.
    gw = await startTestGateway({ env: { MPESA_BASE_URL: "http://127.0.0.1:1", RATE_LIMIT_ENABLED: "false" } });
  });
  afterAll(() => gw?.close());

  it("an STK push Daraja never took (503 provider_unavailable) is the key's recorded answer: the retry replays it and pushes nothing", async () => {
    const merchant = await gw.createMerchant();
    const api = apiClient(gw.url, merchant.testKey);
    const channel = await api.post(CREATE_CHANNEL, {
      name: "M-Pesa",
      provider: "mpesa",
      config: { consumer_key: "key", consumer_secret: "secret", shortcode: "174379", passkey: "passkey", environment: "sandbox", transaction_type: "paybill" },
    });
    expect(channel.status, channel.text).toBe(201);
    const key = randomUUID();
    const body = { amount: 5000, phone_number: "254708374149", reference: "ORDER-1", payment_channel_id: channel.body.channel.id };
    const first = await api.post("/v1/collections/stk", body, { "idempotency-key": key });
    expect(first.status, first.text).toBe(503);
    expect(first.body.code).toBe("provider_unavailable");
    const again = await api.post("/v1/collections/stk", body, { "idempotency-key": key });
    expect(again.status).toBe(503);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    // One payment, failed with the refusal: the retry did not push again.
    const rows = await gw.gateway.db.prisma.transaction.findMany({ where: { merchantId: merchant.id } });
    expect(rows.map((t) => t.status)).toEqual(["failed"]);
  });
});
