import { isObjectType } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/app/schema.ts";
import { apiClient, bearerClient, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/** Relay global ids and connection cursors a client can get wrong: "not found" or a named validation error, never an internal one. */

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
const NODE = `query Node($id: ID!) { node(id: $id) { __typename id } }`;
const NODES = `query Nodes($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }`;

/**
 * Every global id a client can get wrong: none may be an internal error, all must read as "not found".
 * (Control characters such as NUL are refused before execution, as in any text: text-validation.test.ts.)
 */
const MALFORMED_IDS = [
  "",
  "!!!",
  "not base64 at all",
  b64("Customer"),
  b64("Customer:"),
  b64(":1"),
  b64("Customer:abc"),
  b64("Customer:-1"),
  b64("Customer:0"),
  b64("Customer:01"),
  b64("Customer:1.5"),
  b64("Customer:1e3"),
  b64("Customer:99999999999"), // beyond a PostgreSQL integer
  b64("Customer:2147483648"),
  b64("Customer:1:2"),
  b64("Customer: 1"),
  b64("Foo:1"), // no such type
  b64("PageInfo:1"), // a type, not a Node
  b64("WebhookDelivery:1"),
  b64("Query:1"),
  b64("TransactionStatus:1"), // an enum
  b64(`Transaction:${"9".repeat(500)}`),
  "A".repeat(10_000),
];

/** Cursors a client can get wrong; Pothos issues base64("GPC:N:<id>") for an Int id. */
const MALFORMED_CURSORS = [
  "",
  "!!!",
  b64("xx"),
  b64("GPC:"),
  b64("GPC:N:"),
  b64("GPC:N:abc"),
  b64("GPC:S:abc"), // a string where the id is an Int: used to reach Prisma
  b64("GPC:N:-5"),
  b64("GPC:N:1.5"),
  b64("GPC:N:99999999999"), // beyond a PostgreSQL integer: used to reach PostgreSQL
  b64("GPC:T:[1]"),
  b64("GPC:J:{}"),
  "A".repeat(10_000),
];

function expectNoInternalError(res: HttpResult) {
  expect(res.status, res.text).toBe(200);
  expect(res.text).not.toMatch(/INTERNAL_SERVER_ERROR|Unexpected error|Invalid global ID|does not support loading|has not been implemented/);
  expect(res.text).not.toMatch(/\bat .+:\d+:\d+|node_modules|prisma/i);
}

describe("Relay node(id), nodes(ids) and connection cursors", () => {
  let gw: TestGateway;
  let a: TestMerchant;
  let b: TestMerchant;
  /** Global ids of A's own objects, one per Node type. */
  const own: Record<string, string> = {};
  let bCustomerId: string;
  let aLiveCustomerId: string;

  const gql = (key: string, query: string, variables?: Record<string, unknown>) => apiClient(gw.url, key).post("/graphql", { query, variables });

  async function createCustomer(key: string, email: string): Promise<string> {
    const res = await gql(key, `mutation($email: String!) { createCustomer(input: { email: $email }) { ... on Customer { id } } }`, { email });
    expect(res.body.data?.createCustomer?.id, res.text).toBeTruthy();
    return res.body.data.createCustomer.id;
  }

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    a = await gw.createMerchant("Relay A");
    b = await gw.createMerchant("Relay B");
    const channel = await gql(a.testKey, `mutation { createPaymentChannel(input: { name: "Sandbox", provider: "sandbox" }) { ... on PaymentChannel { id databaseId } } }`);
    own.PaymentChannel = channel.body.data.createPaymentChannel.id;
    own.Customer = await createCustomer(a.testKey, "relay-a@example.com");
    bCustomerId = await createCustomer(b.testKey, "relay-b@example.com");
    aLiveCustomerId = await createCustomer(a.liveKey, "relay-a-live@example.com");
    let firstReference = "";
    // The sandbox's disputing card: each payment is disputed a moment later, for the disputes connection's paging.
    const card = { card_number: "4000000000000259", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 1, cvc: "123" };
    for (let i = 0; i < 3; i++) {
      const init = await apiClient(gw.url, a.testKey).post("/api/transactions/initialize", { amount: 1000 + i, email: "relay@example.com" });
      expect(init.status, init.text).toBe(200);
      firstReference ||= init.body.reference;
      // Each paid: three payments, the balance transactions the connection checks page through.
      if (i > 0) expect((await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, card)).status).toBe(200);
      const payout = await gql(a.testKey, `mutation { createPayout(input: { amount: ${1000 + i * 100}, phoneNumber: "254708374149" }) { __typename ... on Payout { id } } }`);
      expect(payout.body.data?.createPayout?.__typename, payout.text).toBe("Payout");
    }
    const transactions = await gql(a.testKey, `{ transactions(first: 1) { edges { node { id } } } payouts(first: 1) { edges { node { id } } } viewer { id } }`);
    own.Transaction = transactions.body.data.transactions.edges[0].node.id;
    own.Payout = transactions.body.data.payouts.edges[0].node.id;
    own.Merchant = transactions.body.data.viewer.id;
    own.BalanceTransaction = (await gql(a.testKey, `{ balanceTransactions(first: 1) { edges { node { id } } } }`)).body.data.balanceTransactions.edges[0].node.id;
    const endpoint = await apiClient(gw.url, a.testKey).post("/v1/webhooks", { url: "http://127.0.0.1:9/relay" });
    expect(endpoint.status, endpoint.text).toBe(201);
    const endpoints = await gql(a.testKey, `{ webhookEndpoints { id } }`);
    own.WebhookEndpoint = endpoints.body.data.webhookEndpoints[0].id;
    // A refund: one of the three transactions paid, then partly refunded.
    const paid = { body: { reference: firstReference } };
    expect((await apiClient(gw.url).post(`/payment/checkout/${paid.body.reference}/pay`, card)).status).toBe(200);
    // Three partial refunds of it, for the refunds connection's paging.
    let refund!: HttpResult;
    for (let i = 0; i < 3; i++) {
      refund = await gql(a.testKey, `mutation($t: String!) { createRefund(input: { transaction: $t, amount: 100 }) { __typename ... on Refund { id } } }`, { t: paid.body.reference });
      expect(refund.body.data?.createRefund?.__typename, refund.text).toBe("Refund");
    }
    own.Refund = refund.body.data.createRefund.id;
    // Three reconciliations of the sandbox channel's day, for the reconciliations connection's paging.
    const channelId = channel.body.data.createPaymentChannel.databaseId;
    const today = new Date().toISOString().slice(0, 10);
    for (let i = 0; i < 3; i++) {
      const run = await gql(a.testKey, `mutation($c: Int!, $d: String!) { runReconciliation(input: { paymentChannelId: $c, date: $d }) { __typename ... on Reconciliation { id } } }`, { c: channelId, d: today });
      expect(run.body.data?.runReconciliation?.__typename, run.text).toBe("Reconciliation");
      own.Reconciliation = run.body.data.runReconciliation.id;
    }
    const disputes = await until(() => gql(a.testKey, `{ disputes(first: 1) { totalCount edges { node { id } } } }`), (r) => r.body.data?.disputes?.totalCount === 3);
    own.Dispute = disputes.body.data.disputes.edges[0].node.id;
    await gw.createUser(a.id, "viewer");
    // The team is listed to a signed-in owner only (issue 35).
    const team = await bearerClient(gw.url, await gw.signIn(a.id, "owner")).post("/graphql", { query: `{ users { id } }` });
    own.User = team.body.data.users[0].id;
    for (let i = 0; i < 3; i++) {
      const link = await gql(a.testKey, `mutation { createPaymentLink(input: { amount: ${100 + i}, description: "Node ids" }) { __typename ... on PaymentLink { id } } }`);
      expect(link.body.data?.createPaymentLink?.__typename, link.text).toBe("PaymentLink");
      own.PaymentLink = link.body.data.createPaymentLink.id;
    }
  });
  afterAll(() => gw?.close());

  it("finds the caller's own object of every Node type", async () => {
    const nodeTypes = Object.values(schema.getTypeMap())
      .filter((type) => isObjectType(type) && type.getInterfaces().some((i) => i.name === "Node"))
      .map((type) => type.name)
      .sort();
    // A new Node type must be added to this test (and be keyed by an Int id: src/graphql/relay.ts).
    expect(Object.keys(own).sort()).toEqual(nodeTypes);
    const owner = await gw.signIn(a.id, "owner");
    for (const [typename, id] of Object.entries(own)) {
      // A user is the team's, shown to a signed-in owner only (as the users field); everything else to the key.
      const res = typename === "User" ? await bearerClient(gw.url, owner).post("/graphql", { query: NODE, variables: { id } }) : await gql(a.testKey, NODE, { id });
      expect(res.body, res.text).toEqual({ data: { node: { __typename: typename, id } } });
    }
    // The same user's node is null to a key and to a viewer: node(id) is no way around the users field's permission.
    expect((await gql(a.testKey, NODE, { id: own.User })).body).toEqual({ data: { node: null } });
    const viewer = await gw.signIn(a.id, "viewer");
    expect((await bearerClient(gw.url, viewer).post("/graphql", { query: NODE, variables: { id: own.User } })).body).toEqual({ data: { node: null } });
  });

  it("node(id) is null, without an error, for a missing, foreign or malformed id", async () => {
    const missing = b64("Customer:999999");
    const answers: string[] = [];
    for (const id of [missing, bCustomerId, aLiveCustomerId, ...MALFORMED_IDS]) {
      const res = await gql(a.testKey, NODE, { id });
      expectNoInternalError(res);
      expect(res.body, `${JSON.stringify(id.slice(0, 40))}: ${res.text}`).toEqual({ data: { node: null } });
      answers.push(res.text);
    }
    // A foreign id (another merchant's, or the same merchant's other mode) reads exactly like a missing one.
    expect(new Set(answers.slice(0, 3)).size).toBe(1);
    // B still sees its own customer (the id above was real).
    expect((await gql(b.testKey, NODE, { id: bCustomerId })).body.data.node).toEqual({ __typename: "Customer", id: bCustomerId });
  });

  it("nodes(ids): one bad id nulls its own entry only", async () => {
    const ids = [own.Customer!, "!!!", bCustomerId, own.Transaction!, b64("Foo:1"), b64("Customer:99999999999"), own.Customer!, ...MALFORMED_IDS, own.Payout!];
    const res = await gql(a.testKey, NODES, { ids });
    expectNoInternalError(res);
    expect(res.body.errors).toBeUndefined();
    const nodes = res.body.data.nodes as ({ id: string } | null)[];
    expect(nodes).toHaveLength(ids.length);
    expect(nodes.map((n) => n?.id ?? null)).toEqual(ids.map((id) => (Object.values(own).includes(id) ? id : null)));
  });

  it("node(id) with an id given inline in the document behaves the same", async () => {
    const res = await gql(a.testKey, `{ bad: node(id: "%%%") { id } good: node(id: "${own.Customer}") { id } }`);
    expectNoInternalError(res);
    expect(res.body).toEqual({ data: { bad: null, good: { id: own.Customer } } });
  });

  /** Every connection in the schema, so a new one is covered (or fails here) without editing this test. */
  const connections = () =>
    Object.values(schema.getQueryType()!.getFields())
      .filter((field) => field.args.some((arg) => arg.name === "after"))
      .map((field) => field.name);

  it("covers every Relay connection of the schema", () => {
    expect(connections().sort()).toEqual(["balanceTransactions", "disputes", "paymentLinks", "payouts", "reconciliations", "refunds", "transactions"]);
  });

  it("a malformed after/before cursor is a validation_failed naming the argument, on every connection", async () => {
    for (const field of connections()) {
      for (const argument of ["after", "before"]) {
        for (const cursor of MALFORMED_CURSORS) {
          const res = await gql(a.testKey, `query($c: String) { viewer { name } ${field}(first: 2, ${argument}: $c) { totalCount } }`, { c: cursor });
          expectNoInternalError(res);
          const label = `${field}(${argument}: ${JSON.stringify(cursor.slice(0, 30))}): ${res.text.slice(0, 300)}`;
          expect(res.body.errors, label).toHaveLength(1);
          expect(res.body.errors[0], label).toMatchObject({
            message: `${argument}: is not a valid cursor; pass a cursor from pageInfo or an edge`,
            extensions: { code: "validation_failed" },
            path: [field],
          });
        }
      }
    }
  });

  it("a negative first/last is a validation_failed too", async () => {
    for (const field of connections()) {
      for (const argument of ["first", "last"]) {
        const res = await gql(a.testKey, `{ ${field}(${argument}: -1) { totalCount } }`);
        expectNoInternalError(res);
        expect(res.body.errors?.[0]).toMatchObject({ message: `${argument}: must be a non-negative integer`, extensions: { code: "validation_failed" } });
      }
    }
  });

  /** Filters that leave three rows (A's balance transactions also hold refunds and payouts settling meanwhile). */
  const threeRows: Record<string, string> = { balanceTransactions: "type: payment, " };

  it("cursors the gateway issued still page forwards and backwards", async () => {
    for (const field of connections()) {
      const page = (args: string) => gql(a.testKey, `{ ${field}(${threeRows[field] ?? ""}${args}) { totalCount edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`);
      const all = (await page("first: 10")).body.data[field];
      expect(all.totalCount).toBe(3);
      const ids = all.edges.map((e: { node: { id: string } }) => e.node.id);
      const first = (await page("first: 2")).body.data[field];
      expect(first.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(ids.slice(0, 2));
      expect(first.pageInfo.hasNextPage).toBe(true);
      const rest = await page(`first: 2, after: "${first.pageInfo.endCursor}"`);
      expect(rest.body.errors, rest.text).toBeUndefined();
      expect(rest.body.data[field].edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(ids.slice(2));
      const back = await page(`last: 2, before: "${all.edges[2].cursor}"`);
      expect(back.body.errors, back.text).toBeUndefined();
      expect(back.body.data[field].edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(ids.slice(0, 2));
      // A well-formed cursor of a row that is not the caller's pages nothing of anyone else's.
      const foreign = await gql(b.testKey, `{ ${field}(${threeRows[field] ?? ""}first: 5, after: "${all.edges[0].cursor}") { totalCount edges { node { id } } } }`);
      expect(foreign.body).toEqual({ data: { [field]: { totalCount: 0, edges: [] } } });
    }
  });
});
