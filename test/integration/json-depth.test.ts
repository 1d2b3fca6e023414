import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { MAX_JSON_DEPTH, jsonNestedDeeperThan } from "../../src/rest/json-depth.ts";
import { createLogger } from "../../src/logger.ts";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Issue 35 item 9: a JSON body 10,000 levels deep overflowed the stack in the Idempotency-Key fingerprint (a 500
 * and an error-level stack trace). Every JSON body is now refused past MAX_JSON_DEPTH levels before it is parsed:
 * a 400 in the envelope on REST, /v1, /graphql, the checkout and the callbacks, with or without an
 * Idempotency-Key, and no error-level log line.
 */
const ERROR = 50;
let gw: TestGateway;
let api: ReturnType<typeof apiClient>;
let apiKey: string;
let reference: string;
let callbackToken: string;
const lines: { level: number; msg?: string; requestId?: string }[] = [];

/** `levels` nested arrays around a number, as text (JSON.stringify itself would overflow building it). */
const nested = (levels: number) => `${"[".repeat(levels)}1${"]".repeat(levels)}`;
/** Objects this time, with brackets inside strings that must not count. */
const nestedObjects = (levels: number) => `${'{"a":"[[{{","b":'.repeat(levels)}1${"}".repeat(levels)}`;

beforeAll(async () => {
  gw = await startTestGateway({
    env: { RATE_LIMIT_ENABLED: "false" },
    logger: createLogger("info", { write: (line) => void lines.push(JSON.parse(line)) }),
  });
  const merchant = await createSandboxMerchant(gw);
  apiKey = merchant.testKey;
  api = apiClient(gw.url, apiKey);
  reference = await paidTransaction(gw.url, merchant.testKey, { amount: 1000, email: "payer@example.com", currency: "KES" });
  const channel = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id: merchant.channelId } });
  callbackToken = Buffer.from(channel.callbackToken, "utf8").toString("hex");
});
afterAll(async () => {
  await gw?.close();
});

/** The body of `metadata`, `variables` or the whole request, 10,000 levels deep, as raw text. */
const deepRequests: { name: string; path: string; body: string; key?: boolean }[] = [
  { name: "REST initialize", path: "/api/transactions/initialize", body: `{"amount":1000,"email":"a@example.com","metadata":${nested(10_000)}}` },
  { name: "REST initialize with an Idempotency-Key", path: "/api/transactions/initialize", body: `{"amount":1000,"email":"a@example.com","metadata":${nested(10_000)}}`, key: true },
  { name: "/v1 refund", path: "/v1/refunds", body: `{"transaction":"x","metadata":${nested(10_000)}}` },
  { name: "/v1 refund with an Idempotency-Key", path: "/v1/refunds", body: `{"transaction":"x","metadata":${nested(10_000)}}`, key: true },
  { name: "/graphql", path: "/graphql", body: `{"query":"mutation($m: JSON) { initializeTransaction(input: {amount: 1000, email: \\"a@example.com\\", metadata: $m}) { __typename } }","variables":{"m":${nested(10_000)}}}` },
  { name: "/graphql with an Idempotency-Key", path: "/graphql", body: `{"query":"{ viewer { name } }","variables":{"m":${nested(10_000)}}}`, key: true },
  { name: "a whole body of nested objects", path: "/api/transactions/initialize", body: nestedObjects(10_000), key: true },
];

describe("a JSON body nested 10,000 levels deep", () => {
  for (const { name, path, body, key } of deepRequests) {
    it(`${name}: a 400 in the envelope, no error line`, async () => {
      const requestId = `deep-json-${Math.random().toString(36).slice(2)}`;
      const res = await api.post(path, body, { "x-request-id": requestId, ...(key ? { "idempotency-key": `deep-${requestId}` } : {}) });
      expect(res.status, res.text).toBe(400);
      expect(res.body).toEqual({ status: "error", code: "validation_failed", message: `The JSON body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels` });
      expect(lines.filter((line) => line.requestId === requestId && line.level >= ERROR)).toEqual([]);
    });
  }

  it("the payer's checkout and a provider callback: a 400, no error line", async () => {
    const checkout = await apiClient(gw.url).post(`/payment/checkout/${reference}/pay`, `{"card_number":${nested(10_000)}}`);
    expect(checkout.status, checkout.text).toBe(400);
    expect(checkout.body).toMatchObject({ status: "error", code: "validation_failed" });
    const callback = await apiClient(gw.url).post(`/callbacks/sandbox/${callbackToken}/stk`, `{"Body":{"stkCallback":${nested(10_000)}}}`);
    expect(callback.status, callback.text).toBe(400);
    expect(callback.body).toMatchObject({ status: "error", code: "validation_failed" });
    expect(lines.filter((line) => line.level >= ERROR)).toEqual([]);
  });

  it("over a WebSocket: 10,000-deep variables are a validation error on that operation, the socket stays open, no error line", async () => {
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
    const messages: { id?: string; type: string; payload?: any }[] = [];
    const waitFor = (predicate: (m: (typeof messages)[number]) => boolean) =>
      new Promise<(typeof messages)[number]>((resolve, reject) => {
        const check = () => {
          const found = messages.find(predicate);
          if (found) resolve(found);
        };
        ws.on("message", check);
        ws.on("close", (code, reason) => reject(new Error(`socket closed ${code} ${reason}`)));
        check();
      });
    ws.on("message", (data) => messages.push(JSON.parse(String(data))));
    await new Promise((resolve) => ws.once("open", resolve));
    try {
      ws.send(JSON.stringify({ type: "connection_init", payload: { "X-API-Key": apiKey } }));
      await waitFor((m) => m.type === "connection_ack");
      const mutation = "mutation($m: JSON) { initializeTransaction(input: {amount: 1000, email: \"a@example.com\", metadata: $m}) { __typename } }";
      ws.send(`{"type":"subscribe","id":"deep","payload":{"query":${JSON.stringify(mutation)},"variables":{"m":${nested(10_000)}}}}`);
      const refused = await waitFor((m) => m.id === "deep" && m.type === "next");
      expect(refused.payload.errors[0].extensions).toEqual({ code: "validation_failed" });
      ws.send(JSON.stringify({ type: "subscribe", id: "after", payload: { query: "{ viewer { name } }" } }));
      const after = await waitFor((m) => m.id === "after" && m.type === "next");
      expect(after.payload.data.viewer.name).toEqual(expect.any(String));
    } finally {
      ws.close();
    }
    expect(lines.filter((line) => line.level >= ERROR)).toEqual([]);
  });

  it("a body exactly MAX_JSON_DEPTH levels deep is parsed; one level more is refused unparsed", async () => {
    // The body, its variables and a variable's arrays: 2 + (MAX_JSON_DEPTH - 2) levels. Parsed, it meets the text
    // rules' own limit on variables (20 levels, a GraphQL error); one level more never gets that far.
    const body = (arrays: number) => `{"query":"{ viewer { name } }","variables":{"unused":${nested(arrays)}}}`;
    const parsed = await api.post("/graphql", body(MAX_JSON_DEPTH - 2));
    expect(parsed.status, parsed.text).toBe(200);
    expect(parsed.body.errors[0].message).toMatch(/must not be nested more than 20 levels deep/);
    const refused = await api.post("/graphql", body(MAX_JSON_DEPTH - 1));
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.message).toMatch(/deeper than 64 levels/);
  });
});

describe("jsonNestedDeeperThan", () => {
  it("counts brackets outside strings only, escapes included", () => {
    expect(jsonNestedDeeperThan(nested(3), 3)).toBe(false);
    expect(jsonNestedDeeperThan(nested(4), 3)).toBe(true);
    expect(jsonNestedDeeperThan(`{"a":"[[[[[[\\"[[[["}`, 1)).toBe(false);
    expect(jsonNestedDeeperThan(`{"a":"\\\\",["b",[1]]}`, 2)).toBe(true);
    expect(jsonNestedDeeperThan(`[{}, {}, [], []]`, 2)).toBe(false);
  });
});
