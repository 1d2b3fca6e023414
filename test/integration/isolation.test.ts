import { describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { DeactivateChannel, SetDefaultChannel } from "../support/documents.ts";
import { apiClient, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { useTestGateway } from "../support/fixture.ts";

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
  useTestGateway({}, async (started) => {
    gw = started;
    [a, b] = [await gw.createMerchant("Merchant A"), await gw.createMerchant("Merchant B")];
  });

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

  it("merchant B's key cannot see or change merchant A's payment channels, nor can A's live key", async () => {
    const created = await apiClient(gw.url, a.testKey).post("/api/payment-channels/create", { name: "A sandbox", provider: "sandbox" });
    expect(created.status).toBe(201);
    const channelId: number = created.body.channel.id;

    const listFor = async (key: string) => (await apiClient(gw.url, key).get("/api/payment-channels/list")).body;
    expect(await listFor(b.testKey)).toEqual({ status: "success", channels: [] });
    expect(await listFor(a.liveKey)).toEqual({ status: "success", channels: [] });
    expect((await listFor(a.testKey)).channels.map((c: { name: string }) => c.name)).toEqual(["A sandbox"]);

    const notFound = { __typename: "NotFoundError", code: "not_found", message: `Payment channel ${channelId} not found` };
    for (const key of [b.testKey, a.liveKey]) {
      const setDefault = await apiClient(gw.url, key).graphql(SetDefaultChannel, { id: channelId });
      expect(setDefault.body.data?.setDefaultPaymentChannel).toEqual(notFound);
    }
    const deactivate = await apiClient(gw.url, b.testKey).graphql(DeactivateChannel, { id: channelId });
    expect(deactivate.body.data?.deactivatePaymentChannel).toEqual(notFound);
    expect((await listFor(a.testKey)).channels).toMatchObject([{ id: channelId, is_active: true, is_default: true }]);
  });
});
