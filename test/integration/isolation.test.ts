import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

const NodeById = graphql(`
  query NodeById($id: ID!) {
    node(id: $id) {
      id
      ... on Merchant {
        name
      }
    }
  }
`);

const ViewerId = graphql(`
  query ViewerId {
    viewer {
      id
      name
    }
  }
`);

describe("tenant isolation", () => {
  let gw: TestGateway;
  let a: TestMerchant;
  let b: TestMerchant;

  beforeAll(async () => {
    gw = await startTestGateway();
    a = await gw.createMerchant("Merchant A");
    b = await gw.createMerchant("Merchant B");
  });
  afterAll(() => gw?.close());

  it("each key sees only its own merchant as viewer", async () => {
    const asA = await apiClient(gw.url, a.testKey).graphql(ViewerId);
    const asB = await apiClient(gw.url, b.testKey).graphql(ViewerId);
    expect(asA.body.data?.viewer.name).toBe("Merchant A");
    expect(asB.body.data?.viewer.name).toBe("Merchant B");
    expect(asA.body.data?.viewer.id).not.toBe(asB.body.data?.viewer.id);
  });

  it("merchant B's key cannot load merchant A by its global id", async () => {
    const aId = (await apiClient(gw.url, a.testKey).graphql(ViewerId)).body.data!.viewer.id;
    const own = await apiClient(gw.url, a.testKey).graphql(NodeById, { id: aId });
    expect(own.body.data?.node).toMatchObject({ id: aId, name: "Merchant A" });
    const foreign = await apiClient(gw.url, b.testKey).graphql(NodeById, { id: aId });
    expect(foreign.status).toBe(200);
    expect(foreign.body.data?.node).toBeNull();
  });

  it("merchant B's key cannot list merchant A's payment channels", async () => {
    const principal = (m: TestMerchant, mode: "test" | "live") => ({ merchantId: m.id, mode, keyId: 0, keyPrefix: "" });
    await gw.gateway.services.channels.createChannel(principal(a, "test"), { name: "A sandbox", provider: "sandbox" });
    const forB = await gw.gateway.services.channels.listChannels(principal(b, "test"));
    const forALive = await gw.gateway.services.channels.listChannels(principal(a, "live"));
    const forATest = await gw.gateway.services.channels.listChannels(principal(a, "test"));
    expect(forB).toEqual([]);
    expect(forALive).toEqual([]);
    expect(forATest.map((c) => c.name)).toEqual(["A sandbox"]);
  });
});
