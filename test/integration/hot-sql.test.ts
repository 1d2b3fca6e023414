import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Principal } from "../../src/auth.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Verify, list and initialize run plain SQL instead of Prisma (src/db/sql.ts). What they return must be
 * exactly what Prisma would: every column, the same types (BigInt amounts, Date timestamps), the same rows
 * in the same order, and initialize must link the payer's customer as findOrCreateCustomer did.
 */
describe("the hot paths' plain SQL", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let principal: Principal;

  beforeAll(async () => {
    gw = await startTestGateway();
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    principal = { merchantId: merchant.id, mode: "test", role: "owner", userId: null, keyId: null, keyPrefix: null };
    await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
  });
  afterAll(() => gw?.close());

  const prisma = () => gw.gateway.db.prisma;

  async function initialize(body: Record<string, unknown>) {
    const res = await api.post("/api/transactions/initialize", body);
    expect(res.status, res.text).toBe(200);
    return res.body.reference as string;
  }

  it("a transaction read by reference equals Prisma's row, column for column, whatever its state", async () => {
    const plain = await initialize({ amount: 1, email: "plain@example.com" });
    const full = await initialize({
      amount: 999_999_999_999,
      email: "Full@Example.com",
      first_name: "Wanjiru",
      last_name: "Kamau",
      phone: "+254708374149",
      description: "Order #42, ünïcödé",
      callback_url: "https://shop.example.com/return?x=1",
      reference: "ORDER-42",
      metadata: { order: 42, lines: [{ sku: "A-1", qty: 2 }], note: "ünïcödé", nested: { ok: true, none: null } },
    });
    const failed = await initialize({ amount: 5000, email: "failed@example.com" });
    const completed = await initialize({ amount: 7000, email: "completed@example.com" });
    const byRef = (reference: string) => prisma().transaction.findUniqueOrThrow({ where: { reference } });
    await gw.gateway.services.transactions.transition({ transactionId: (await byRef(failed)).id, to: "failed", changes: { failureCode: "do_not_honor", failureReason: "Declined" } });
    await gw.gateway.services.transactions.transition({ transactionId: (await byRef(completed)).id, to: "completed", changes: { paymentMethod: "card", providerReference: "sbx_9" } });

    for (const reference of [plain, full, failed, completed]) {
      const mine = await gw.gateway.services.transactions.getByReference(principal, reference);
      const prismas = await byRef(reference);
      expect(mine).toEqual(prismas);
      expect(typeof mine.amount).toBe("bigint");
      expect(mine.createdAt).toBeInstanceOf(Date);
    }
    expect((await byRef(full)).amount).toBe(999_999_999_999n);
    expect((await gw.gateway.services.transactions.getByReference(principal, completed)).completedAt).toBeInstanceOf(Date);
  });

  it("is scoped by merchant and mode: another merchant's reference, or the other mode's, is not found", async () => {
    const other = await gw.createMerchant();
    const otherApi = apiClient(gw.url, other.testKey);
    await otherApi.post("/api/payment-channels/create", { name: "S", provider: "sandbox", config: {} });
    const ref = (await otherApi.post("/api/transactions/initialize", { amount: 100, email: "o@example.com" })).body.reference as string;
    await expect(gw.gateway.services.transactions.getByReference(principal, ref)).rejects.toMatchObject({ code: "not_found" });
    const mine = await initialize({ amount: 100, email: "mode@example.com" });
    await expect(gw.gateway.services.transactions.getByReference({ ...principal, mode: "live" }, mine)).rejects.toMatchObject({ code: "not_found" });
    expect((await api.get(`/api/transactions/verify/${ref}`)).status).toBe(404);
  });

  it("a page equals Prisma's page: same rows, same order, same total, with every filter", async () => {
    const pages = [
      { page: 1, limit: 3 },
      { page: 2, limit: 3 },
      { page: 1, limit: 100, status: "failed" },
      { page: 1, limit: 100, status: "completed" },
      { page: 1, limit: 100, dateFrom: new Date().toISOString().slice(0, 10), dateTo: new Date().toISOString().slice(0, 10) },
      { page: 1, limit: 100, dateFrom: "2001-01-01", dateTo: "2001-12-31" },
      { page: 9_007_199_254_740_991, limit: 100 },
      { page: 1, limit: 100, search: "ORDER-42" },
      { page: 1, limit: 100, search: "full@example.com", status: "pending" },
      { page: 1, limit: 100, search: "sbx_9" },
    ];
    for (const input of pages) {
      const mine = await gw.gateway.services.transactions.listPage(principal, input);
      const where: Record<string, unknown> = { merchantId: principal.merchantId, mode: "test" };
      if (input.status) where.status = input.status;
      if (input.dateFrom) where.createdAt = { gte: new Date(`${input.dateFrom}T00:00:00Z`), lt: new Date(new Date(`${input.dateTo}T00:00:00Z`).getTime() + 86_400_000) };
      if (input.search) where.OR = [{ reference: input.search }, { clientReference: input.search }, { providerReference: input.search }, { email: input.search }];
      const skip = (input.page - 1) * input.limit;
      const rows = skip > 1e9 ? [] : await prisma().transaction.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], skip, take: input.limit });
      expect(mine.items, JSON.stringify(input)).toEqual(rows);
      expect(mine.total).toBe(await prisma().transaction.count({ where }));
      if (input.search) expect(mine.total, input.search).toBe(1);
    }
    const absurd = await api.get("/api/transactions/list?page=2147483647&limit=100");
    expect(absurd.status, absurd.text).toBe(200);
    expect(absurd.body.data).toEqual([]);
  });

  it("a summary page equals Prisma's page selecting the same fields", async () => {
    const select = {
      id: true, reference: true, amount: true, amountRefunded: true, currency: true, status: true, paymentMethod: true, email: true,
      clientReference: true, providerReference: true, failureCode: true, failureReason: true, createdAt: true, metadata: true, disputeStatus: true, fee: true,
    } as const;
    for (const input of [{ page: 1, limit: 5 }, { page: 1, limit: 100, status: "completed" as const }]) {
      const mine = await gw.gateway.services.transactions.listPage(principal, input, {}, { summary: true });
      const where = { merchantId: principal.merchantId, mode: "test" as const, ...(input.status ? { status: input.status } : {}) };
      const rows = await prisma().transaction.findMany({ where, select, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: input.limit });
      expect(rows.length).toBeGreaterThan(0);
      expect(mine.items).toEqual(rows);
    }
  });

  /** A gateway of its own, whose statements are recorded: which columns a read asks for. */
  describe("with the statements recorded", () => {
    const statements: string[] = [];
    let counted: TestGateway;
    let merchant: Awaited<ReturnType<TestGateway["createMerchant"]>>;
    let client: ReturnType<typeof apiClient>;

    beforeAll(async () => {
      counted = await startTestGateway({ onQuery: (sql) => statements.push(sql) });
      merchant = await counted.createMerchant();
      client = apiClient(counted.url, merchant.testKey);
      await client.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    });
    afterAll(() => counted?.close());

    it("GraphQL pages read only the summary columns when that is all the items select, and every column otherwise", async () => {
      await client.post("/api/transactions/initialize", { amount: 4200, email: "sel@example.com", description: "Described" });
      const page = async (query: string) => {
        statements.length = 0;
        const res = await client.post("/graphql", { query });
        expect(res.status, res.text).toBe(200);
        expect(res.body.errors).toBeUndefined();
        const listed = statements.filter((sql) => sql.includes("LEFT JOIN LATERAL"));
        expect(listed).toHaveLength(1);
        return { items: res.body.data.transactionsPage.items, summary: !listed[0]!.includes("description") };
      };
      const summary = await page(`{ transactionsPage { ... on TransactionPage { items { databaseId reference amount status createdAt } } } }`);
      expect(summary.summary).toBe(true);
      expect(summary.items[0]).toMatchObject({ amount: 4200, status: "pending" });
      // Through a fragment, a field beyond the summary: every column.
      const full = await page(`{ transactionsPage { ... on TransactionPage { items { ...F } } } } fragment F on Transaction { reference description updatedAt }`);
      expect(full.summary).toBe(false);
      expect(full.items[0]).toMatchObject({ description: "Described" });
      expect(full.items[0].updatedAt).toMatch(/^\d{4}-/);
      // A directive makes the selection conditional: every column.
      const conditional = await page(`{ transactionsPage { ... on TransactionPage { items { reference description @include(if: true) } } } }`);
      expect(conditional.summary).toBe(false);
      expect(conditional.items[0]).toMatchObject({ description: "Described" });
    });

    it("a transaction by reference reads only the summary columns when that is all it selects (REST verify), and every column otherwise", async () => {
      const metadata = { order: 7, lines: [{ sku: "A-1" }], note: "ünïcödé" };
      const init = await client.post("/api/transactions/initialize", { amount: 4300, email: "verify@example.com", description: "Described", reference: "ORDER-7", metadata });
      const reference = init.body.reference as string;
      const byReference = () => statements.filter((sql) => /FROM \(SELECT \* FROM transactions WHERE reference = \$1 OFFSET 0\) transactions WHERE merchant_id = \$2/.test(sql));
      const read = async (send: () => Promise<{ status: number; text: string; body: any }>) => {
        statements.length = 0;
        const res = await send();
        expect(res.status, res.text).toBe(200);
        expect(byReference()).toHaveLength(1);
        return { body: res.body, summary: !byReference()[0]!.includes("description") };
      };
      // REST verify: the summary columns, and the same body as ever (metadata included).
      const verify = await read(() => client.get(`/api/transactions/verify/${reference}`));
      expect(verify.summary).toBe(true);
      expect(verify.body.transaction).toMatchObject({ reference, amount: 4300, status: "pending", client_reference: "ORDER-7", metadata });
      // The summary read equals Prisma's row selecting the same fields.
      const principal = { merchantId: merchant.id, mode: "test" as const, role: "owner" as const, userId: null, keyId: null, keyPrefix: null };
      const mine = await counted.gateway.services.transactions.getByReference(principal, reference, {}, { summary: true });
      const select = Object.fromEntries(["id", "reference", "amount", "amountRefunded", "currency", "status", "paymentMethod", "email", "clientReference", "providerReference", "failureCode", "failureReason", "createdAt", "metadata", "disputeStatus", "fee"].map((f) => [f, true]));
      expect(mine).toEqual(await counted.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference }, select }));
      // A field beyond the summary, beside the union's error fragment: every column.
      const query = (fields: string) => `{ transaction(reference: "${reference}") { __typename ... on Error { code message } ... on Transaction { ${fields} } } }`;
      const full = await read(() => client.post("/graphql", { query: query("reference description") }));
      expect(full.summary).toBe(false);
      expect(full.body.data.transaction).toMatchObject({ reference, description: "Described" });
      const summary = await read(() => client.post("/graphql", { query: query("reference amount metadata") }));
      expect(summary.summary).toBe(true);
      expect(summary.body.data.transaction).toMatchObject({ reference, amount: 4300, metadata });
      // Another merchant's reference is still not found through the summary read.
      const other = await counted.createMerchant();
      expect((await apiClient(counted.url, other.testKey).get(`/api/transactions/verify/${reference}`)).status).toBe(404);
    });
  });

  it("initialize links a returning payer's customer without changing it, and creates one for a new payer", async () => {
    await initialize({ amount: 100, email: "Returning@Example.com", first_name: "First", last_name: "Payer", phone: "+254711000111" });
    await initialize({ amount: 200, email: "returning@example.com", first_name: "Other", last_name: "Name" });
    const customers = await prisma().customer.findMany({ where: { merchantId: principal.merchantId, email: "returning@example.com" } });
    expect(customers).toHaveLength(1);
    expect(customers[0]).toMatchObject({ firstName: "First", lastName: "Payer", phone: "+254711000111", mode: "test" });
    const linked = await prisma().transaction.findMany({ where: { email: "returning@example.com", merchantId: principal.merchantId } });
    expect(linked.map((t) => t.customerId)).toEqual([customers[0]!.id, customers[0]!.id]);
  });

  it("20 concurrent first payments by one new e-mail: one customer, every transaction linked to it", async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => api.post("/api/transactions/initialize", { amount: 300, email: "rush@example.com" })));
    for (const res of results) expect(res.status, res.text).toBe(200);
    const customers = await prisma().customer.findMany({ where: { merchantId: principal.merchantId, email: "rush@example.com" } });
    expect(customers).toHaveLength(1);
    const linked = await prisma().transaction.findMany({ where: { email: "rush@example.com", merchantId: principal.merchantId } });
    expect(linked).toHaveLength(20);
    expect(new Set(linked.map((t) => t.customerId))).toEqual(new Set([customers[0]!.id]));
  });

  it("the channel comes from the same statement as the currency: unknown, other merchant's, inactive and missing default are refused", async () => {
    const other = await gw.createMerchant();
    const otherApi = apiClient(gw.url, other.testKey);
    const otherChannel = (await otherApi.post("/api/payment-channels/create", { name: "Theirs", provider: "sandbox", config: {} })).body.channel.id;

    const unknown = await api.post("/api/transactions/initialize", { amount: 100, email: "c@example.com", payment_channel_id: 987654 });
    expect(unknown.status).toBe(404);
    const theirs = await api.post("/api/transactions/initialize", { amount: 100, email: "c@example.com", payment_channel_id: otherChannel });
    expect(theirs.status).toBe(404);
    expect(theirs.body.message).toBe(unknown.body.message.replace("987654", String(otherChannel)));

    const channelId = (await otherApi.post("/api/payment-channels/create", { name: "Second", provider: "sandbox", config: {} })).body.channel.id as number;
    await prisma().paymentChannel.update({ where: { id: channelId }, data: { isActive: false } });
    const inactive = await otherApi.post("/api/transactions/initialize", { amount: 100, email: "c@example.com", payment_channel_id: channelId });
    expect(inactive.status).toBe(400);
    expect(inactive.body.code).toBe("channel_inactive");
    // The inactive one was the default: no active default is left.
    const noDefault = await otherApi.post("/api/transactions/initialize", { amount: 100, email: "c@example.com" });
    expect(noDefault.status).toBe(400);
    expect(noDefault.body.message).toMatch(/payment_channel_id.*no active default payment channel/);
    const explicit = await otherApi.post("/api/transactions/initialize", { amount: 100, email: "c@example.com", payment_channel_id: otherChannel });
    expect(explicit.status, explicit.text).toBe(200);
    expect(await prisma().transaction.count({ where: { merchantId: other.id } })).toBe(1);
  });
});
