import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/** What the framework answers before any route runs, and what must never reach a client or a log. */
let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
const logLines: string[] = [];

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" }, logger: createLogger("info", { write: (line) => void logLines.push(line) }) });
  api = apiClient(gw.url, (await gw.createMerchant()).testKey);
});

afterAll(async () => {
  await gw?.close();
});

const envelope = (code: string) => ({ status: "error", code, message: expect.any(String) });

describe("framework errors are answered in the envelope", () => {
  it("a path parameter over the length limit: 414", async () => {
    const res = await api.get(`/api/transactions/verify/${"a".repeat(150)}`);
    expect(res.status).toBe(414);
    expect(res.body).toEqual(envelope("uri_too_long"));
  });

  it("a path that does not decode: 400", async () => {
    const res = await api.get("/api/transactions/verify/%c0%ae");
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope("validation_failed"));
  });

  it("headers over Node's limit: 431", async () => {
    const res = await api.raw("/v1/status", { headers: { "x-padding": "a".repeat(20_000) } });
    expect(res.status).toBe(431);
    expect(res.body).toEqual(envelope("request_header_too_large"));
  });

  it("an Accept /graphql cannot serve: 406 saying what it serves", async () => {
    const res = await api.raw("/graphql", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/xml" },
      body: JSON.stringify({ query: "{ viewer { name } }" }),
    });
    expect(res.status).toBe(406);
    expect(res.body).toEqual(envelope("not_acceptable"));
  });

  it.each(["variables=notjson", "extensions=%7B", "variables=%5B1%5D"])("GET /graphql with %s: 400, not 500", async (param) => {
    const res = await api.get(`/graphql?query=%7Bviewer%7Bname%7D%7D&${param}`);
    expect(res.status).toBe(400);
    expect(res.body.errors[0].message).toMatch(/must be a JSON object/);
    // Well-formed ones still work.
    expect((await api.get("/graphql?query=%7Bviewer%7Bname%7D%7D&variables=%7B%7D")).status).toBe(200);
  });
});

describe("secrets", () => {
  it("a variable GraphQL cannot coerce is named by path, its value (a channel's secret key) never echoed", async () => {
    const secret = "sk_test_VERYSECRET123456";
    const query = "mutation($input: CreatePaymentChannelInput!) { createPaymentChannel(input: $input) { __typename } }";
    for (const input of [
      { provider: "paystack", config: { public_key: "pk_test_x", secret_key: secret } },
      { name: 5, provider: "paystack", config: { public_key: "pk_test_x", secret_key: secret } },
    ]) {
      const res = await api.post("/graphql", { query, variables: { input } });
      expect(res.text).not.toContain(secret);
      expect(res.body.errors[0].message).toMatch(/^Variable "\$input" got an invalid value/);
    }
    const missing = await api.post("/graphql", { query, variables: { input: { provider: "paystack", config: { secret_key: secret } } } });
    expect(missing.body.errors[0].message).toBe('Variable "$input" got an invalid value; Field "name" of required type "String!" was not provided.');
  });

  it("request log lines show a provider callback's route, never its token", async () => {
    const channel = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    const row = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id: channel.body.channel.id } });
    const token = Buffer.from(row.callbackToken, "utf8").toString("hex");
    await api.post(`/callbacks/daraja/${token}/stk`, { Body: { stkCallback: { CheckoutRequestID: "ws_CO_x", ResultCode: 1032, ResultDesc: "Cancelled" } } });
    const lines = logLines.filter((l) => l.includes("/callbacks/daraja/"));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).not.toContain(token);
      expect(line).toContain("/callbacks/daraja/[redacted]/stk");
    }
  });
});
