import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Principal } from "../../src/auth.ts";
import type { Transaction } from "../../src/db/generated/prisma/client.ts";
import { createTransactionStore, type TransactionStore } from "../../src/modules/transactions/store.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * The store (src/modules/transactions/store.ts) chooses plain SQL or Prisma per call; what it answers must
 * not depend on that choice, and every lookup stays within the merchant, mode or channel it is given.
 */
describe("the transactions store", () => {
  let gw: TestGateway;
  let store: TransactionStore;
  let mine: Principal;
  let theirs: Principal;
  let myChannel: number;
  let theirChannel: number;
  const refs: Record<string, string> = {};

  const principalOf = (merchantId: number): Principal => ({ merchantId, mode: "test", role: "owner", userId: null, keyId: null, keyPrefix: null });
  const byRef = (reference: string) => gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference } });

  beforeAll(async () => {
    gw = await startTestGateway();
    store = createTransactionStore(gw.gateway.db);
    const me = await gw.createMerchant();
    const them = await gw.createMerchant();
    mine = principalOf(me.id);
    theirs = principalOf(them.id);
    const api = apiClient(gw.url, me.testKey);
    const otherApi = apiClient(gw.url, them.testKey);
    myChannel = (await api.post("/api/payment-channels/create", { name: "Mine", provider: "sandbox", config: {} })).body.channel.id;
    theirChannel = (await otherApi.post("/api/payment-channels/create", { name: "Theirs", provider: "sandbox", config: {} })).body.channel.id;
    const initialize = async (client: typeof api, body: Record<string, unknown>) => {
      const res = await client.post("/api/transactions/initialize", body);
      expect(res.status, res.text).toBe(200);
      return res.body.reference as string;
    };
    refs.plain = await initialize(api, { amount: 100, email: "plain@example.com" });
    refs.shared = await initialize(api, { amount: 200, email: "Payer@Example.com", phone: "0712345678", reference: "SHARED-1" });
    refs.paid = await initialize(api, { amount: 300, email: "paid@example.com" });
    refs.declined = await initialize(api, { amount: 400, email: "declined@example.com" });
    refs.theirs = await initialize(otherApi, { amount: 500, email: "payer@example.com", phone: "0712345678", reference: "SHARED-1" });
    const transactions = gw.gateway.services.transactions;
    await transactions.transition({ transactionId: (await byRef(refs.paid)).id, to: "completed", changes: { paymentMethod: "card", providerReference: "sbx_store_1" } });
    await transactions.transition({ transactionId: (await byRef(refs.declined)).id, to: "failed", changes: { failureCode: "card_declined", failureReason: "Declined" } });
  });
  afterAll(() => gw?.close());

  it("findByReference answers the caller's own row only, on the SQL path and the Prisma (relations) path alike", async () => {
    const withChannel = { include: { channel: true } } as const;
    for (const query of [{}, withChannel]) {
      const own = await store.findByReference(mine, refs.shared!, query);
      expect(own?.reference).toBe(refs.shared);
      expect(await store.findByReference(mine, refs.theirs!, query)).toBeNull();
      expect(await store.findByReference(theirs, refs.shared!, query)).toBeNull();
      expect(await store.findByReference({ ...mine, mode: "live" }, refs.shared!, query)).toBeNull();
    }
    const viaSql = await store.findByReference(mine, refs.paid!);
    const { channel, ...viaPrisma } = (await store.findByReference(mine, refs.paid!, withChannel)) as Transaction & { channel: unknown };
    expect(channel).toMatchObject({ id: myChannel });
    expect(viaSql).toEqual(viaPrisma);
  });

  it("a provider's callback or receipt is looked up within its own channel", async () => {
    const shared = await byRef(refs.shared!);
    await gw.gateway.db.prisma.transaction.update({ where: { id: shared.id }, data: { checkoutRequestId: "ws_CO_store_1" } });
    expect((await store.findByCollectionRequest(myChannel, "ws_CO_store_1"))?.id).toBe(shared.id);
    expect(await store.findByCollectionRequest(theirChannel, "ws_CO_store_1")).toBeNull();
    const receipt = { channelId: myChannel, providerReference: "sbx_store_1" };
    expect((await store.findByProviderReceipt(receipt))?.reference).toBe(refs.paid);
    expect(await store.findByProviderReceipt({ ...receipt, channelId: theirChannel })).toBeNull();
  });

  it("a page is the same rows and total whether read with plain SQL or with Prisma, for every filter, and never another merchant's", async () => {
    const today = new Date().toISOString().slice(0, 10);
    const inputs = [
      { limit: 2 },
      { page: 2, limit: 2 },
      { status: "completed" },
      { status: "failed" },
      { dateFrom: today, dateTo: today },
      { dateFrom: "2001-01-01", dateTo: "2001-01-31" },
      { search: refs.plain },
      { search: "SHARED-1" },
      { search: "sbx_store_1" },
      { search: "PAYER@example.com" },
      { search: "0712345678" },
      { search: "254712345678", status: "pending" },
      { search: refs.theirs },
    ];
    const expectedTotals = [4, 4, 1, 1, 4, 0, 1, 1, 1, 1, 1, 1, 0];
    for (const [i, input] of inputs.entries()) {
      const label = JSON.stringify(input);
      const sql = await store.listPage(mine, input);
      const prisma = await store.listPage(mine, input, { include: { channel: true } });
      expect(sql.total, label).toBe(expectedTotals[i]);
      expect(prisma.total, label).toBe(sql.total);
      expect(prisma.items.map(({ channel: _channel, ...row }: Transaction & { channel?: unknown }) => row), label).toEqual(sql.items);
      expect(sql.items.every((t) => t.merchantId === mine.merchantId), label).toBe(true);
      expect(await store.count(mine, input), label).toBe(sql.total);
    }
  });

  it("claimCharge admits one claim at a time, lets a lapsed one be taken over, and answers a settled row's status", async () => {
    const { id } = await byRef(refs.plain!);
    const first = new Date();
    expect(await store.claimCharge(id, first, new Date(first.getTime() - 60_000))).toEqual({ claimed: true, status: "pending" });
    const second = new Date(first.getTime() + 1);
    expect(await store.claimCharge(id, second, new Date(second.getTime() - 60_000))).toEqual({ claimed: false, status: "pending" });
    // Releasing with another claim's token leaves the claim; with its own, frees it.
    await store.releaseCharge(id, second);
    expect((await store.findById(id))?.chargeStartedAt).toEqual(first);
    await store.releaseCharge(id, first);
    expect((await store.findById(id))?.chargeStartedAt).toBeNull();
    // A claim older than the lease is taken over.
    await store.claimCharge(id, first, new Date(first.getTime() - 60_000));
    const later = new Date(first.getTime() + 120_000);
    expect(await store.claimCharge(id, later, new Date(later.getTime() - 60_000))).toEqual({ claimed: true, status: "pending" });
    const paid = await byRef(refs.paid!);
    expect(await store.claimCharge(paid.id, new Date(), new Date(0))).toEqual({ claimed: false, status: "completed" });
    expect(await store.claimCharge(2_000_000_000, new Date(), new Date(0))).toBeNull();
  });
});
