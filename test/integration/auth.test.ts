import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

const Viewer = graphql(`
  query Viewer {
    viewer {
      id
      databaseId
      name
      mode
      defaultCurrency
    }
  }
`);

const invalidKeyEnvelope = { status: "error", message: "Invalid API key", code: "invalid_api_key" };

describe("API-key authentication", () => {
  let gw: TestGateway;
  let acme: TestMerchant;

  beforeAll(async () => {
    gw = await startTestGateway();
    acme = await gw.createMerchant("Acme");
  });
  afterAll(() => gw?.close());

  it("answers viewer for a valid test key, in test mode", async () => {
    const res = await apiClient(gw.url, acme.testKey).graphql(Viewer);
    expect(res.status).toBe(200);
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data?.viewer).toMatchObject({ databaseId: acme.id, name: "Acme", mode: "test", defaultCurrency: "KES" });
  });

  it("reports live mode for the live key of the same merchant", async () => {
    const res = await apiClient(gw.url, acme.liveKey).graphql(Viewer);
    expect(res.body.data?.viewer).toMatchObject({ databaseId: acme.id, mode: "live" });
  });

  it("serves the REST status route for a valid key", async () => {
    const res = await apiClient(gw.url, acme.testKey).get("/v1/status");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "success", data: { merchant: { id: acme.id, name: "Acme" }, mode: "test" } });
  });

  describe.each([
    ["missing", undefined],
    ["unknown", "sk_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
    ["malformed", "hello"],
  ])("a %s key", (_label, key) => {
    it("gets the 401 envelope on REST", async () => {
      const res = await apiClient(gw.url, key).get("/v1/status");
      expect(res.status).toBe(401);
      expect(res.body).toEqual(invalidKeyEnvelope);
    });

    it("gets the 401 envelope on GraphQL over HTTP", async () => {
      const res = await apiClient(gw.url, key).graphql(Viewer);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(invalidKeyEnvelope);
    });

    it("gets the 401 envelope even on an unknown /api route (no route discovery without a key)", async () => {
      const res = await apiClient(gw.url, key).get("/api/not-a-route");
      expect(res.status).toBe(401);
    });
  });

  it("rejects a revoked key at once, on REST and GraphQL, while the merchant's other key still works", async () => {
    const other = await gw.createMerchant("Revocable");
    const prefix = other.testKey.slice(0, "sk_test_".length + 8);
    expect((await apiClient(gw.url, other.testKey).get("/v1/status")).status).toBe(200);
    await gw.gateway.services.merchants.revokeKey(prefix);
    const rest = await apiClient(gw.url, other.testKey).get("/v1/status");
    expect(rest.status).toBe(401);
    expect(rest.body).toEqual(invalidKeyEnvelope);
    expect((await apiClient(gw.url, other.testKey).graphql(Viewer)).status).toBe(401);
    expect((await apiClient(gw.url, other.liveKey).get("/v1/status")).status).toBe(200);
  });

  it("never echoes the key in a response", async () => {
    const res = await apiClient(gw.url, acme.testKey).graphql(Viewer);
    expect(res.text).not.toContain(acme.testKey);
    expect(res.text).not.toContain(acme.testKey.slice(8));
  });
});
