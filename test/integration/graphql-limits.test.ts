import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/** A refused document: GraphQL errors and no data; never a 500, an envelope or a stack trace. */
function expectRefused(res: HttpResult, message: RegExp) {
  expect(res.status).toBe(200);
  expect(res.body.data).toBeUndefined();
  expect(res.body.errors?.[0]?.message).toMatch(message);
  expect(res.text).not.toMatch(/\bat .+:\d+:\d+|node_modules/);
}

const introspection = "{ __schema { queryType { name } } }";
const typo = "{ viewr { name } }";

describe("GraphQL hardening (development defaults)", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  const post = (query: string, extra?: Record<string, string>) => apiClient(gw.url, merchant.testKey).post("/graphql", { query }, extra);

  beforeAll(async () => {
    gw = await startTestGateway({ env: { GRAPHQL_MAX_DEPTH: "4" } });
    merchant = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  it("accepts an ordinary query", async () => {
    const res = await post("{ viewer { name mode } }");
    expect(res.status).toBe(200);
    expect(res.body.data.viewer.name).toBe(merchant.name);
  });

  it("refuses a query deeper than GRAPHQL_MAX_DEPTH", async () => {
    const deep = "{ transactions(first: 5) { edges { node { customer { email } } } } }";
    expectRefused(await post(deep), /^Query depth limit of 4 exceeded, found 5/);
    // Fields are counted, not the inline fragments every union result needs: this is depth 4.
    const allowed = "{ transactionsPage { ... on TransactionPage { items { customer { email } } } } }";
    expect((await post(allowed)).body.errors).toBeUndefined();
    // The newer GraphQL-over-HTTP media type answers a refused request with 400, still not 500.
    const modern = await post(deep, { accept: "application/graphql-response+json" });
    expect(modern.status).toBe(400);
    expect(modern.body.errors[0].message).toMatch(/depth/i);
  });

  it("refuses an alias bomb (more than 15 aliases by default)", async () => {
    const bomb = `{ ${Array.from({ length: 100 }, (_, i) => `a${i}: viewer { name }`).join(" ")} }`;
    expectRefused(await post(bomb), /Aliases limit of 15 exceeded/);
  });

  it("refuses a document of more than 1000 tokens by default", async () => {
    const huge = `{ viewer { ${Array.from({ length: 1200 }, () => "name").join(" ")} } }`;
    expectRefused(await post(huge), /Token limit of 1000 exceeded/);
    expect((await post(huge, { accept: "application/graphql-response+json" })).status).toBe(400);
  });

  it("refuses more than 50 directives by default", async () => {
    const directives = `{ viewer { name ${Array.from({ length: 60 }, () => "@include(if: true)").join(" ")} } }`;
    expectRefused(await post(directives), /Directives limit of 50 exceeded/);
  });

  it("refuses a query over the cost limit (5000 by default; list sizes multiply)", async () => {
    const page = "transactions(first: 100) { edges { node { reference amount currency status email description } } }";
    expect((await post(`{ ${page} }`)).body.errors).toBeUndefined();
    expectRefused(await post(`{ a: ${page} b: ${page} }`), /Query Cost limit of 5000 exceeded/);
  });

  it("allows introspection and field suggestions outside production", async () => {
    const res = await post(introspection);
    expect(res.body.data.__schema.queryType.name).toBe("Query");
    expect((await post(typo)).body.errors[0].message).toMatch(/Did you mean "viewer"/);
  });
});

describe("GraphQL hardening in production", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  const post = (query: string) => apiClient(gw.url, merchant.testKey).post("/graphql", { query });

  beforeAll(async () => {
    gw = await startTestGateway({ env: { NODE_ENV: "production" } });
    merchant = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  it("refuses introspection", async () => {
    expectRefused(await post(introspection), /introspection/i);
    expectRefused(await post('{ __type(name: "Query") { name } }'), /introspection/i);
  });

  it("hides field suggestions", async () => {
    const res = await post(typo);
    expect(res.status).toBe(200);
    expect(res.body.errors[0].message).toMatch(/Cannot query field "viewr"/);
    expect(res.text).not.toMatch(/Did you mean/);
  });

  it("still answers ordinary queries (and __typename)", async () => {
    const res = await post("{ __typename viewer { name } }");
    expect(res.body).toEqual({ data: { __typename: "Query", viewer: { name: merchant.name } } });
  });
});
