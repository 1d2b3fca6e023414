import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * Initialize resolves its channel (the one named, or the merchant's default) and the merchant's currency once a
 * second per instance (src/modules/channels/service.ts, RecentChannels): a change made through the same instance is
 * seen by the next payment, one made through another instance within the second (plus the time of a request).
 */
const PAYMENT_CHANNEL_AND_CURRENCY = /FROM merchants m\s+LEFT JOIN LATERAL/;

/**
 * A change through the other instance shows once the second (RECENT_CHANNEL_TTL_MS) has passed, plus a request or
 * two; on a busy machine one request may take a second or more, hence the margin. A cache kept as long as the API
 * keys' (30 s) or until a restart still fails.
 */
const SEEN_WITHIN_MS = 10_000;
/** How long an instance keeps a resolution (RECENT_CHANNEL_TTL_MS in src/modules/channels/service.ts). */
const RECENT_CHANNEL_TTL_MS = 1_000;

describe("initialize's channel resolution, kept for a second", () => {
  let one: TestGateway;
  let two: TestGateway;
  let merchant: TestMerchant;
  let statements: string[] = [];

  beforeAll(async () => {
    const env = { RATE_LIMIT_ENABLED: "false", JOBS_ENABLED: "false" };
    one = await startTestGateway({ env, onQuery: (sql) => statements.push(sql) });
    two = await startTestGateway({ env, database: one.database });
  });

  afterAll(async () => {
    await two?.close();
    await one?.close();
  });

  beforeAll(async () => {
    merchant = await one.createMerchant();
  });

  const initialize = (gw: TestGateway, key = merchant.testKey) => apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 1500, email: "cached@payers.test" });
  const createChannel = async (gw: TestGateway, name: string) => {
    const res = await apiClient(gw.url, merchant.testKey).post("/api/payment-channels/create", { name, provider: "sandbox" });
    expect(res.status, res.text).toBe(201);
    return res.body.channel.id as number;
  };
  const deactivate = async (gw: TestGateway, id: number) => {
    const res = await apiClient(gw.url, merchant.testKey).post("/graphql", { query: `mutation($id: Int!) { deactivatePaymentChannel(id: $id) { __typename } }`, variables: { id } });
    expect(res.body.data?.deactivatePaymentChannel.__typename, res.text).toBe("PaymentChannel");
  };
  const channelOf = async (reference: string) => (await one.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } })).channelId;

  /** Initializes on instance one until `until` holds for the answer; how long that took. */
  async function initializeUntil(until: (res: Awaited<ReturnType<typeof initialize>>) => boolean | Promise<boolean>): Promise<number> {
    const started = Date.now();
    for (;;) {
      if (await until(await initialize(one))) return Date.now() - started;
      if (Date.now() - started > EVENTUALLY_MS) throw new Error("instance one never saw the change");
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("a payment within the second is one statement: the channel and currency are known", async () => {
    const channelId = await createChannel(one, "First");
    statements = [];
    expect((await initialize(one)).status).toBe(200);
    // The first payment on a channel also has the metrics learn its provider (once per channel, after the answer).
    await waitUntil(() => statements.some((sql) => /"payment_channels"\."provider"/.test(sql)), "the metrics' provider lookup");
    // A pair of payments sent within the second: the first resolves (or finds) the channel, the second must find it.
    // On a busy machine a pair may take longer than the second; such a pair proves nothing, so send another.
    let warm: Awaited<ReturnType<typeof initialize>> | undefined;
    const deadline = Date.now() + EVENTUALLY_MS;
    while (!warm) {
      const pairStarted = Date.now();
      expect((await initialize(one)).status).toBe(200);
      statements = [];
      const second = await initialize(one);
      if (Date.now() - pairStarted < RECENT_CHANNEL_TTL_MS) warm = second;
      else if (Date.now() > deadline) throw new Error(`no two payments within ${RECENT_CHANNEL_TTL_MS} ms in ${EVENTUALLY_MS} ms`);
    }
    expect(warm.status, warm.text).toBe(200);
    expect(statements.filter((sql) => PAYMENT_CHANNEL_AND_CURRENCY.test(sql))).toEqual([]);
    expect(statements, statements.join("\n---\n")).toHaveLength(1);
    expect(await channelOf(warm.body.reference)).toBe(channelId);
  });

  it("kept per merchant and mode: the live key, with no live channel, is still refused", async () => {
    expect((await initialize(one)).status).toBe(200);
    const live = await initialize(one, merchant.liveKey);
    expect(live.status, live.text).toBe(400);
    expect(live.body.message).toMatch(/payment_channel_id/);
    const other = await one.createMerchant();
    expect((await initialize(one, other.testKey)).status).toBe(400);
  });

  it("a change through the same instance is seen by the very next payment", async () => {
    const first = (await one.gateway.db.prisma.paymentChannel.findFirstOrThrow({ where: { merchantId: merchant.id, isDefault: true } })).id;
    expect(await channelOf((await initialize(one)).body.reference)).toBe(first);
    const second = await createChannel(one, "Second");
    expect(await channelOf((await initialize(one)).body.reference)).toBe(second);
    await deactivate(one, second);
    const refused = await initialize(one);
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.message).toMatch(/no active default payment channel/);
  });

  it("a change through another instance is seen within the second", async () => {
    const third = await createChannel(one, "Third");
    expect(await channelOf((await initialize(one)).body.reference)).toBe(third);
    const fourth = await createChannel(two, "Fourth");
    const tookNewDefault = await initializeUntil(async (res) => res.status === 200 && (await channelOf(res.body.reference)) === fourth);
    expect(tookNewDefault).toBeLessThan(SEEN_WITHIN_MS);
    await deactivate(two, fourth);
    const refusedAfter = await initializeUntil((res) => res.status === 400);
    expect(refusedAfter).toBeLessThan(SEEN_WITHIN_MS);
  });
});
