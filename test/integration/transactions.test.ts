import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SUCCESS_CARD = { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "408" };

/** The fields of a transaction that the legacy REST list has too (ReadFields below). */
graphql(`
  fragment TransactionListFields on Transaction {
    databaseId reference amount status createdAt paymentMethod currency
    clientReference providerReference failureCode failureReason amountRefunded refunded disputed disputeStatus fee net
  }
`);

const TransactionByReference = graphql(`
  query TransactionByReference($reference: String!) {
    transaction(reference: $reference) {
      __typename
      ...Failure
      ... on Transaction {
        ...TransactionListFields
        email
        phoneNumber
        metadata
        channel { databaseId provider }
        customer { ...CustomerContact }
      }
    }
  }
`);

const TransactionsPage = graphql(`
  query TransactionsPage($page: Int, $limit: Int, $status: TransactionStatus, $dateFrom: String, $dateTo: String) {
    transactionsPage(page: $page, limit: $limit, status: $status, dateFrom: $dateFrom, dateTo: $dateTo) {
      __typename
      ...Failure
      ... on TransactionPage {
        total page limit pages
        items { ...TransactionListFields }
      }
    }
  }
`);

const TransactionsConnection = graphql(`
  query TransactionsConnection($first: Int, $after: String, $status: TransactionStatus) {
    transactions(first: $first, after: $after, status: $status) {
      totalCount
      pageInfo { hasNextPage endCursor }
      edges { cursor node { reference } }
    }
  }
`);

const InitializeTransaction = graphql(`
  mutation InitializeTransaction($input: InitializeTransactionInput!) {
    initializeTransaction(input: $input) {
      __typename
      ...FieldFailure
      ... on InitializeTransactionPayload {
        reference
        accessCode
        authorizationUrl
        transaction { amount status currency }
      }
    }
  }
`);

type ReadFields =
  | "databaseId" | "reference" | "amount" | "status" | "createdAt" | "paymentMethod" | "currency" | "clientReference" | "providerReference"
  | "failureCode" | "failureReason" | "amountRefunded" | "refunded" | "disputed" | "disputeStatus" | "fee" | "net";

/** A transaction read over GraphQL, under the legacy REST list's field names (for the parity tests). */
function asLegacyListItem(t: Record<ReadFields, unknown>) {
  return {
    id: t.databaseId,
    reference: t.reference,
    amount: t.amount,
    status: t.status,
    created_at: t.createdAt,
    payment_method: t.paymentMethod,
    currency: t.currency,
    client_reference: t.clientReference,
    provider_reference: t.providerReference,
    failure_code: t.failureCode,
    failure_reason: t.failureReason,
    amount_refunded: t.amountRefunded,
    refunded: t.refunded,
    disputed: t.disputed,
    dispute_status: t.disputeStatus,
    fee: t.fee,
    net: t.net,
  };
}

describe("transactions", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  let other: TestMerchant;
  let api: ReturnType<typeof apiClient>;
  let sandboxChannelId: number;

  const initialize = (body: Record<string, unknown>, client = api) => client.post("/api/transactions/initialize", body);
  const pay = (reference: string, card: Record<string, unknown> = SUCCESS_CARD) => apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, card);

  beforeAll(async () => {
    gw = await startTestGateway({ env: { PUBLIC_BASE_URL: "https://pay.example.test" } });
    merchant = await gw.createMerchant("Shop");
    other = await gw.createMerchant("Other Shop");
    api = apiClient(gw.url, merchant.testKey);
    const created = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    expect(created.status).toBe(201);
    sandboxChannelId = created.body.channel.id;
    await apiClient(gw.url, other.testKey).post("/api/payment-channels/create", { name: "Other sandbox", provider: "sandbox", config: {} });
  });
  afterAll(() => gw?.close());

  describe("POST /api/transactions/initialize", () => {
    it("returns the documented body with a checkout URL under PUBLIC_BASE_URL", async () => {
      const res = await initialize({ amount: 150000, email: "payer@example.com", payment_channel_id: sandboxChannelId });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(["status", "message", "transaction", "authorization_url", "access_code", "reference"]);
      const { transaction, reference } = res.body;
      expect(res.body.status).toBe("success");
      expect(transaction).toEqual({ id: expect.any(Number), reference, amount: 150000, status: "pending", created_at: expect.stringMatching(ISO_MS) });
      expect(reference).toMatch(/^txn-[A-Za-z0-9]{20}$/);
      expect(res.body.authorization_url).toBe(`https://pay.example.test/payment/checkout/${reference}`);
      expect(res.body.access_code).toMatch(/^[A-Za-z0-9]{16}$/);
    });

    it("defaults to the merchant's default channel and currency (KES), and links a found-or-created customer", async () => {
      const body = { amount: 500, email: "Jane@Example.com", first_name: "Jane", last_name: "Doe", phone: "+254712345678", unknown_field: 1 };
      const first = await initialize(body);
      expect(first.status).toBe(200);
      const second = await initialize({ ...body, amount: 700 });
      const a = await api.graphql(TransactionByReference, { reference: first.body.reference });
      const b = await api.graphql(TransactionByReference, { reference: second.body.reference });
      const ta = a.body.data!.transaction;
      const tb = b.body.data!.transaction;
      if (ta.__typename !== "Transaction" || tb.__typename !== "Transaction") throw new Error("expected transactions");
      expect(ta.currency).toBe("KES");
      expect(ta.channel).toEqual({ databaseId: sandboxChannelId, provider: "sandbox" });
      expect(ta.customer).toMatchObject({ email: "jane@example.com", firstName: "Jane", lastName: "Doe", phone: "+254712345678" });
      expect(tb.customer!.databaseId).toBe(ta.customer!.databaseId);
    });

    it.each([
      [{ email: "a@b.co" }, "amount: is required"],
      [{ amount: 0, email: "a@b.co" }, "amount: must be between 1 and 1000000000000 (minor units)"],
      [{ amount: -5, email: "a@b.co" }, "amount: must be between 1 and 1000000000000 (minor units)"],
      [{ amount: 10 ** 12 + 1, email: "a@b.co" }, "amount: must be between 1 and 1000000000000 (minor units)"],
      [{ amount: 10.5, email: "a@b.co" }, "amount: must be an integer"],
      [{ amount: "100", email: "a@b.co" }, "amount: must be an integer"],
      [{ amount: 100 }, "email: is required"],
      [{ amount: 100, email: "not-an-email" }, "email:"],
      [{ amount: 100, email: 42 }, "email: must be a string"],
      [{ amount: 100, email: "a@b.co", phone: "0812345678" }, "phone:"],
      [{ amount: 100, email: "a@b.co", currency: "KESS" }, "currency: must be an ISO 4217 currency code"],
      [{ amount: 100, email: "a@b.co", payment_channel_id: "1" }, "payment_channel_id: must be an integer"],
      [{ amount: 100, email: "a@b.co", description: "x".repeat(501) }, "description: must be at most 500 characters"],
    ])("rejects %j with a 400 naming the field", async (body, message) => {
      const before = await gw.gateway.db.prisma.transaction.count();
      const res = await initialize(body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message.startsWith(message)).toBe(true);
      expect(await gw.gateway.db.prisma.transaction.count()).toBe(before); // nothing half-written
    });

    it("rejects a currency the channel's connector does not support", async () => {
      const res = await initialize({ amount: 100, email: "a@b.co", currency: "EUR" });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: "unsupported_currency" });
      expect(res.body.message).toMatch(/^currency: EUR is not supported/);
    });

    it("404s on another merchant's channel id and 400s on an inactive channel", async () => {
      const foreign = await apiClient(gw.url, other.testKey).get("/api/payment-channels/list");
      const foreignId = foreign.body.channels[0].id;
      const res = await initialize({ amount: 100, email: "a@b.co", payment_channel_id: foreignId });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ status: "error", message: `Payment channel ${foreignId} not found`, code: "not_found" });

      const spare = await api.post("/api/payment-channels/create", { name: "Spare", provider: "sandbox", config: {} });
      await gw.gateway.db.prisma.paymentChannel.update({ where: { id: spare.body.channel.id }, data: { isActive: false, isDefault: false } });
      await gw.gateway.db.prisma.paymentChannel.update({ where: { id: sandboxChannelId }, data: { isDefault: true } });
      const inactive = await initialize({ amount: 100, email: "a@b.co", payment_channel_id: spare.body.channel.id });
      expect(inactive.status).toBe(400);
      expect(inactive.body.code).toBe("channel_inactive");
    });

    it("asks for payment_channel_id when the merchant has no active default channel", async () => {
      const lonely = await gw.createMerchant();
      const res = await initialize({ amount: 100, email: "a@b.co" }, apiClient(gw.url, lonely.testKey));
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^payment_channel_id: /);
    });

    it("gives concurrent initializations distinct references and access codes", async () => {
      const results = await Promise.all(Array.from({ length: 25 }, (_, i) => initialize({ amount: 100 + i, email: `c${i}@example.com` })));
      expect(results.every((r) => r.status === 200)).toBe(true);
      expect(new Set(results.map((r) => r.body.reference)).size).toBe(25);
      expect(new Set(results.map((r) => r.body.access_code)).size).toBe(25);
    });

    it("is mirrored by the initializeTransaction mutation, with typed errors", async () => {
      const ok = await api.graphql(InitializeTransaction, { input: { amount: 2500, email: "gql@example.com" } });
      const payload = ok.body.data!.initializeTransaction;
      if (payload.__typename !== "InitializeTransactionPayload") throw new Error(JSON.stringify(payload));
      expect(payload.transaction).toEqual({ amount: 2500, status: "pending", currency: "KES" });
      expect(payload.authorizationUrl).toBe(`https://pay.example.test/payment/checkout/${payload.reference}`);
      const bad = await api.graphql(InitializeTransaction, { input: { amount: 0, email: "gql@example.com" } });
      expect(bad.body.data!.initializeTransaction).toMatchObject({ __typename: "ValidationError", code: "validation_failed", field: "amount" });
    });
  });

  describe("GET /api/transactions/verify/{reference}", () => {
    it("returns both status keys in the raw text: success first, the transaction status last", async () => {
      const init = await initialize({ amount: 4200, email: "v@example.com" });
      const pending = await api.get(`/api/transactions/verify/${init.body.reference}`);
      expect(pending.status).toBe(200);
      const expectedTransaction = {
        id: init.body.transaction.id,
        reference: init.body.reference,
        amount: 4200,
        status: "pending",
        created_at: init.body.transaction.created_at,
        payment_method: null,
        currency: "KES",
        client_reference: null,
        provider_reference: null,
        failure_code: null,
        failure_reason: null,
        amount_refunded: 0,
        refunded: false,
        disputed: false,
        dispute_status: null,
        fee: null,
        net: null,
        metadata: null,
      };
      expect(pending.text).toBe(`{"status":"success","transaction":${JSON.stringify(expectedTransaction)},"status":"pending"}`);
      expect(pending.body.status).toBe("pending"); // what a legacy JSON parser sees

      expect((await pay(init.body.reference)).status).toBe(200);
      const done = await api.get(`/api/transactions/verify/${init.body.reference}`);
      expect(done.text.startsWith('{"status":"success","transaction":{')).toBe(true);
      expect(done.text.endsWith(',"status":"completed"}')).toBe(true);
      expect(done.body.transaction).toMatchObject({ status: "completed", payment_method: "card" });
    });

    it("is a 404 envelope for an unknown reference, another merchant's, or the other mode's", async () => {
      const init = await initialize({ amount: 100, email: "x@example.com" });
      for (const [client, reference] of [
        [api, "txn_doesnotexist"],
        [apiClient(gw.url, other.testKey), init.body.reference],
        [apiClient(gw.url, merchant.liveKey), init.body.reference],
      ] as const) {
        const res = await client.get(`/api/transactions/verify/${reference}`);
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ status: "error", message: "Transaction not found", code: "not_found" });
      }
    });
  });

  describe("sandbox card payments", () => {
    it.each([
      ["4084084084084081", 200, "completed", null],
      ["4242 4242 4242 4242", 200, "completed", null],
      ["4000000000000002", 402, "failed", "card_declined"],
      ["4000000000009995", 402, "failed", "insufficient_funds"],
      ["4000000000000119", 402, "failed", "processing_error"],
      ["4111111111111111", 402, "failed", "test_card_unknown"],
    ])("card %s -> HTTP %i, transaction %s (%s)", async (number, httpStatus, status, failureCode) => {
      const init = await initialize({ amount: 990, email: "card@example.com" });
      const res = await pay(init.body.reference, { ...SUCCESS_CARD, card_number: number });
      expect(res.status).toBe(httpStatus);
      const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
      expect(row.status).toBe(status);
      expect(row.failureCode).toBe(failureCode);
      expect(row.paymentMethod).toBe("card");
      const events = await gw.gateway.db.prisma.event.findMany({ where: { transactionId: row.id } });
      expect(events.map((e) => e.type)).toEqual([`transaction.${status}`]);
    });

    it("rejects an invalid card without touching the transaction", async () => {
      const init = await initialize({ amount: 990, email: "card@example.com" });
      const bad = await pay(init.body.reference, { ...SUCCESS_CARD, card_number: "4084084084084082" });
      expect(bad.status).toBe(400);
      expect(bad.body.message).toMatch(/^card_number: /);
      const expired = await pay(init.body.reference, { ...SUCCESS_CARD, expiry_year: 2020 });
      expect(expired.status).toBe(400);
      const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
      expect(row.status).toBe("pending");
    });

    it("changes status exactly once: concurrent payments apply one, later ones get 409 and write nothing", async () => {
      const init = await initialize({ amount: 1234, email: "race@example.com" });
      const attempts = await Promise.all(Array.from({ length: 8 }, () => pay(init.body.reference)));
      const statuses = attempts.map((a) => a.status);
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
      expect(statuses.every((s) => s === 200 || s === 409)).toBe(true);
      const row = await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { reference: init.body.reference } });
      expect(await gw.gateway.db.prisma.event.count({ where: { transactionId: row.id } })).toBe(1);
      const again = await pay(init.body.reference, { ...SUCCESS_CARD, card_number: "4000000000000002" });
      expect(again.status).toBe(409);
      expect(again.body).toMatchObject({ status: "error", code: "conflict", message: "Transaction is already completed" });
      expect((await gw.gateway.db.prisma.transaction.findUniqueOrThrow({ where: { id: row.id } })).status).toBe("completed");
    });

    it("throttles card attempts per payer IP (card testing), with the 429 envelope", async () => {
      const throttled = await startTestGateway({ env: { RATE_LIMIT_IP_PER_MINUTE: "2" } });
      try {
        const shop = await throttled.createMerchant();
        const shopApi = apiClient(throttled.url, shop.testKey);
        await shopApi.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
        const init = await shopApi.post("/api/transactions/initialize", { amount: 100, email: "t@example.com" });
        const attempt = () => apiClient(throttled.url).post(`/payment/checkout/${init.body.reference}/pay`, { ...SUCCESS_CARD, card_number: "4084084084084082" });
        expect((await attempt()).status).toBe(400);
        expect((await attempt()).status).toBe(400);
        const third = await attempt();
        expect(third.status).toBe(429);
        expect(third.body).toMatchObject({ status: "error", code: "rate_limited" });
        expect(third.headers.get("retry-after")).toMatch(/^\d+$/);
      } finally {
        await throttled.close();
      }
    });

    it("serves the checkout page for a pending reference and a 404 page otherwise", async () => {
      const init = await initialize({ amount: 150000, email: "page@example.com", description: "Order <42>" });
      const page = await fetch(init.body.authorization_url.replace("https://pay.example.test", gw.url));
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain("KES 1,500.00");
      expect(html).toContain("Order &lt;42&gt;");
      expect((await fetch(`${gw.url}/payment/checkout/txn_nope`)).status).toBe(404);
    });
  });

  describe("GET /api/transactions/list", () => {
    let lister: TestMerchant;
    let client: ReturnType<typeof apiClient>;
    const references: string[] = [];

    beforeAll(async () => {
      lister = await gw.createMerchant("Lister");
      client = apiClient(gw.url, lister.testKey);
      await client.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
      // 7 transactions on known days: 2024-01-01 .. 2024-01-07, the last two completed.
      for (let day = 1; day <= 7; day++) {
        const res = await client.post("/api/transactions/initialize", { amount: day * 100, email: `l${day}@example.com` });
        references.push(res.body.reference);
        await gw.gateway.db.prisma.transaction.update({
          where: { reference: res.body.reference },
          data: { createdAt: new Date(Date.UTC(2024, 0, day, 23, 59, 59, 999)) },
        });
      }
      for (const reference of references.slice(5)) expect((await pay(reference)).status).toBe(200);
    });

    it("uses page 1 and limit 20 by default, newest first", async () => {
      const res = await client.get("/api/transactions/list");
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(["status", "data", "total", "page", "limit", "pages"]);
      expect(res.body).toMatchObject({ status: "success", total: 7, page: 1, limit: 20, pages: 1 });
      expect(res.body.data.map((t: { reference: string }) => t.reference)).toEqual([...references].reverse());
      // The published fields first, then what the gateway knows beyond them (extra keys are fine for legacy clients).
      expect(Object.keys(res.body.data[0])).toEqual([
        "id", "reference", "amount", "status", "created_at",
        "payment_method", "currency", "client_reference", "provider_reference", "failure_code", "failure_reason",
        "amount_refunded", "refunded", "disputed", "dispute_status", "fee", "net",
      ]);
    });

    it("pages: a full page, the last page, a page beyond the end", async () => {
      const first = await client.get("/api/transactions/list?limit=3&page=1");
      expect(first.body).toMatchObject({ total: 7, page: 1, limit: 3, pages: 3 });
      expect(first.body.data).toHaveLength(3);
      const last = await client.get("/api/transactions/list?limit=3&page=3");
      expect(last.body.data.map((t: { reference: string }) => t.reference)).toEqual([references[0]]);
      const beyond = await client.get("/api/transactions/list?limit=3&page=4");
      expect(beyond.status).toBe(200);
      expect(beyond.body).toMatchObject({ data: [], total: 7, page: 4, limit: 3, pages: 3 });
    });

    it("an empty list has total 0 and pages 0", async () => {
      const empty = await gw.createMerchant();
      const res = await apiClient(gw.url, empty.testKey).get("/api/transactions/list");
      expect(res.body).toEqual({ status: "success", data: [], total: 0, page: 1, limit: 20, pages: 0 });
    });

    it("filters by status and by an inclusive UTC date range", async () => {
      const completed = await client.get("/api/transactions/list?status=completed");
      expect(completed.body.data.map((t: { reference: string }) => t.reference)).toEqual([references[6], references[5]]);
      const range = await client.get("/api/transactions/list?date_from=2024-01-02&date_to=2024-01-04");
      expect(range.body.total).toBe(3);
      expect(range.body.data.map((t: { reference: string }) => t.reference)).toEqual([references[3], references[2], references[1]]);
      const oneDay = await client.get("/api/transactions/list?date_from=2024-01-07&date_to=2024-01-07&status=completed");
      expect(oneDay.body.total).toBe(1);
      const pendingFrom = await client.get("/api/transactions/list?date_from=2024-01-05&status=pending");
      expect(pendingFrom.body.data.map((t: { reference: string }) => t.reference)).toEqual([references[4]]);
    });

    it.each([
      ["page=0", "page: must be a positive integer"],
      ["page=abc", "page: must be an integer"],
      ["limit=101", "limit: must be at most 100"],
      ["limit=0", "limit: must be a positive integer"],
      ["status=foo", "status: must be one of pending, completed, failed"],
      ["date_from=2024-13-45", "date_from: must be a date in YYYY-MM-DD format"],
      ["date_to=2024-02-30", "date_to: must be a date in YYYY-MM-DD format"],
      ["date_from=01-01-2024", "date_from: must be a date in YYYY-MM-DD format"],
      ["date_from=2024-02-02&date_to=2024-02-01", "date_from: must not be after date_to"],
    ])("?%s is a 400 naming the parameter", async (query, message) => {
      const res = await client.get(`/api/transactions/list?${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: "error", message, code: "validation_failed", errors: expect.arrayContaining([expect.objectContaining({ field: expect.any(String), message: expect.any(String) })]) });
    });

    it("returns the same records as the GraphQL transactionsPage query (parity)", async () => {
      const rest = await client.get("/api/transactions/list?limit=4&page=2&status=pending");
      const gql = await client.graphql(TransactionsPage, { limit: 4, page: 2, status: "pending" });
      const page = gql.body.data!.transactionsPage;
      if (page.__typename !== "TransactionPage") throw new Error("expected a page");
      expect({ total: page.total, page: page.page, limit: page.limit, pages: page.pages }).toEqual({
        total: rest.body.total,
        page: rest.body.page,
        limit: rest.body.limit,
        pages: rest.body.pages,
      });
      expect(page.items.map(asLegacyListItem)).toEqual(rest.body.data);
    });

    it("returns the same transaction from verify and from the transaction query (parity)", async () => {
      const rest = await client.get(`/api/transactions/verify/${references[6]}`);
      const gql = await client.graphql(TransactionByReference, { reference: references[6]! });
      const t = gql.body.data!.transaction;
      if (t.__typename !== "Transaction") throw new Error("expected a transaction");
      expect({ ...asLegacyListItem(t), metadata: t.metadata ?? null }).toEqual(rest.body.transaction);
      expect(rest.body.transaction.provider_reference).toMatch(/^sbx_/);
    });

    it("pages with Relay cursors and totalCount", async () => {
      const seen: string[] = [];
      let after: string | null | undefined;
      for (let i = 0; i < 4; i++) {
        const res = await client.graphql(TransactionsConnection, { first: 3, after });
        const connection = res.body.data!.transactions;
        expect(connection.totalCount).toBe(7);
        seen.push(...connection.edges.map((e) => e.node.reference));
        if (!connection.pageInfo.hasNextPage) break;
        after = connection.pageInfo.endCursor;
      }
      expect(seen).toEqual([...references].reverse());
      const completed = await client.graphql(TransactionsConnection, { first: 10, status: "completed" });
      expect(completed.body.data!.transactions.totalCount).toBe(2);
    });

    it("a bad filter on the connection is a GraphQL error with its code, not a masked 500", async () => {
      const res = await client.post("/graphql", { query: '{ transactions(first: 2, dateFrom: "2024-13-45") { totalCount } }' });
      expect(res.status).toBe(200);
      expect(res.body.errors[0]).toMatchObject({ message: "date_from: must be a date in YYYY-MM-DD format", extensions: { code: "validation_failed" } });
    });

    it("never lists another merchant's or the other mode's transactions", async () => {
      const live = await apiClient(gw.url, lister.liveKey).get("/api/transactions/list");
      expect(live.body.total).toBe(0);
      const foreign = await apiClient(gw.url, other.testKey).get("/api/transactions/list");
      expect(foreign.body.data.map((t: { reference: string }) => t.reference)).not.toContain(references[0]);
    });
  });
});
