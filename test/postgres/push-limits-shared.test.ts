import { randomInt } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { apiClient, startTwoInstances, type TestGateway } from "../support/gateway.ts";
import { startRedis, type RedisServer } from "../support/redis.ts";
import { until } from "../support/wait.ts";

/** Issue 35 item 6 on two instances sharing PostgreSQL and Redis: one budget per phone, one waiting prompt per phone and merchant. */
describe("M-Pesa prompt limits shared by two instances", () => {
  let redis: RedisServer;
  let fake: FakeDaraja;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    [redis, fake] = await Promise.all([startRedis(), startFakeDaraja()]);
    const env = { ...darajaGatewayEnv(fake), REDIS_URL: redis.url, RATE_LIMIT_ENABLED: "false", JOBS_ENABLED: "false", CHECKOUT_MAX_ATTEMPTS: "3" };
    [a, b] = await startTwoInstances({ env });
    fake.switches.callbackOrigin = a.url;
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await fake?.close();
    await redis?.stop();
  });

  const newPhone = () => `2547${String(randomInt(10_000_000, 100_000_000))}`;
  const promptsTo = (phone: string) => [...fake.pushes.values()].filter((p) => String(p.body.PhoneNumber) === phone).length;

  async function mpesaMerchant() {
    const merchant = await a.createMerchant();
    const api = apiClient(a.url, merchant.testKey);
    const channel = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: fake.channelConfig() });
    expect(channel.status, channel.text).toBe(201);
    return async () => {
      const init = await api.post("/api/transactions/initialize", { amount: 15000, email: "payer@example.com", payment_channel_id: channel.body.channel.id });
      expect(init.status, init.text).toBe(200);
      return init.body.reference as string;
    };
  }
  const push = (gw: TestGateway, reference: string, phone: string) => apiClient(gw.url).post(`/payment/checkout/${reference}/mpesa`, { phone });
  async function answer(reference: string) {
    const prisma = a.gateway.db.prisma;
    const attempt = await prisma.transactionAttempt.findFirstOrThrow({ where: { transaction: { reference } }, orderBy: { id: "desc" } });
    await fake.sendStkCallback(attempt.checkoutRequestId!, { resultCode: 1032 });
    await until(() => prisma.transactionAttempt.findUniqueOrThrow({ where: { id: attempt.id } }), (row) => row.status !== "pending");
  }

  it("counts one budget per phone across both instances, kept in Redis under a hash of the number", async () => {
    expect([a.gateway.rateLimiter, b.gateway.rateLimiter]).toEqual([undefined, undefined]);
    const checkout = await mpesaMerchant();
    const phone = newPhone();
    for (const gw of [a, b, a]) {
      const reference = await checkout();
      expect((await push(gw, reference, phone)).status).toBe(202);
      await answer(reference);
    }
    const reference = await checkout();
    for (const gw of [b, a]) expect((await push(gw, reference, phone)).body).toMatchObject({ code: "mpesa_prompt_limit" });
    expect(promptsTo(phone)).toBe(3);
    const inspect = new Redis(redis.url);
    try {
      const keys = await inspect.keys("gw:push:*");
      expect(keys.some((k) => k.startsWith("gw:push:phone:"))).toBe(true);
      expect(keys.join(" ")).not.toContain(phone.slice(3));
    } finally {
      inspect.disconnect();
    }
  });

  it("pushes to one number racing from several checkouts of one merchant on both instances: one prompt goes out", async () => {
    const checkout = await mpesaMerchant();
    const phone = newPhone();
    const references = await Promise.all(Array.from({ length: 6 }, () => checkout()));
    const answers = await Promise.all(references.map((reference, i) => push(i % 2 ? b : a, reference, phone)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 202), statuses.join()).toHaveLength(1);
    for (const refused of answers.filter((r) => r.status !== 202)) expect(["mpesa_prompt_pending", "mpesa_prompt_limit"]).toContain(refused.body.code);
    expect(promptsTo(phone)).toBe(1);
  });
});
