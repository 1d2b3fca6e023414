import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { principalScope, requestFingerprint, fingerprintKeyFrom } from "../../src/idempotency/hooks.ts";
import { createIdempotencyStore } from "../../src/idempotency/store.ts";
import { SecretBox } from "../../src/security/encryption.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { retryingUnavailable } from "../support/retry.ts";

/**
 * Idempotency-Key records survive a crash without locking clients out: an in-flight claim is a lease
 * (IDEMPOTENCY_LEASE_MS), and what the crashed attempt committed is found again through its recovery
 * point, so the retry answers with that object instead of creating a second one.
 *
 * "A crashed attempt" is reproduced in this process exactly as the routes run one: the key is claimed in
 * the store, the service runs inside the key's scope and commits, and the response is never recorded.
 *
 * The lease is long, so "within the lease" holds however slow the machine, and it runs out when the test moves it
 * back (as time does after a crash) instead of after a wait; each claim's lease is checked to be LEASE_MS long.
 * Requests are retried on 503 + Retry-After as a client would (the database overloaded for a moment on a busy machine).
 */
const LEASE_MS = 10 * 60_000;
const INITIALIZE = "/api/transactions/initialize";
const PAYOUTS = "/v1/payouts";

describe("Idempotency-Key recovery after a crash", () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { IDEMPOTENCY_LEASE_MS: String(LEASE_MS), RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "60000" } });
  });
  afterAll(() => gw?.close());

  const prisma = () => gw.gateway.db.prisma;
  const store = () => createIdempotencyStore(prisma(), gw.gateway.db.sql, { leaseMs: LEASE_MS, secrets: new SecretBox(Buffer.from(gw.database.encryptionKeyHex, "hex")) });
  /** The claim's lease (IDEMPOTENCY_LEASE_MS) runs out, as it does that long after the instance holding it crashed. */
  async function leaseRunOut(key: string) {
    const moved = await prisma().idempotencyKey.updateMany({ where: { key, status: "in_flight" }, data: { lockedUntil: new Date(Date.now() - 1000) } });
    expect(moved.count, `the claim on ${key}`).toBe(1);
  }

  /** The principal the merchant's test key authenticates as. */
  async function principalOf(merchantId: number) {
    const key = await prisma().apiKey.findFirstOrThrow({ where: { merchantId, mode: "test" } });
    return { merchantId, mode: "test" as const, role: "owner" as const, userId: null, keyId: key.id, keyPrefix: key.prefix };
  }

  /** A merchant whose default channel is a sandbox one. */
  async function merchantWithChannel() {
    const merchant = await gw.createMerchant();
    const channel = await apiClient(gw.url, merchant.testKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    expect(channel.status, channel.text).toBe(201);
    return { merchant, channelId: channel.body.channel.id as number };
  }

  /** Claims `key` for the request as the preHandler does, and returns the claim the route's principal would carry. */
  async function claimAsRoute(merchantId: number, key: string, url: string, body: unknown) {
    const principal = principalScope(await principalOf(merchantId));
    const before = Date.now();
    const claim = await store().claim({ merchantId, mode: "test", principal, key, fingerprint: requestFingerprint(fingerprintKeyFrom(Buffer.from(gw.database.encryptionKeyHex, "hex")), "POST", url, body) });
    expect(claim.outcome).toBe("claimed");
    if (claim.outcome !== "claimed") throw new Error("not claimed");
    // The lease is LEASE_MS from the claim (the database's clock is this machine's; stored to the millisecond).
    const { lockedUntil } = await prisma().idempotencyKey.findFirstOrThrow({ where: { key } });
    expect(lockedUntil!.getTime()).toBeGreaterThanOrEqual(before + LEASE_MS - 5);
    expect(lockedUntil!.getTime()).toBeLessThanOrEqual(Date.now() + LEASE_MS + 5);
    return { claimId: claim.id, recoveryPoint: claim.recoveryPoint };
  }

  it("initialize: within the lease a retry is 409; after it, the retry answers with the committed transaction, once", async () => {
    const { merchant } = await merchantWithChannel();
    const key = `key-${randomUUID()}`;
    const body = { amount: 250000, email: "crash@payers.test", description: "crashed after commit" };
    const scope = await claimAsRoute(merchant.id, key, INITIALIZE, body);
    // The attempt commits its transaction, then "dies" before its response is stored.
    const committed = await gw.gateway.services.transactions.initialize({ ...(await principalOf(merchant.id)), idempotency: scope }, body);
    const record = await prisma().idempotencyKey.findFirstOrThrow({ where: { key } });
    expect(record).toMatchObject({ status: "in_flight", recoveryPoint: `transaction:${committed.id}` });

    const api = apiClient(gw.url, merchant.testKey);
    const early = await retryingUnavailable(() => api.post(INITIALIZE, body, { "idempotency-key": key }));
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ status: "error", code: "idempotency_key_in_use" });

    await leaseRunOut(key);
    const retry = await retryingUnavailable(() => api.post(INITIALIZE, body, { "idempotency-key": key }));
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body).toMatchObject({ status: "success", reference: committed.reference, access_code: committed.accessCode });
    expect(retry.body.transaction).toMatchObject({ id: committed.id, amount: 250000, status: "pending" });
    expect(await prisma().transaction.count({ where: { merchantId: merchant.id } })).toBe(1);

    // Recorded now: later retries are plain replays of that answer.
    const again = await retryingUnavailable(() => api.post(INITIALIZE, body, { "idempotency-key": key }));
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(retry.body);
    // A different request under the same key is still refused.
    expect((await retryingUnavailable(() => api.post(INITIALIZE, { ...body, amount: 1 }, { "idempotency-key": key }))).status).toBe(422);
  });

  it("an attempt answered 503 after it committed gives its key back: the retry at once answers with that transaction", async () => {
    const { merchant } = await merchantWithChannel();
    const key = `key-${randomUUID()}`;
    const body = { amount: 4200, email: "outage@payers.test", description: "committed, then the database went away" };
    const scope = await claimAsRoute(merchant.id, key, INITIALIZE, body);
    const committed = await gw.gateway.services.transactions.initialize({ ...(await principalOf(merchant.id)), idempotency: scope }, body);
    // What the route does with an answer it does not store (a 503 here): the key is released, within its lease.
    await store().release(scope.claimId);
    expect(await prisma().idempotencyKey.findFirstOrThrow({ where: { key } })).toMatchObject({ status: "in_flight", recoveryPoint: `transaction:${committed.id}` });

    const api = apiClient(gw.url, merchant.testKey);
    const retry = await retryingUnavailable(() => api.post(INITIALIZE, body, { "idempotency-key": key }));
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body).toMatchObject({ status: "success", reference: committed.reference });
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(await prisma().transaction.count({ where: { merchantId: merchant.id } })).toBe(1);
  });

  it("initialize: an attempt that died before committing anything is simply run by the retry", async () => {
    const { merchant } = await merchantWithChannel();
    const key = `key-${randomUUID()}`;
    const body = { amount: 1000, email: "early-crash@payers.test" };
    await claimAsRoute(merchant.id, key, INITIALIZE, body);
    await leaseRunOut(key);
    const retry = await retryingUnavailable(() => apiClient(gw.url, merchant.testKey).post(INITIALIZE, body, { "idempotency-key": key }));
    expect(retry.status, retry.text).toBe(200);
    const rows = await prisma().transaction.findMany({ where: { merchantId: merchant.id } });
    expect(rows.map((r) => r.reference)).toEqual([retry.body.reference]);
  });

  it("an STK push committed before the crash is not pushed again: the retry returns it", async () => {
    const { merchant, channelId } = await merchantWithChannel();
    const api = apiClient(gw.url, merchant.testKey);
    const key = `key-${randomUUID()}`;
    const body = { amount: 5000, phone_number: "254708374149", reference: "ORDER-9", payment_channel_id: channelId };
    const scope = await claimAsRoute(merchant.id, key, "/v1/collections/stk", body);
    const { transaction } = await gw.gateway.services.transactions.startStkCollection({ ...(await principalOf(merchant.id)), idempotency: scope }, {
      amount: body.amount,
      phoneNumber: body.phone_number,
      reference: body.reference,
      paymentChannelId: body.payment_channel_id,
    });
    await leaseRunOut(key);
    const retry = await retryingUnavailable(() => api.post("/v1/collections/stk", body, { "idempotency-key": key }));
    expect(retry.status, retry.text).toBe(201);
    expect(retry.body.data).toMatchObject({ id: transaction.id, reference: transaction.reference, checkout_request_id: transaction.checkoutRequestId });
    expect(await prisma().transaction.count({ where: { merchantId: merchant.id } })).toBe(1);
  });

  it("a payout committed before the crash is never sent twice: the retry returns it", async () => {
    const { merchant, channelId } = await merchantWithChannel();
    const api = apiClient(gw.url, merchant.testKey);
    const key = `key-${randomUUID()}`;
    const body = { amount: 10000, phone_number: "254708374149", payment_channel_id: channelId };
    const scope = await claimAsRoute(merchant.id, key, PAYOUTS, body);
    const payout = await gw.gateway.services.payouts.createPayout({ ...(await principalOf(merchant.id)), idempotency: scope }, {
      amount: body.amount,
      phoneNumber: body.phone_number,
      paymentChannelId: body.payment_channel_id,
    });
    await leaseRunOut(key);
    const retry = await retryingUnavailable(() => api.post(PAYOUTS, body, { "idempotency-key": key }));
    expect(retry.status, retry.text).toBe(201);
    expect(retry.body.data).toMatchObject({ id: payout.id, reference: payout.reference });
    expect(await prisma().payout.count({ where: { merchantId: merchant.id } })).toBe(1);
  });

  it("over GraphQL too: a payout committed before the crash is the retried mutation's answer, and is not sent again", async () => {
    const { merchant, channelId } = await merchantWithChannel();
    const api = apiClient(gw.url, merchant.testKey);
    const key = `key-${randomUUID()}`;
    const body = {
      query: `mutation($input: CreatePayoutInput!) { createPayout(input: $input) { __typename ... on Payout { id reference } } }`,
      variables: { input: { amount: 15000, phoneNumber: "254708374149", paymentChannelId: channelId } },
    };
    const scope = await claimAsRoute(merchant.id, key, "/graphql", body);
    const payout = await gw.gateway.services.payouts.createPayout({ ...(await principalOf(merchant.id)), idempotency: scope }, {
      amount: 15000n,
      phoneNumber: "254708374149",
      paymentChannelId: channelId,
    });
    expect(await prisma().idempotencyKey.findFirstOrThrow({ where: { key } })).toMatchObject({ recoveryPoint: `payout:${payout.id}` });
    await leaseRunOut(key);
    const retry = await retryingUnavailable(() => api.post("/graphql", body, { "idempotency-key": key }));
    expect(retry.body.errors, retry.text).toBeUndefined();
    expect(retry.body.data.createPayout).toMatchObject({ __typename: "Payout", reference: payout.reference });
    expect(await prisma().payout.count({ where: { merchantId: merchant.id } })).toBe(1);
  });

  it("only one of many concurrent retries takes over a lapsed key", async () => {
    const { merchant } = await merchantWithChannel();
    const key = `key-${randomUUID()}`;
    const body = { amount: 777, email: "race@payers.test" };
    await claimAsRoute(merchant.id, key, INITIALIZE, body);
    await leaseRunOut(key);
    const api = apiClient(gw.url, merchant.testKey);
    const answers = await Promise.all(Array.from({ length: 20 }, () => retryingUnavailable(() => api.post(INITIALIZE, body, { "idempotency-key": key }))));
    const ok = answers.filter((a) => a.status === 200);
    expect(answers.every((a) => a.status === 200 || (a.status === 409 && a.body.code === "idempotency_key_in_use"))).toBe(true);
    expect(new Set(ok.map((a) => a.body.reference)).size).toBe(1);
    expect(await prisma().transaction.count({ where: { merchantId: merchant.id } })).toBe(1);
  });
});
