import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Issue 35 item 14: a refund's `amount: null` used to mean "all that remains". Money leaves on the caller's word,
 * and a null is too easily a variable that was never set: it is a 400 (REST) or a ValidationError (GraphQL)
 * naming `amount`, and nothing is refunded; leaving the field out still refunds all.
 */
describe("a refund's amount: null is refused, naming amount; omitted means all", () => {
  let gw: TestGateway;
  let key: string;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    key = (await createSandboxMerchant(gw)).testKey;
    api = apiClient(gw.url, key);
  });
  afterAll(() => gw?.close());

  const refundsOf = async (reference: string) => {
    const res = await api.get(`/v1/refunds?transaction=${reference}`);
    expect(res.status, res.text).toBe(200);
    return res.body.data as { amount: number }[];
  };
  /** With the input as a variable, or (`literal`) written in the document. */
  const createRefund = (variables: Record<string, unknown>, literal?: string) =>
    api.post("/graphql", {
      query: `mutation${literal ? "" : "($input: CreateRefundInput!)"} { createRefund(input: ${literal ?? "$input"}) { __typename ... on ValidationError { field } ... on Error { code message } ... on Refund { amount } } }`,
      variables,
    });

  it("over REST /v1/refunds and GraphQL createRefund alike, and refunds nothing", async () => {
    const reference = await paidTransaction(gw.url, key, { amount: 4200, email: "payer@example.com" });

    const rest = await api.post("/v1/refunds", { transaction: reference, amount: null, reason: "duplicate" });
    expect([rest.status, rest.body.status, rest.body.code], rest.text).toEqual([400, "error", "validation_failed"]);
    expect(rest.body.message).toMatch(/^amount: must be a positive integer in minor units, not null; leave it out to refund all/);

    // GraphQL: null in the variables, and null written in the document.
    for (const res of [
      await createRefund({ input: { transaction: reference, amount: null } }),
      await createRefund({}, `{ transaction: "${reference}", amount: null }`),
    ]) {
      expect(res.status, res.text).toBe(200);
      expect(res.body.errors).toBeUndefined();
      expect(res.body.data.createRefund).toMatchObject({ __typename: "ValidationError", code: "validation_failed", field: "amount" });
      expect(res.body.data.createRefund.message).toMatch(/not null; leave it out to refund all/);
    }
    expect(await refundsOf(reference)).toEqual([]);

    // Left out: all of it (REST), and then nothing remains (GraphQL, without the field either).
    const all = await api.post("/v1/refunds", { transaction: reference });
    expect([all.status, all.body.data?.amount], all.text).toEqual([201, 4200]);
    const more = await createRefund({ input: { transaction: reference } });
    expect(more.body.data.createRefund).toMatchObject({ code: "amount_exceeds_refundable" });
  });
});
