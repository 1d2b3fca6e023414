import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * Each delivery's request and response as the deliveries list shows them (issue 41): a real loopback receiver
 * answers a 500 with a body (NUL bytes, a bad UTF-8 byte) and headers (a cookie among them), then a 200 with a
 * body longer than the 2,048 characters kept.
 */

interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

let gw: TestGateway;
let server: Server;
const received: Received[] = [];
const LONG_BODY = "ok-".repeat(1500); // 4,500 characters

/** First answer: 500, a body with control characters and a bad byte, a cookie. Then 200 and a long body. */
function answer(index: number, res: import("node:http").ServerResponse) {
  if (index === 0) {
    res.writeHead(500, { "content-type": "text/plain", "x-request-id": "req-42", "set-cookie": "session=abc123", "x-api-token": "tok_1" });
    res.end(Buffer.concat([Buffer.from("boom\u0000 at\u0007 line\n\t2 "), Buffer.from([0xff]), Buffer.from(" <b>bold</b>")]));
  } else {
    res.writeHead(200, { "content-type": "text/plain", "x-request-id": "req-43" });
    res.end(LONG_BODY);
  }
}

const DELIVERIES = `query D($endpointId: Int) { webhookDeliveries(endpointId: $endpointId) {
  status attempts lastStatusCode
  request { url headers { name value } body }
  response { status headers { name value } body }
} }`;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => answer(received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") }) - 1, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  gw = await startTestGateway({ env: { WEBHOOK_RETRY_SCHEDULE: "0,2000ms,2000ms", JOB_POLL_INTERVAL_MS: "200", RATE_LIMIT_ENABLED: "false" } });
});

afterAll(async () => {
  await gw?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe("webhook deliveries: request and response", () => {
  it("keeps the cleaned answer excerpt and headers of each attempt, shows the request as sent, never a secret", async () => {
    const { testKey } = await createSandboxMerchant(gw);
    const api = apiClient(gw.url, testKey);
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    const created = await api.post("/v1/webhooks", { url, allow_local_urls: true });
    expect(created.status, created.text).toBe(201);
    const endpointId: number = created.body.data.id;
    const secret: string = created.body.data.secret;
    expect(secret).toMatch(/^whsec_/);

    const gql = async () => {
      const res = await api.post("/graphql", { query: DELIVERIES, variables: { endpointId } });
      expect(res.body.errors, res.text).toBeUndefined();
      expect(res.text).not.toContain("whsec_");
      expect(res.text).not.toContain(secret.slice(6, 30));
      return res.body.data.webhookDeliveries as any[];
    };

    const sent = await api.post("/graphql", { query: `mutation($id: Int!) { sendTestWebhook(endpointId: $id) { __typename } }`, variables: { id: endpointId } });
    expect(sent.body.errors, sent.text).toBeUndefined();
    // Before the first attempt ends (or right after it is queued) a delivery may have no response: null, never an error.
    const [failed] = await until(gql, (d) => d[0]?.attempts === 1 && d[0].response !== null);
    expect(failed.lastStatusCode).toBe(500);
    expect(failed.response.status).toBe(500);
    expect(failed.response.body).toBe("boom at line\n\t2 \ufffd <b>bold</b>");
    const failedHeaders = Object.fromEntries(failed.response.headers.map((h: any) => [h.name, h.value]));
    expect(failedHeaders["x-request-id"]).toBe("req-42");
    expect(failedHeaders["content-type"]).toBe("text/plain");
    expect(failedHeaders["set-cookie"]).toBeUndefined();
    expect(failedHeaders["x-api-token"]).toBeUndefined();

    const [delivered] = await until(gql, (d) => d[0]?.status === "succeeded");
    expect(delivered.response.status).toBe(200);
    expect(delivered.response.body).toBe(LONG_BODY.slice(0, 2048));
    expect(delivered.response.headers).toContainEqual({ name: "x-request-id", value: "req-43" });

    // The request as shown is what the receiver got: the same body, byte for byte, and the same headers but the signature.
    expect(received).toHaveLength(2);
    const got = received[1]!;
    expect(delivered.request.url).toBe(url);
    expect(delivered.request.body).toBe(got.body);
    expect(JSON.parse(delivered.request.body)).toEqual(JSON.parse(got.body));
    const shown = Object.fromEntries(delivered.request.headers.map((h: any) => [h.name, h.value]));
    expect(shown["content-type"]).toBe(got.headers["content-type"]);
    expect(shown["user-agent"]).toBe(got.headers["user-agent"]);
    expect(shown["webhook-id"]).toBe(got.headers["webhook-id"]);
    expect(shown["webhook-signature"]).toBe("(signed; not shown)");
    expect(got.headers["webhook-signature"]).toMatch(/^v1,/);
  });
});
