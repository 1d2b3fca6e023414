import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Validation answers list every bad field (REST `errors` beside the first `message`, GraphQL ValidationError.errors),
 * and REST and GraphQL agree on amounts: a JSON integer, never a digit string.
 */
const INITIALIZE = `mutation ($input: InitializeTransactionInput!) {
  initializeTransaction(input: $input) { __typename ... on Error { code message } ... on ValidationError { field errors { field message } } ... on InitializeTransactionPayload { reference } }
}`;

describe("validation errors and amounts", () => {
  let gw: TestGateway;
  let key: string;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    key = (await createSandboxMerchant(gw)).testKey;
  });
  afterAll(async () => {
    await gw?.close();
  });

  it("REST lists every bad field, the first one as `message` names it", async () => {
    const res = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 0, email: "nope", callback_url: "ftp://example.com/x", description: "x".repeat(501) });
    expect(res.status, res.text).toBe(400);
    expect(res.body).toEqual({
      status: "error",
      code: "validation_failed",
      message: "amount: must be between 1 and 1000000000000 (minor units)",
      errors: [
        { field: "amount", message: "must be between 1 and 1000000000000 (minor units)" },
        { field: "email", message: "must be a valid e-mail address" },
        { field: "description", message: "must be at most 500 characters" },
        { field: "callback_url", message: expect.any(String) },
      ],
    });
    // One bad field: a list of one.
    const one = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 1500, email: "nope" });
    expect(one.body).toEqual({ status: "error", code: "validation_failed", message: "email: must be a valid e-mail address", errors: [{ field: "email", message: "must be a valid e-mail address" }] });
  });

  it("GraphQL's ValidationError carries the same list", async () => {
    const res = await apiClient(gw.url, key).post("/graphql", { query: INITIALIZE, variables: { input: { amount: 0, email: "nope", description: "x".repeat(501) } } });
    expect(res.body.data.initializeTransaction).toEqual({
      __typename: "ValidationError",
      code: "validation_failed",
      message: "amount: must be between 1 and 1000000000000 (minor units)",
      field: "amount",
      errors: [
        { field: "amount", message: "must be between 1 and 1000000000000 (minor units)" },
        { field: "email", message: "must be a valid e-mail address" },
        { field: "description", message: "must be at most 500 characters" },
      ],
    });
  });

  it("both refuse an amount given as a digit string, and both take the JSON integer", async () => {
    const rest = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: "1500", email: "payer@example.com" });
    expect(rest.status, rest.text).toBe(400);
    expect(rest.body).toMatchObject({ code: "validation_failed", message: expect.stringMatching(/^amount: must be an integer/) });

    const asVariable = await apiClient(gw.url, key).post("/graphql", { query: INITIALIZE, variables: { input: { amount: "1500", email: "payer@example.com" } } });
    expect(asVariable.body.data).toBeUndefined();
    // The value is not echoed back (graphql hardening); the place is named.
    expect(asVariable.body.errors[0].message).toMatch(/input\.amount/);
    const asLiteral = await apiClient(gw.url, key).post("/graphql", {
      query: `mutation { initializeTransaction(input: { amount: "1500", email: "payer@example.com" }) { __typename } }`,
    });
    expect(asLiteral.body.data).toBeUndefined();
    expect(asLiteral.body.errors).toHaveLength(1);

    const restOk = await apiClient(gw.url, key).post("/api/transactions/initialize", { amount: 1500, email: "payer@example.com" });
    expect(restOk.status, restOk.text).toBe(200);
    const gqlOk = await apiClient(gw.url, key).post("/graphql", { query: INITIALIZE, variables: { input: { amount: 1500, email: "payer@example.com" } } });
    expect(gqlOk.body.data.initializeTransaction).toMatchObject({ __typename: "InitializeTransactionPayload", reference: expect.any(String) });
  });
});
