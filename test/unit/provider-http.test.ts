import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GatewayError } from "../../src/errors.ts";
import { withProviderCallScope, type ProviderCallRecord, type ProviderCallScope } from "../../src/providers/call-record.ts";
import { createProviderHttp, operationName } from "../../src/providers/http.ts";
import { createScrubber } from "../../src/providers/scrub.ts";

/**
 * The one provider HTTP helper against a real loopback server: an answer of any status is handed back; no whole
 * answer (timeout, refused, reset, cut off) is provider_unavailable, the unknown outcome. Every exchange is recorded.
 */
type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const routes: Record<string, Handler> = {
  "/ok": (_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, password: "hunter22" })),
  "/bad-request": (_req, res) => res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ message: "bad amount" })),
  "/down": (_req, res) => res.writeHead(503, { "content-type": "text/html" }).end("<h1>Service Unavailable</h1>"),
  "/slow": () => {}, // never answers
  "/reset": (req) => req.socket.destroy(),
  "/cut": (_req, res) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": "200" });
    res.write('{"ResponseCode":"0","Conv');
    setTimeout(() => res.socket?.destroy(), 20);
  },
};

let server: Server;
let base: string;
let closedPort: number;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => routes[new URL(req.url ?? "/", "http://x").pathname]?.(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // A port nothing listens on: bound, then released.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  closedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

// Answers get a limit a busy CI machine cannot reach (the first request also loads the HTTP client); only the
// timeout case uses a short one, against a route that never answers.
function recorder(timeoutMs = 15_000) {
  const records: Array<{ record: ProviderCallRecord; scope: ProviderCallScope | undefined }> = [];
  const send = createProviderHttp({ connector: "testpay", label: "TestPay", timeoutMs, recordCall: (record, scope) => records.push({ record, scope }) });
  return { records, send };
}

const scrub = createScrubber({ secretKeys: ["password", "pin"] });
const thrown = async (promise: Promise<unknown>) => promise.then(() => expect.fail("did not throw"), (error: GatewayError) => error);

describe("an answer is handed back, whatever its status", () => {
  it("200: status and JSON body; the record has the path without its query, snake_case operation, scrubbed bodies and the scope", async () => {
    const { records, send } = recorder();
    const scope = { merchantId: 7, transactionId: 42 };
    const answer = await withProviderCallScope(scope, () =>
      send({ operation: "STK push", method: "POST", url: `${base}/ok?grant_type=x&secret=1`, body: { amount: 10, pin: "1234" }, scrub }),
    );
    expect(answer).toEqual({ status: 200, body: { ok: true, password: "hunter22" } });
    expect(records).toHaveLength(1);
    expect(records[0]!.scope).toEqual(scope);
    expect(records[0]!.record).toMatchObject({
      connector: "testpay",
      operation: "stk_push",
      method: "POST",
      path: "/ok",
      statusCode: 200,
      error: null,
      requestBody: JSON.stringify({ amount: 10, pin: "[redacted]" }),
      responseBody: JSON.stringify({ ok: true, password: "[redacted]" }),
    });
    expect(records[0]!.record.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("4xx: handed back for the connector to read as a refusal", async () => {
    const { records, send } = recorder();
    expect(await send({ operation: "refund", method: "POST", url: `${base}/bad-request`, body: {}, scrub })).toEqual({ status: 400, body: { message: "bad amount" } });
    expect(records[0]!.record).toMatchObject({ statusCode: 400, error: null, responseBody: '{"message":"bad amount"}' });
  });

  it("5xx with a non-JSON body: handed back with no body; the record keeps the text; no scope outside one", async () => {
    const { records, send } = recorder();
    expect(await send({ operation: "transaction list", method: "GET", url: `${base}/down`, scrub })).toEqual({ status: 503, body: null });
    expect(records[0]).toMatchObject({ scope: undefined, record: { operation: "transaction_list", statusCode: 503, requestBody: null, responseBody: "<h1>Service Unavailable</h1>" } });
  });
});

describe("no whole answer is the unknown outcome: provider_unavailable", () => {
  it.each([
    ["a timeout", "/slow", "timeout", /TestPay did not answer the payout in time/, null],
    ["a connection reset after sending", "/reset", "connection reset", /TestPay could not be reached for the payout/, null],
    ["an answer cut off mid-body", "/cut", /^answer cut off/, /TestPay's answer to the payout was cut off/, 200],
  ])("%s", async (_name, path, error, message, statusCode) => {
    const { records, send } = recorder(path === "/slow" ? 300 : undefined);
    const failure = await thrown(send({ operation: "payout", method: "POST", url: `${base}${path}`, body: { amount: 1 }, scrub }));
    expect(failure).toMatchObject({ code: "provider_unavailable", status: 503 });
    expect(failure.message).toMatch(message);
    expect(records).toHaveLength(1);
    expect(records[0]!.record).toMatchObject({ operation: "payout", statusCode, responseBody: null, requestBody: '{"amount":1}' });
    expect(records[0]!.record.error).toMatch(error);
  });

  it("a connection refused: provider_unavailable, as both connectors decided before the helper", async () => {
    const { records, send } = recorder();
    const failure = await thrown(send({ operation: "STK query", method: "POST", url: `http://127.0.0.1:${closedPort}/x`, body: {}, scrub }));
    expect(failure).toMatchObject({ code: "provider_unavailable", message: "TestPay could not be reached for the STK query" });
    expect(records[0]!.record).toMatchObject({ statusCode: null, error: "connection refused", path: "/x" });
  });
});

describe("recording", () => {
  it("is optional, and a sink that throws never changes the call's outcome", async () => {
    const quiet = createProviderHttp({ connector: "testpay", label: "TestPay", timeoutMs: 300 });
    expect((await quiet({ operation: "ok", method: "GET", url: `${base}/ok`, scrub })).status).toBe(200);
    const failing = createProviderHttp({ connector: "testpay", label: "TestPay", timeoutMs: 300, recordCall: () => { throw new Error("store down"); } });
    expect((await failing({ operation: "ok", method: "GET", url: `${base}/ok`, scrub })).status).toBe(200);
  });

  it("names operations in snake_case", () => {
    expect(["STK push", "C2B URL registration", "payout status query", "authentication"].map(operationName)).toEqual([
      "stk_push",
      "c2b_url_registration",
      "payout_status_query",
      "authentication",
    ]);
  });
});
