import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { startWebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * Issue 21's frictions: the provider's receipt on every read and searchable, initialize keeping
 * `reference` and `metadata`, and the missing reads GET /v1/payouts and GET /v1/collections/stk/:reference,
 * each scoped to the key's merchant and mode.
 */
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SUCCESS_CARD = { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "408" };

const Search = graphql(`
  query SearchTransactions($search: String, $status: TransactionStatus) {
    transactionsPage(search: $search, status: $status, limit: 100) {
      __typename
      ... on TransactionPage {
        total
        items { reference providerReference }
      }
    }
    transactions(first: 50, search: $search, status: $status) {
      totalCount
      edges { node { reference } }
    }
  }
`);

const Detail = graphql(`
  query TransactionDetail($reference: String!) {
    transaction(reference: $reference) {
      __typename
      ... on Transaction { clientReference providerReference failureCode metadata }
    }
  }
`);

const Initialize = graphql(`
  mutation InitializeWithMetadata($input: InitializeTransactionInput!) {
    initializeTransaction(input: $input) {
      __typename
      ... on ValidationError { field message }
      ... on InitializeTransactionPayload {
        reference
        transaction { clientReference metadata }
      }
    }
  }
`);

describe("transaction fields, search and the v1 reads", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  let other: TestMerchant;
  let api: ReturnType<typeof apiClient>;
  let live: ReturnType<typeof apiClient>;
  let otherApi: ReturnType<typeof apiClient>;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;

  const pay = (reference: string) => apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, SUCCESS_CARD);
  const refs = (body: { data: { reference: string }[] }) => body.data.map((t) => t.reference);
  const transactionCount = () => gw.gateway.db.prisma.transaction.count({ where: { merchantId: merchant.id } });

  async function initialize(body: Record<string, unknown>, client = api, headers?: Record<string, string>) {
    const res = await client.post("/api/transactions/initialize", { amount: 1500, email: "payer@example.com", ...body }, headers);
    expect(res.status, res.text).toBe(200);
    return res.body.reference as string;
  }

  /** A sandbox STK push, answered by the sandbox after SANDBOX_STK_DELAY_MS; resolves with its settled stk-status body. */
  async function settledPush(phone: string, client = api, reference?: string) {
    const push = await client.post("/api/momo/stk-push", { amount: 10000, phone_number: phone, ...(reference ? { reference } : {}) });
    expect(push.status, push.text).toBe(200);
    const ref = push.body.transaction.reference as string;
    const settled = await until(
      () => client.get(`/api/momo/stk-status/${ref}`),
      (res) => res.body.transaction?.status !== "pending",
    );
    return settled.body.transaction as Record<string, unknown> & { reference: string };
  }

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    gw = await startTestGateway({
      env: { PUBLIC_BASE_URL: "https://pay.example.test", WEBHOOK_ALLOW_PRIVATE_URLS: "true", RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "20" },
    });
    merchant = await gw.createMerchant("Fields");
    other = await gw.createMerchant("Other");
    api = apiClient(gw.url, merchant.testKey);
    live = apiClient(gw.url, merchant.liveKey);
    otherApi = apiClient(gw.url, other.testKey);
    for (const client of [api, otherApi]) {
      const channel = await client.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
      expect(channel.status, channel.text).toBe(201);
    }
  });
  afterAll(async () => {
    await gw?.close();
    await receiver?.close();
  });

  describe("the provider's receipt on every read", () => {
    it("stk-status, verify, the list and GraphQL show an STK push's M-Pesa receipt, currency and failure", async () => {
      const paid = await settledPush("254708374149", api, "ACC-7");
      expect(paid).toMatchObject({ status: "completed", currency: "KES", client_reference: "ACC-7", failure_code: null, failure_reason: null });
      expect(paid.provider_reference).toMatch(/^SBX[0-9A-F]{7}$/);
      const receipt = paid.provider_reference as string;

      const verify = await api.get(`/api/transactions/verify/${paid.reference}`);
      expect(verify.body.transaction).toMatchObject({ reference: paid.reference, currency: "KES", provider_reference: receipt, failure_code: null, metadata: null });
      const listed = await api.get(`/api/transactions/list?search=${receipt}`);
      expect(listed.body.data).toEqual([expect.objectContaining({ reference: paid.reference, currency: "KES", payment_method: "momo_stk", provider_reference: receipt })]);
      const gql = await api.graphql(Detail, { reference: paid.reference });
      expect(gql.body.data!.transaction).toMatchObject({ providerReference: receipt, clientReference: "ACC-7" });

      const cancelled = await settledPush("254700001032");
      expect(cancelled).toMatchObject({ status: "failed", provider_reference: null, failure_code: "1032", failure_reason: expect.any(String) });
      const failedItem = (await api.get(`/api/transactions/list?status=failed`)).body.data.find((t: { reference: string }) => t.reference === cancelled.reference);
      expect(failedItem).toMatchObject({ failure_code: "1032", provider_reference: null });
    });

    it("verify shows a card payment's provider reference", async () => {
      const reference = await initialize({});
      expect((await pay(reference)).status).toBe(200);
      const verify = await api.get(`/api/transactions/verify/${reference}`);
      expect(verify.body.transaction.provider_reference).toMatch(/^sbx_/);
      expect(verify.body.status).toBe("completed");
    });
  });

  describe("search on the transaction list", () => {
    let card: string;
    let receipt: string;
    let push: string;

    beforeAll(async () => {
      card = await initialize({ email: "Search.Payer@Example.com", phone: "+254711222333", reference: "ORD-SEARCH-1" });
      expect((await pay(card)).status).toBe(200);
      receipt = (await api.get(`/api/transactions/verify/${card}`)).body.transaction.provider_reference;
      await initialize({ email: "someone.else@example.com" });
      push = (await settledPush("254711222333")).reference;
      // Another merchant with the same e-mail, phone and client reference: never in this merchant's results.
      await initialize({ email: "search.payer@example.com", phone: "+254711222333", reference: "ORD-SEARCH-1" }, otherApi);
    });

    it.each([
      ["the gateway's reference", () => card, () => [card]],
      ["the client reference", () => "ORD-SEARCH-1", () => [card]],
      ["the provider's receipt", () => receipt, () => [card]],
      ["the e-mail in another case", () => "SEARCH.PAYER@example.COM", () => [card]],
      ["the phone as 254...", () => "254711222333", () => [push, card]],
      ["the phone as +254...", () => "+254711222333", () => [push, card]],
      ["the phone as 07...", () => "0711222333", () => [push, card]],
      ["a prefix of the client reference (exact match only)", () => "ORD-SEARCH", () => []],
      ["part of the e-mail (exact match only)", () => "search.payer", () => []],
    ])("matches %s", async (_what, term, expected) => {
      const res = await api.get(`/api/transactions/list?search=${encodeURIComponent(term())}`);
      expect(res.status, res.text).toBe(200);
      expect(refs(res.body)).toEqual(expected());
      expect(res.body.total).toBe(expected().length);
    });

    it("combines with the other filters, and GraphQL's page and connection take the same search", async () => {
      expect(refs((await api.get(`/api/transactions/list?search=254711222333&status=completed&limit=1&page=2`)).body)).toEqual([card]);
      expect((await api.get(`/api/transactions/list?search=ORD-SEARCH-1&status=pending`)).body.total).toBe(0);
      const gql = await api.graphql(Search, { search: "+254711222333" });
      const page = gql.body.data!.transactionsPage;
      if (page.__typename !== "TransactionPage") throw new Error(gql.text);
      expect(page.items.map((t) => t.reference)).toEqual([push, card]);
      expect(page.items[1]!.providerReference).toBe(receipt);
      expect(gql.body.data!.transactions.totalCount).toBe(2);
      expect(gql.body.data!.transactions.edges.map((e) => e.node.reference)).toEqual([push, card]);
    });

    it("never finds another merchant's or the other mode's transactions", async () => {
      for (const term of [card, "ORD-SEARCH-1", receipt, "search.payer@example.com"]) {
        expect((await live.get(`/api/transactions/list?search=${term}`)).body.total, term).toBe(0);
        expect((await otherApi.get(`/api/transactions/list?search=${card}`)).body.total, term).toBe(0);
      }
      expect((await otherApi.get(`/api/transactions/list?search=ORD-SEARCH-1`)).body.total).toBe(1);
    });

    it("a search over 100 characters is a 400 naming it", async () => {
      const res = await api.get(`/api/transactions/list?search=${"x".repeat(101)}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: "error", message: "search: must be at most 100 characters", code: "validation_failed", errors: [{ field: "search", message: "must be at most 100 characters" }] });
    });

    it("is answered from the indexes of each searched column (a BitmapOr), not by reading the merchant's rows", async () => {
      const bulk = await gw.createMerchant("Bulk");
      const prisma = gw.gateway.db.prisma;
      // Enough rows that reading the merchant's rows would cost more than the indexes: the planner shows what it can use.
      await prisma.$executeRawUnsafe(
        `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, phone_number, client_reference, provider_reference, updated_at)
         SELECT $1, 'test', 'bulk-' || g, 'bulkac-' || g, 100, 'KES', 'completed', 'p' || g || '@example.com', '+2547' || lpad(g::text, 8, '0'),
           'client-' || g, 'RCPT' || g, now()
         FROM generate_series(1, 5000) g`,
        bulk.id,
      );
      await prisma.$executeRawUnsafe("ANALYZE transactions");
      const plan = await prisma.$queryRawUnsafe<{ "QUERY PLAN": string }[]>(
        `EXPLAIN SELECT count(*) FROM transactions WHERE merchant_id = $1 AND mode = 'test'::"Mode"
           AND (reference = $2 OR client_reference = $2 OR provider_reference = $2 OR email = $3 OR phone_number = $4)`,
        bulk.id,
        "client-42",
        "client-42",
        "+254700000042",
      );
      const text = plan.map((row) => row["QUERY PLAN"]).join("\n");
      expect(text, text).toContain("BitmapOr");
      for (const index of ["transactions_reference_key", "client_reference_idx", "provider_reference_idx", "email_idx", "phone_number_idx"]) {
        expect(text, text).toContain(index);
      }
      expect(text).not.toContain("Seq Scan");
      const found = await apiClient(gw.url, bulk.testKey).get("/api/transactions/list?search=RCPT4242");
      expect(refs(found.body)).toEqual(["bulk-4242"]);
    });
  });

  describe("initialize keeps reference and metadata", () => {
    const metadata = { order_id: 1001, cart: [{ sku: "A-1", qty: 2, price: 750 }], note: "ünïcödé ✓", gift: false, coupon: null };

    it("stores reference as the client reference and echoes metadata in verify, GraphQL and the webhook", async () => {
      const endpoint = await api.post("/v1/webhooks", { url: `${receiver.url}/hooks`, events: ["transaction.completed"] });
      expect(endpoint.status, endpoint.text).toBe(201);
      const reference = await initialize({ reference: "ORDER-1001", metadata });
      const verify = await api.get(`/api/transactions/verify/${reference}`);
      expect(verify.body.transaction).toMatchObject({ client_reference: "ORDER-1001", metadata });
      const gql = await api.graphql(Detail, { reference });
      expect(gql.body.data!.transaction).toMatchObject({ clientReference: "ORDER-1001", metadata });

      expect((await pay(reference)).status).toBe(200);
      const [delivery] = await receiver.waitFor(1);
      expect(delivery!.json).toMatchObject({ type: "transaction.completed", data: { reference, client_reference: "ORDER-1001", metadata } });
    });

    it("stores them too when the request carries an Idempotency-Key (the other insert path)", async () => {
      const reference = await initialize({ reference: "ORDER-1002", metadata }, api, { "idempotency-key": `init-${Date.now()}` });
      expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction).toMatchObject({ client_reference: "ORDER-1002", metadata });
    });

    it("a repeated reference is accepted: it is the merchant's own; the gateway's reference stays the key", async () => {
      const first = await initialize({ reference: "REPEATED-1" });
      const second = await initialize({ reference: "REPEATED-1" });
      expect(first).not.toBe(second);
      expect(refs((await api.get("/api/transactions/list?search=REPEATED-1")).body)).toEqual([second, first]);
    });

    it("accepts metadata of exactly 8 KB serialized", async () => {
      const exact = { pad: "" };
      exact.pad = "x".repeat(8192 - JSON.stringify(exact).length);
      expect(Buffer.byteLength(JSON.stringify(exact))).toBe(8192);
      const reference = await initialize({ metadata: exact });
      expect((await api.get(`/api/transactions/verify/${reference}`)).body.transaction.metadata).toEqual(exact);
    });

    const deep = (levels: number): Record<string, unknown> => (levels === 1 ? { leaf: true } : { next: deep(levels - 1) });
    it.each([
      ["an array", [1, 2], "metadata: must be a JSON object"],
      ["a string", "order 42", "metadata: must be a JSON object"],
      ["a number", 42, "metadata: must be a JSON object"],
      ["a boolean", true, "metadata: must be a JSON object"],
      ["over 8 KB", { pad: "é".repeat(4100) }, "metadata: must be at most 8192 bytes as JSON (8 KB)"],
      ["nested 11 levels", deep(11), "metadata: must be nested at most 10 levels deep"],
    ])("metadata that is %s is a 400 naming it, and nothing is stored", async (_what, value, message) => {
      const before = await transactionCount();
      const res = await api.post("/api/transactions/initialize", { amount: 1500, email: "payer@example.com", metadata: value });
      expect(res.status, res.text).toBe(400);
      expect(res.body).toEqual({ status: "error", message, code: "validation_failed", errors: expect.arrayContaining([expect.objectContaining({ field: expect.any(String), message: expect.any(String) })]) });
      expect(await transactionCount()).toBe(before);
    });

    it("metadata with text PostgreSQL cannot store (a lone surrogate, NUL) is a 400 naming metadata, never a 500", async () => {
      for (const raw of ['{"note":"\\ud800"}', '{"\\udfff":1}', '{"note":"a\\u0000b"}']) {
        const res = await api.post("/api/transactions/initialize", `{"amount":1500,"email":"payer@example.com","metadata":${raw}}`);
        expect(res.status, `${raw}: ${res.text}`).toBe(400);
        expect(res.body.code).toBe("validation_failed");
        expect(res.body.message).toMatch(/^metadata/);
      }
    });

    it.each([
      [42, "reference: must be a string"],
      ["R".repeat(101), "reference: must be at most 100 characters"],
    ])("reference %j is a 400 naming it", async (reference, message) => {
      const res = await api.post("/api/transactions/initialize", { amount: 1500, email: "payer@example.com", reference });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: "error", message, code: "validation_failed", errors: expect.arrayContaining([expect.objectContaining({ field: expect.any(String), message: expect.any(String) })]) });
    });

    it("GraphQL initializeTransaction takes them too, with a typed error naming metadata", async () => {
      const ok = await api.graphql(Initialize, { input: { amount: 1500, email: "gql@example.com", reference: "GQL-1", metadata: { a: 1 } } });
      expect(ok.body.data!.initializeTransaction).toMatchObject({ __typename: "InitializeTransactionPayload", transaction: { clientReference: "GQL-1", metadata: { a: 1 } } });
      const bad = await api.graphql(Initialize, { input: { amount: 1500, email: "gql@example.com", metadata: ["a"] } });
      expect(bad.body.data!.initializeTransaction).toMatchObject({ __typename: "ValidationError", field: "metadata" });
    });
  });

  describe("GET /v1/payouts", () => {
    const payoutRefs: string[] = [];
    let failing: string;

    beforeAll(async () => {
      for (const phone of ["254708374149", "254700000001", "254708374149"]) {
        const res = await api.post("/v1/payouts", { amount: 150000, phone_number: phone, reference: `SELLER-${phone}` });
        expect(res.status, res.text).toBe(201);
        payoutRefs.push(res.body.data.reference);
      }
      failing = payoutRefs[1]!;
      expect((await otherApi.post("/v1/payouts", { amount: 150000, phone_number: "254708374149" })).status).toBe(201);
      await until(() => api.get(`/v1/payouts/${failing}`), (res) => res.body.data.status === "failed");
    });

    it("pages the merchant's payouts, newest first, in the transaction list's envelope", async () => {
      const res = await api.get("/v1/payouts");
      expect(res.status, res.text).toBe(200);
      // The /api list's keys, and the zone its days are counted in (the /v1 lists use the merchant's).
      expect(Object.keys(res.body)).toEqual([...Object.keys((await api.get("/api/transactions/list")).body), "timezone"]);
      expect(res.body).toMatchObject({ status: "success", total: 3, page: 1, limit: 20, pages: 1 });
      expect(refs(res.body)).toEqual([...payoutRefs].reverse());
      expect(res.body.data[1]).toEqual((await api.get(`/v1/payouts/${failing}`)).body.data);
      expect(res.body.data[1]).toMatchObject({ status: "failed", failure_code: "1", created_at: expect.stringMatching(ISO_MS) });

      const second = await api.get("/v1/payouts?limit=2&page=2");
      expect(second.body).toMatchObject({ total: 3, page: 2, limit: 2, pages: 2 });
      expect(refs(second.body)).toEqual([payoutRefs[0]]);
    });

    it("filters by status and date", async () => {
      expect(refs((await api.get("/v1/payouts?status=failed")).body)).toEqual([failing]);
      const today = new Date().toISOString().slice(0, 10);
      expect((await api.get(`/v1/payouts?date_from=${today}&date_to=${today}`)).body.total).toBe(3);
      expect((await api.get("/v1/payouts?date_from=2001-01-01&date_to=2001-12-31")).body).toEqual({ status: "success", data: [], total: 0, page: 1, limit: 20, pages: 0, timezone: "UTC" });
    });

    it.each([
      ["status=paid", "status: must be one of pending, completed, failed"],
      ["date_from=2024-13-45", "date_from: must be a date in YYYY-MM-DD format"],
      ["limit=101", "limit: must be at most 100"],
      ["page=0", "page: must be a positive integer"],
    ])("?%s is a 400 naming the parameter", async (query, message) => {
      const res = await api.get(`/v1/payouts?${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ status: "error", message, code: "validation_failed", errors: expect.arrayContaining([expect.objectContaining({ field: expect.any(String), message: expect.any(String) })]) });
    });

    it("never lists another merchant's payouts or the other mode's", async () => {
      const theirs = await otherApi.get("/v1/payouts");
      expect(theirs.body.total).toBe(1);
      expect(refs(theirs.body).some((r) => payoutRefs.includes(r))).toBe(false);
      expect((await live.get("/v1/payouts")).body).toEqual({ status: "success", data: [], total: 0, page: 1, limit: 20, pages: 0, timezone: "UTC" });
    });
  });

  describe("GET /v1/collections/stk/:reference", () => {
    it("answers the STK collection in the v1 envelope", async () => {
      const settled = await settledPush("254708374149", api, "V1-READ");
      const res = await api.get(`/v1/collections/stk/${settled.reference}`);
      expect(res.status, res.text).toBe(200);
      expect(Object.keys(res.body)).toEqual(["status", "data"]);
      expect(res.body.data).toMatchObject({
        reference: settled.reference,
        client_reference: "V1-READ",
        amount: 10000,
        currency: "KES",
        phone_number: "254708374149",
        status: "completed",
        payment_method: "momo_stk",
        checkout_request_id: expect.stringMatching(/^ws_CO_/),
        provider_reference: settled.provider_reference,
        failure_code: null,
        completed_at: expect.stringMatching(ISO_MS),
      });
    });

    it("is a 404 envelope for another merchant's, the other mode's, a card payment's or an unknown reference", async () => {
      const stk = (await settledPush("254708374149")).reference;
      const card = await initialize({});
      const notFound = { status: "error", message: expect.stringMatching(/not found/i), code: "not_found" };
      for (const [client, reference] of [
        [otherApi, stk],
        [live, stk],
        [api, card],
        [api, "txn-unknown"],
      ] as const) {
        const res = await client.get(`/v1/collections/stk/${reference}`);
        expect(res.status, `${reference}: ${res.text}`).toBe(404);
        expect(res.body).toEqual(notFound);
      }
      // The same answer for each, so a 404 tells nothing about whose reference it is.
      const texts = await Promise.all([otherApi.get(`/v1/collections/stk/${stk}`), api.get("/v1/collections/stk/txn-unknown")]);
      expect(texts[0]!.text).toBe(texts[1]!.text);
    });
  });
});
