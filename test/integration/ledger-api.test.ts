import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, bearerClient, paidTransaction, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { csvRows } from "../support/csv.ts";
import { until } from "../support/wait.ts";

/**
 * The ledger's read API over real HTTP: /v1/balance, /v1/balance/transactions, the streamed CSV report, GraphQL's
 * balance, balanceTransactions and createAdjustment. Money moved by the real flows on the sandbox (card payments
 * with a fee schedule, refunds that complete and fail, payouts that complete and fail); the invariant
 * sum(net) == available + pending_out checked at rest and with a refund in flight.
 */
const BALANCE_KEYS = ["payment_channel_id", "provider", "currency", "collected", "fees", "refunded", "paid_out", "pending_out", "adjustments", "disputed", "charged_back", "available"];
const ITEM_KEYS = ["id", "type", "amount", "fee", "net", "currency", "payment_channel_id", "source_reference", "created_at"];
const CSV_HEADER = ["id", "type", "amount", "fee", "net", "currency", "payment_channel_id", "source_reference", "description", "created_at", "date", "timezone"];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const NEXT_YEAR = new Date().getUTCFullYear() + 1;
const card = (number: string) => ({ card_number: number, expiry_month: 12, expiry_year: NEXT_YEAR, cvc: "123" });
const REFUND_FAILS_CARD = "4000000000005126";

let gw: TestGateway;
let merchant: TestMerchant;
let api: ReturnType<typeof apiClient>;
let channelId: number;
let ownerToken: string;

const login = async (email: string, password: string, mode: "test" | "live" = "test") => {
  const res = await apiClient(gw.url).post("/v1/auth/login", { email, password, mode });
  expect(res.status, res.text).toBe(200);
  return res.body.data.access_token as string;
};

const pay = (amount: number, number = "4242424242424242") =>
  paidTransaction(gw.url, merchant.testKey, { amount, email: "payer@example.com", currency: "KES" }, card(number));

/** Every balance transaction of a query, through every page. */
async function allTransactions(client: ReturnType<typeof apiClient>, query = ""): Promise<any[]> {
  const items: any[] = [];
  for (let page = 1; ; page++) {
    const res = await client.get(`/v1/balance/transactions?limit=100&page=${page}${query ? `&${query}` : ""}`);
    expect(res.status, res.text).toBe(200);
    items.push(...res.body.data);
    if (page >= res.body.pages) return items;
  }
}

async function balanceOf(client: ReturnType<typeof apiClient>, channel: number) {
  const res = await client.get(`/v1/balance?payment_channel_id=${channel}`);
  expect(res.status, res.text).toBe(200);
  expect(res.body.data.length, res.text).toBeLessThanOrEqual(1);
  return res.body.data[0];
}

/** The invariant: the sum of net over a channel's balance transactions is what the provider holds for the merchant. */
async function expectNetMatchesHolding(client: ReturnType<typeof apiClient>, channel: number) {
  const b = await balanceOf(client, channel);
  const items = await allTransactions(client, `payment_channel_id=${channel}`);
  expect(items.reduce((sum, i) => sum + i.net, 0)).toBe(b.available + b.pending_out);
  return b;
}

/** The CSV as objects keyed by its header, after checking the header. */
function csvRecords(res: HttpResult): Record<string, string>[] {
  const [header, ...rows] = csvRows(res.text);
  expect(header).toEqual(CSV_HEADER);
  for (const r of rows) expect(r).toHaveLength(CSV_HEADER.length);
  return rows.map((r) => Object.fromEntries(CSV_HEADER.map((name, i) => [name, r[i]!])));
}

const ADJUST = `mutation($input: CreateAdjustmentInput!) {
  createAdjustment(input: $input) {
    __typename
    ... on Error { code message }
    ... on BalanceTransaction { id databaseId type amount fee net currency paymentChannelId sourceReference description createdAt }
  }
}`;
const adjust = (client: ReturnType<typeof apiClient>, input: Record<string, unknown>, headers?: Record<string, string>) =>
  client.post("/graphql", { query: ADJUST, variables: { input } }, headers);

beforeAll(async () => {
  gw = await startTestGateway({
    env: { SANDBOX_REFUND_DELAY_MS: "200", SANDBOX_STK_DELAY_MS: "50", JOB_POLL_INTERVAL_MS: "50", RATE_LIMIT_ENABLED: "false" },
  });
  merchant = await gw.createMerchant("Ledger API");
  api = apiClient(gw.url, merchant.testKey);
  const channel = await api.post("/api/payment-channels/create", { name: "Fees", provider: "sandbox", config: {}, fee_percent_bps: 150, fee_fixed: 10 });
  expect(channel.status, channel.text).toBe(201);
  channelId = channel.body.channel.id;
  const owner = await gw.createUser(merchant.id, "owner");
  ownerToken = await login(owner.email, owner.password);
});
afterAll(() => gw?.close());

describe("balances and balance transactions from the real flows", () => {
  it("payments with fees, a partial, a full and a failed refund, a completed and a failed payout: exact figures, the invariant throughout", async () => {
    const first = await pay(20_001); // fee round(300.015) + 10 = 310
    const second = await pay(10_000); // fee 150 + 10 = 160
    const third = await pay(5_000, REFUND_FAILS_CARD); // fee 75 + 10 = 85

    const partial = await api.post("/v1/refunds", { transaction: first, amount: 4_000 });
    const full = await api.post("/v1/refunds", { transaction: second });
    const failing = await api.post("/v1/refunds", { transaction: third });
    const paidOut = await api.post("/v1/payouts", { amount: 3_000, phone_number: "254708374149" });
    const failedPayout = await api.post("/v1/payouts", { amount: 1_000, phone_number: "254700000001" });
    for (const r of [partial, full, failing, paidOut, failedPayout]) expect(r.status, r.text).toBe(201);
    for (const [path, id] of [["refunds", partial.body.data.id], ["refunds", full.body.data.id], ["refunds", failing.body.data.id], ["payouts", paidOut.body.data.id], ["payouts", failedPayout.body.data.id]]) {
      await until(() => api.get(`/v1/${path}/${id}`), (r) => r.body?.data?.status !== "pending");
    }

    const res = await api.get("/v1/balance");
    expect(res.status, res.text).toBe(200);
    expect(res.body.status).toBe("success");
    expect(res.body.data).toHaveLength(1);
    expect(Object.keys(res.body.data[0])).toEqual(BALANCE_KEYS);
    expect(res.body.data[0]).toEqual({
      payment_channel_id: channelId, provider: "sandbox", currency: "KES",
      collected: 35_001, fees: 555, refunded: 14_000, paid_out: 3_000, pending_out: 0, adjustments: 0, disputed: 0, charged_back: 0,
      available: 35_001 - 555 - 14_000 - 3_000,
    });
    await expectNetMatchesHolding(api, channelId);

    const list = await api.get("/v1/balance/transactions?limit=100");
    expect(list.status, list.text).toBe(200);
    expect(list.body).toMatchObject({ status: "success", total: 8, page: 1, limit: 100, pages: 1 });
    for (const item of list.body.data) {
      expect(Object.keys(item)).toEqual(ITEM_KEYS);
      expect(item.created_at).toMatch(ISO_MS);
      expect(item.net).toBe(item.amount - item.fee);
      expect(item).toMatchObject({ currency: "KES", payment_channel_id: channelId });
    }
    const bySource = (reference: string) => list.body.data.filter((i: any) => i.source_reference === reference).map((i: any) => ({ type: i.type, amount: i.amount, fee: i.fee, net: i.net }));
    expect(bySource(first)).toEqual([{ type: "payment", amount: 20_001, fee: 310, net: 19_691 }]);
    expect(bySource(second)).toEqual([{ type: "payment", amount: 10_000, fee: 160, net: 9_840 }]);
    expect(bySource(third)).toEqual([{ type: "payment", amount: 5_000, fee: 85, net: 4_915 }]);
    expect(bySource(partial.body.data.reference)).toEqual([{ type: "refund", amount: -4_000, fee: 0, net: -4_000 }]);
    expect(bySource(full.body.data.reference)).toEqual([{ type: "refund", amount: -10_000, fee: 0, net: -10_000 }]);
    expect(bySource(failing.body.data.reference)).toEqual([{ type: "refund_failure", amount: 0, fee: 0, net: 0 }]);
    expect(bySource(paidOut.body.data.reference)).toEqual([{ type: "payout", amount: -3_000, fee: 0, net: -3_000 }]);
    expect(bySource(failedPayout.body.data.reference)).toEqual([{ type: "payout_failure", amount: 0, fee: 0, net: 0 }]);
    // Newest first: created_at never increases down the list, and an id breaks a tie downwards.
    const order = list.body.data.map((i: any) => [Date.parse(i.created_at), i.id]);
    for (let k = 1; k < order.length; k++) expect(order[k - 1][0] > order[k][0] || (order[k - 1][0] === order[k][0] && order[k - 1][1] > order[k][1])).toBe(true);
  });

  it("filters by type, channel and date, pages, and answers bad filters with the 400 envelope", async () => {
    const all = (await api.get("/v1/balance/transactions?limit=100")).body.data;
    expect(all.length).toBeGreaterThanOrEqual(8);
    const payments = await api.get("/v1/balance/transactions?type=payment");
    expect(payments.body.data.map((i: any) => i.type)).toEqual(["payment", "payment", "payment"]);
    expect(payments.body.total).toBe(3);
    expect((await api.get(`/v1/balance/transactions?type=refund_failure&payment_channel_id=${channelId}`)).body.total).toBe(1);

    const other = await api.post("/api/payment-channels/create", { name: "Quiet", provider: "sandbox", config: {} });
    expect((await api.get(`/v1/balance/transactions?payment_channel_id=${other.body.channel.id}`)).body).toMatchObject({ data: [], total: 0, pages: 0 });
    expect((await api.get(`/v1/balance?payment_channel_id=${other.body.channel.id}`)).body).toEqual({ status: "success", data: [] });

    const today = new Date().toISOString().slice(0, 10);
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    expect((await api.get(`/v1/balance/transactions?date_from=${today}&date_to=${today}&limit=100`)).body.total).toBe(all.length);
    expect((await api.get(`/v1/balance/transactions?date_to=${yesterday}`)).body).toMatchObject({ data: [], total: 0 });

    const page2 = await api.get("/v1/balance/transactions?limit=3&page=2");
    expect(page2.body).toMatchObject({ total: all.length, page: 2, limit: 3, pages: Math.ceil(all.length / 3) });
    expect(page2.body.data).toEqual(all.slice(3, 6));

    const bad: [string, RegExp][] = [
      ["type=refund_reservation", /^type: must be one of payment, refund, refund_failure, payout, payout_failure, adjustment, dispute_hold, dispute_release, dispute_loss$/],
      ["type=nonsense", /^type: must be one of/],
      ["payment_channel_id=abc", /^payment_channel_id: must be an integer/],
      ["payment_channel_id=0", /^payment_channel_id: must be a positive integer/],
      ["date_from=2024-13-01", /^date_from: must be a date in YYYY-MM-DD format/],
      ["date_to=2024-02-30", /^date_to: must be a date in YYYY-MM-DD format/],
      ["date_from=2024-03-02&date_to=2024-03-01", /^date_from: must not be after date_to/],
      ["limit=101", /^limit: must be at most 100/],
      ["page=0", /^page: must be a positive integer/],
    ];
    for (const [query, message] of bad) {
      for (const path of ["/v1/balance/transactions", "/v1/reports/balance-transactions.csv"]) {
        if (path.endsWith(".csv") && /^(limit|page)=/.test(query)) continue; // the CSV has no paging
        const res = await api.get(`${path}?${query}`);
        expect(res.status, `${path}?${query}: ${res.text}`).toBe(400);
        expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
        expect(res.body.message).toMatch(message);
      }
    }
    expect((await api.get("/v1/balance?payment_channel_id=x")).status).toBe(400);
  });
});

describe("with a refund in flight", () => {
  // Its own gateway, whose job runner is off: a sandbox refund settles only when the refund.check job asks,
  // so this one stays pending however slow the machine (a timed window was flaky on a busy CPU).
  let held: TestGateway;
  beforeAll(async () => {
    held = await startTestGateway({ env: { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" } });
  });
  afterAll(() => held?.close());

  it("the reservation is pending_out, not a balance transaction, and sum(net) is still available + pending_out", async () => {
    const m = await held.createMerchant();
    const client = apiClient(held.url, m.testKey);
    const channel = await client.post("/api/payment-channels/create", { name: "Fees", provider: "sandbox", config: {}, fee_percent_bps: 150, fee_fixed: 10 });
    const reference = await paidTransaction(held.url, m.testKey, { amount: 10_000, email: "payer@example.com", currency: "KES" }, card("4242424242424242"));
    const refund = await client.post("/v1/refunds", { transaction: reference, amount: 4_000 });
    expect(refund.body.data?.status, refund.text).toBe("pending");
    const b = await expectNetMatchesHolding(client, channel.body.channel.id);
    expect(b).toMatchObject({ collected: 10_000, fees: 160, refunded: 0, pending_out: 4_000, available: 10_000 - 160 - 4_000 });
    expect((await allTransactions(client)).map((i) => [i.type, i.amount, i.net])).toEqual([["payment", 10_000, 9_840]]);
    expect((await client.get(`/v1/refunds/${refund.body.data.id}`)).body.data.status).toBe("pending");
  });
});

describe("createAdjustment", () => {
  it("is a signed-in owner's: its entry moves available, carries the note, and honours Idempotency-Key", async () => {
    const owner = bearerClient(gw.url, ownerToken);
    const before = await balanceOf(api, channelId);
    const res = await adjust(owner, { paymentChannelId: channelId, amount: -1_234, note: "=HYPERLINK(\"http://x\"), bank fee\nsecond line" });
    expect(res.body.errors, res.text).toBeUndefined();
    const entry = res.body.data.createAdjustment;
    expect(entry).toMatchObject({ __typename: "BalanceTransaction", type: "adjustment", amount: -1_234, fee: 0, net: -1_234, currency: "KES", paymentChannelId: channelId });
    expect(entry.sourceReference).toMatch(/^adj_[0-9a-z]{20}$/);
    expect(entry.description).toBe("=HYPERLINK(\"http://x\"), bank fee\nsecond line");
    const after = await expectNetMatchesHolding(api, channelId);
    expect(after).toMatchObject({ adjustments: -1_234, available: before.available - 1_234 });
    const stored = await gw.gateway.db.prisma.ledgerEntry.findUniqueOrThrow({ where: { id: BigInt(entry.databaseId) } });
    expect(stored.createdBy).not.toBeNull();
    // The REST list shows it like any other balance transaction.
    const [listed] = (await api.get("/v1/balance/transactions?type=adjustment")).body.data;
    expect(listed).toEqual({ id: entry.databaseId, type: "adjustment", amount: -1_234, fee: 0, net: -1_234, currency: "KES", payment_channel_id: channelId, source_reference: entry.sourceReference, created_at: entry.createdAt });

    // The same Idempotency-Key: the first answer again, one entry.
    const key = { "idempotency-key": `adj-${Date.now()}` };
    const once = await adjust(owner, { paymentChannelId: channelId, amount: 500, currency: "kes", note: "Correction" }, key);
    const again = await adjust(owner, { paymentChannelId: channelId, amount: 500, currency: "kes", note: "Correction" }, key);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data.createAdjustment.databaseId).toBe(once.body.data.createAdjustment.databaseId);
    expect((await api.get("/v1/balance/transactions?type=adjustment")).body.total).toBe(2);
    expect((await balanceOf(api, channelId)).adjustments).toBe(-1_234 + 500);
  });

  it("is forbidden to an API key, a developer and a viewer; bad input is a typed validation error; another merchant's channel is not found", async () => {
    const developer = await gw.createUser(merchant.id, "developer");
    const viewer = await gw.createUser(merchant.id, "viewer");
    const input = { paymentChannelId: channelId, amount: 100, note: "not allowed" };
    for (const client of [api, bearerClient(gw.url, await login(developer.email, developer.password)), bearerClient(gw.url, await login(viewer.email, viewer.password))]) {
      const res = await adjust(client, input);
      const refusal = res.body.data?.createAdjustment ?? res.body.errors?.[0]?.extensions;
      expect(refusal?.code, res.text).toBe("forbidden");
    }
    const owner = bearerClient(gw.url, ownerToken);
    const invalid: [Record<string, unknown>, string][] = [
      [{ amount: 0 }, "amount"],
      [{ amount: 1_000_000_000_001 }, "amount"],
      [{ amount: -1_000_000_000_001 }, "amount"],
      [{ note: "   " }, "note"],
      [{ note: "x".repeat(501) }, "note"],
      [{ currency: "XYZ" }, "currency"],
      [{ paymentChannelId: 0 }, "payment_channel_id"],
    ];
    for (const [change, field] of invalid) {
      const res = await adjust(owner, { ...input, ...change });
      expect(res.body.data?.createAdjustment, res.text).toMatchObject({ __typename: "ValidationError", code: "validation_failed" });
      expect(res.body.data.createAdjustment.message).toMatch(new RegExp(`^${field}:`));
    }
    const stranger = await gw.createMerchant();
    const theirs = await apiClient(gw.url, stranger.testKey).post("/api/payment-channels/create", { name: "Theirs", provider: "sandbox", config: {} });
    const foreign = await adjust(owner, { ...input, paymentChannelId: theirs.body.channel.id });
    expect(foreign.body.data.createAdjustment).toMatchObject({ __typename: "NotFoundError", code: "not_found" });
    // Nothing of the refused ones was posted.
    expect((await api.get("/v1/balance/transactions?type=adjustment")).body.total).toBe(2);
  });
});

describe("GraphQL balance and balanceTransactions", () => {
  it("answer the REST figures, as a Relay connection with node ids and the same filters", async () => {
    const res = await api.post("/graphql", {
      query: `query($c: Int) {
        balance(paymentChannelId: $c) { paymentChannelId provider currency collected fees refunded paidOut pendingOut adjustments available }
        balanceTransactions(first: 2, type: payment, paymentChannelId: $c) { totalCount edges { cursor node { id databaseId type amount fee net sourceReference } } pageInfo { hasNextPage endCursor } }
        all: balanceTransactions(first: 100) { totalCount }
      }`,
      variables: { c: channelId },
    });
    expect(res.body.errors, res.text).toBeUndefined();
    const rest = await balanceOf(api, channelId);
    const [b] = res.body.data.balance;
    expect(b).toEqual({
      paymentChannelId: rest.payment_channel_id, provider: rest.provider, currency: rest.currency, collected: rest.collected, fees: rest.fees,
      refunded: rest.refunded, paidOut: rest.paid_out, pendingOut: rest.pending_out, adjustments: rest.adjustments, available: rest.available,
    });
    const connection = res.body.data.balanceTransactions;
    expect(connection.totalCount).toBe(3);
    expect(connection.pageInfo.hasNextPage).toBe(true);
    const restPayments = (await api.get("/v1/balance/transactions?type=payment")).body.data;
    expect(connection.edges.map((e: any) => e.node.databaseId)).toEqual(restPayments.slice(0, 2).map((i: any) => i.id));
    const next = await api.post("/graphql", { query: `query($a: String) { balanceTransactions(first: 5, type: payment, after: $a) { edges { node { databaseId } } pageInfo { hasNextPage } } }`, variables: { a: connection.pageInfo.endCursor } });
    expect(next.body.errors, next.text).toBeUndefined();
    expect(next.body.data.balanceTransactions.edges.map((e: any) => e.node.databaseId)).toEqual([restPayments[2].id]);
    expect(res.body.data.all.totalCount).toBe((await api.get("/v1/balance/transactions")).body.total);

    // node(id) finds the caller's own, and not for another merchant.
    const id = connection.edges[0].node.id;
    const node = await api.post("/graphql", { query: `query($id: ID!) { node(id: $id) { __typename ... on BalanceTransaction { type } } }`, variables: { id } });
    expect(node.body).toEqual({ data: { node: { __typename: "BalanceTransaction", type: "payment" } } });
    const stranger = apiClient(gw.url, (await gw.createMerchant()).testKey);
    expect((await stranger.post("/graphql", { query: `query($id: ID!) { node(id: $id) { id } }`, variables: { id } })).body).toEqual({ data: { node: null } });
    // A cursor another connection's kind issued (Int ids) reads the same; never an internal error.
    const crossed = await api.post("/graphql", { query: `query($a: String) { transactions(first: 1, after: $a) { totalCount } }`, variables: { a: connection.pageInfo.endCursor } });
    expect(crossed.body.errors, crossed.text).toBeUndefined();

    const bad = await api.post("/graphql", { query: `{ balanceTransactionsPage(dateFrom: "2024-02-30") { __typename ... on Error { code message } } }` });
    expect(bad.body.data.balanceTransactionsPage).toMatchObject({ __typename: "ValidationError", message: "date_from: must be a date in YYYY-MM-DD format" });
  });
});

describe("GET /v1/reports/balance-transactions.csv", () => {
  it("is the list as RFC 4180 CSV, text cells neutralised, numbers left numbers", async () => {
    const res = await api.get("/v1/reports/balance-transactions.csv");
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="balance-transactions-test.csv"');
    const records = csvRecords(res);
    const listed = await allTransactions(api);
    expect(records.map((r) => ({ id: Number(r.id), type: r.type, amount: Number(r.amount), fee: Number(r.fee), net: Number(r.net), currency: r.currency, payment_channel_id: Number(r.payment_channel_id), source_reference: r.source_reference, created_at: r.created_at }))).toEqual(listed);
    // Negative amounts are numbers, not neutralised text.
    const refund = records.find((r) => r.type === "refund")!;
    expect(refund.amount).toMatch(/^-\d+$/);
    // The note that starts with "=" (and holds a quote, a comma and a line feed) is neutralised and quoted.
    const adjustment = records.find((r) => r.type === "adjustment" && r.amount === "-1234")!;
    expect(adjustment.description).toBe("'=HYPERLINK(\"http://x\"), bank fee\nsecond line");
    expect(res.text).toContain(`"'=HYPERLINK(""http://x""), bank fee\nsecond line"`);
    expect(records.filter((r) => r.type !== "adjustment").every((r) => r.description === "")).toBe(true);

    const filtered = await api.get(`/v1/reports/balance-transactions.csv?type=payment&payment_channel_id=${channelId}&date_from=2020-01-01&date_to=${new Date().toISOString().slice(0, 10)}`);
    expect(filtered.headers.get("content-disposition")).toBe(`attachment; filename="balance-transactions-test-2020-01-01_to_${new Date().toISOString().slice(0, 10)}.csv"`);
    expect(csvRecords(filtered).map((r) => r.type)).toEqual(["payment", "payment", "payment"]);
  });

  it("takes a signed-in user's token (the dashboard's download) and needs a credential", async () => {
    const res = await bearerClient(gw.url, ownerToken).get("/v1/reports/balance-transactions.csv?type=payment");
    expect(res.status, res.text).toBe(200);
    expect(csvRecords(res)).toHaveLength(3);
    const none = await apiClient(gw.url).get("/v1/reports/balance-transactions.csv");
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ status: "error", code: "invalid_api_key" });
  });

  it("streams a large export complete and in order, read in keyset batches", async () => {
    const big = await gw.createMerchant("Big export");
    const bigApi = apiClient(gw.url, big.testKey);
    const channel = await bigApi.post("/api/payment-channels/create", { name: "Busy", provider: "sandbox", config: {} });
    // 2,600 adjustments in 4 statements (fast to seed; postAdjustment's legs): within one, one created_at, so the
    // keyset's id tie-break is exercised across the 1,000-row batch boundaries.
    let expected = 0;
    for (let t = 0; t < 4; t++) {
      await gw.gateway.db.prisma.$executeRawUnsafe(
        `WITH e AS (
           INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_reference, amount, fee, note)
           SELECT $1, 'test', $2, 'KES', 'adjustment', 'adjustment', 'adj_bulk_' || n, n, 0, CASE WHEN n % 100 = 0 THEN '+' || n || ', "bulk"' ELSE 'bulk ' || n END
           FROM generate_series($3::int, $4::int) n ORDER BY n
           RETURNING id, amount)
         INSERT INTO ledger_postings (entry_id, account_id, amount)
         SELECT e.id, ledger_account($1, 'test', $2, 'KES', leg.kind), leg.sign * e.amount FROM e CROSS JOIN (VALUES ('available', 1), ('adjustments', -1)) leg(kind, sign)`,
        big.id, channel.body.channel.id, t * 650 + 1, t * 650 + 650,
      );
    }
    for (let n = 1; n <= 2_600; n++) expected += n;
    const res = await bigApi.get("/v1/reports/balance-transactions.csv");
    expect(res.status).toBe(200);
    // No Content-Length: the body is written batch by batch as it is read.
    expect(res.headers.get("content-length")).toBeNull();
    const records = csvRecords(res);
    expect(records).toHaveLength(2_600);
    // Newest first: the last transaction's entries first, each transaction's in descending id.
    expect(records.map((r) => r.source_reference)).toEqual(Array.from({ length: 2_600 }, (_, k) => `adj_bulk_${2_600 - k}`));
    expect(new Set(records.map((r) => r.id)).size).toBe(2_600);
    expect(records.reduce((sum, r) => sum + Number(r.net), 0)).toBe(expected);
    expect(records.find((r) => r.source_reference === "adj_bulk_2600")!.description).toBe(`'+2600, "bulk"`);
    expect(expected).toBe((await balanceOf(bigApi, channel.body.channel.id)).available);
  });
});

describe("isolation", () => {
  it("another merchant, and the other mode, see none of it", async () => {
    for (const client of [apiClient(gw.url, (await gw.createMerchant()).testKey), apiClient(gw.url, merchant.liveKey)]) {
      expect((await client.get("/v1/balance")).body).toEqual({ status: "success", data: [] });
      expect((await client.get(`/v1/balance?payment_channel_id=${channelId}`)).body).toEqual({ status: "success", data: [] });
      expect((await client.get("/v1/balance/transactions")).body).toMatchObject({ data: [], total: 0 });
      expect((await client.get(`/v1/balance/transactions?payment_channel_id=${channelId}`)).body).toMatchObject({ data: [], total: 0 });
      const csv = await client.get("/v1/reports/balance-transactions.csv");
      expect(csvRows(csv.text)).toEqual([CSV_HEADER]);
      const gql = await client.post("/graphql", { query: `{ balance { currency } balanceTransactions(first: 5) { totalCount edges { node { id } } } }` });
      expect(gql.body).toEqual({ data: { balance: [], balanceTransactions: { totalCount: 0, edges: [] } } });
    }
  });
});
