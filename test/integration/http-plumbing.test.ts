import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/** Responses must never carry a stack trace, SQL, or a file path. */
function expectNoInternals(text: string) {
  expect(text).not.toMatch(/\bat .+:\d+:\d+|SELECT |INSERT |prisma|node_modules|\/src\//i);
}

describe("HTTP plumbing", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;

  beforeAll(async () => {
    gw = await startTestGateway();
    merchant = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  it("GET / points to the dashboard, the API reference and the rest, and every link answers", async () => {
    const res = await apiClient(gw.url).get("/");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "success", links: { dashboard: "/dashboard", api_reference: "/docs", openapi: "/openapi.json" } });
    for (const link of Object.values(res.body.links as Record<string, string>)) {
      const answer = await fetch(`${gw.url}${link}`, { headers: { accept: "text/html" } });
      expect(answer.status, link).toBe(200);
    }
  });

  it("GET /health answers without a key", async () => {
    const res = await apiClient(gw.url).get("/health");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "success" });
  });

  it("GET /ready reports the database reachable", async () => {
    const res = await apiClient(gw.url).get("/ready");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "success", database: "ok", backend: process.env.TEST_BACKEND });
  });

  it("an unknown route is a 404 envelope", async () => {
    const res = await apiClient(gw.url, merchant.testKey).get("/api/nothing/here");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ status: "error", message: "Route not found", code: "route_not_found" });
    const outside = await apiClient(gw.url).get("/nope");
    expect(outside.status).toBe(404);
    expect(outside.body).toMatchObject({ status: "error", code: "route_not_found" });
  });

  it("malformed JSON is a 400 envelope", async () => {
    const res = await apiClient(gw.url, merchant.testKey).post("/graphql", '{"query": "{ viewer { name } }"');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ status: "error", message: "Malformed JSON in request body", code: "malformed_json" });
    expectNoInternals(res.text);
  });

  it("a wrong content type is a 415 envelope", async () => {
    const res = await apiClient(gw.url, merchant.testKey).raw("/graphql", {
      method: "POST",
      headers: { "content-type": "application/xml" },
      body: "<query/>",
    });
    expect(res.status).toBe(415);
    expect(res.body).toMatchObject({ status: "error", code: "unsupported_media_type" });
  });

  it("a body over 1 MB is a 413 envelope", async () => {
    const big = JSON.stringify({ query: "{ viewer { name } }", padding: "x".repeat(1024 * 1024 + 10) });
    const res = await apiClient(gw.url, merchant.testKey).post("/graphql", big);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ status: "error", code: "payload_too_large" });
  });

  it("a body just under 1 MB is accepted", async () => {
    const body = JSON.stringify({ query: "{ viewer { name } }", variables: { pad: "x".repeat(1000 * 1000) } });
    const res = await apiClient(gw.url, merchant.testKey).post("/graphql", body);
    expect(res.status).toBe(200);
  });

  it("a GraphQL syntax error is an ordinary GraphQL error, not a 500", async () => {
    const client = apiClient(gw.url, merchant.testKey);
    // GraphQL over HTTP: legacy application/json answers 200, the newer media type answers 400.
    const legacy = await client.post("/graphql", { query: "{ viewer { " });
    expect(legacy.status).toBe(200);
    expect(legacy.body.errors[0].message).toMatch(/Syntax Error/);
    const modern = await client.post("/graphql", { query: "{ viewer { " }, { accept: "application/graphql-response+json" });
    expect(modern.status).toBe(400);
    expectNoInternals(legacy.text);
  });

  it("every JSON body carries a status field or is a GraphQL response", async () => {
    const res = await apiClient(gw.url, merchant.testKey).get("/v1/status");
    expect(res.headers.get("content-type")).toMatch(/application\/json/);
    expect(res.body.status).toBe("success");
  });

  it("serves GraphiQL outside production without a key", async () => {
    const res = await fetch(`${gw.url}/graphql`, { headers: { accept: "text/html" } });
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/graphiql/i);
  });
});

describe("request ids and request lines", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  const lines: string[] = [];

  beforeAll(async () => {
    gw = await startTestGateway({ logger: createLogger("info", { write: (line) => void lines.push(line) }) });
    merchant = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  const lineFor = (requestId: string) =>
    lines.map((l) => JSON.parse(l)).find((entry) => entry.requestId === requestId && entry.msg === "request completed");

  it("every response carries X-Request-Id; its log line names the request id, merchant, mode, route and status", async () => {
    const res = await apiClient(gw.url, merchant.liveKey).get("/api/transactions/verify/txn_unknown");
    expect(res.status).toBe(404);
    const id = res.headers.get("x-request-id")!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await expect.poll(() => lineFor(id)).toMatchObject({
      requestId: id,
      method: "GET",
      route: "/api/transactions/verify/:reference",
      statusCode: 404,
      merchantId: merchant.id,
      mode: "live",
      responseTimeMs: expect.any(Number),
    });
  });

  it("keeps a caller's well-formed X-Request-Id, replaces a malformed one, and logs keyless requests without a merchant", async () => {
    const kept = await apiClient(gw.url).get("/health", { "x-request-id": "lb-7f3a9c2e-0001" });
    expect(kept.headers.get("x-request-id")).toBe("lb-7f3a9c2e-0001");
    await expect.poll(() => lineFor("lb-7f3a9c2e-0001")).toMatchObject({ route: "/health", statusCode: 200, merchantId: null, mode: null });
    const replaced = await apiClient(gw.url).get("/health", { "x-request-id": "bad id with spaces" });
    expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});
