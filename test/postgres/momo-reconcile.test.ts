import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { apiClient, startTwoInstances, type TestGateway } from "../support/gateway.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { jobsFallDue } from "../support/wait.ts";

/** Two gateway instances on one PostgreSQL and one Redis: shared Daraja token, one reconciler per push. */
describe("M-Pesa across two instances", () => {
  let fake: FakeDaraja;
  let redis: RedisServer;
  let a: TestGateway;
  let b: TestGateway;
  let channelId: number;
  let apiA: ReturnType<typeof apiClient>;
  let apiB: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    fake = await startFakeDaraja();
    redis = await startRedis();
    const env = {
      ...darajaGatewayEnv(fake),
      REDIS_URL: redis.url,
      JOBS_ENABLED: "false",
      STK_CALLBACK_OVERDUE_MS: "1",
      STK_QUERY_BACKOFF_MS: "1",
      RATE_LIMIT_ENABLED: "false",
    };
    [a, b] = await startTwoInstances({ env });
    fake.switches.callbackOrigin = a.url;
    const merchant = await a.createMerchant();
    apiA = apiClient(a.url, merchant.testKey);
    apiB = apiClient(b.url, merchant.testKey);
    const res = await apiA.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: fake.channelConfig() });
    channelId = res.body.channel.id;
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
    await redis?.stop?.();
    await fake?.close();
  });

  it("shares one access token through Redis", async () => {
    for (const api of [apiA, apiB, apiA, apiB]) {
      const res = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: "254708374149", payment_channel_id: channelId });
      expect(res.status, res.text).toBe(200);
    }
    expect(fake.tokensIssued).toBe(1);
  });

  it("reconciles each overdue push once, whichever instance claims it", async () => {
    const ids: { id: number; checkout: string }[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await (i % 2 ? apiA : apiB).post("/api/momo/stk-push", { amount: 1000, phone_number: "254708374149", payment_channel_id: channelId });
      ids.push({ id: res.body.transaction.id, checkout: res.body.transaction.checkout_request_id });
    }
    for (const { checkout } of ids) fake.queryResults.set(checkout, { ResultCode: "0", ResultDesc: "The service request is processed successfully." });
    await jobsFallDue(a.gateway.db.prisma, { kind: "transaction.reconcile" });
    const queriesBefore = fake.requests.filter((r) => r.path === "/mpesa/stkpushquery/v1/query").length;
    const [ra, rb] = await Promise.all([a.gateway.services.jobs.runDueJobs(), b.gateway.services.jobs.runDueJobs()]);
    await Promise.all([a.gateway.services.jobs.runDueJobs(), b.gateway.services.jobs.runDueJobs()]);
    expect(ra + rb).toBeGreaterThanOrEqual(ids.length);
    const prisma = a.gateway.db.prisma;
    for (const { id, checkout } of ids) {
      expect((await prisma.transaction.findUniqueOrThrow({ where: { id } })).status).toBe("completed");
      expect(await prisma.event.count({ where: { transactionId: id, type: "transaction.completed" } })).toBe(1);
      const queries = fake.requests.slice(queriesBefore).filter((r) => r.path === "/mpesa/stkpushquery/v1/query" && r.body.CheckoutRequestID === checkout);
      expect(queries).toHaveLength(1);
    }
  });
});
