import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { postOutbound } from "../../src/security/outbound.ts";
import { RESPONSE_READ_BYTES, deliveryRequest, responseExcerpt, responseHeaders } from "../../src/modules/webhooks/exchange.ts";

/** What a delivery keeps of an endpoint's answer, and the bound on what is read of it. */
describe("webhook exchange", () => {
  it("keeps 2,048 characters, control characters but newline and tab removed, never half a surrogate pair", () => {
    expect(responseExcerpt("a\u0000b\r\nc\td\u001b[31m\u007f\u0085")).toBe("ab\nc\td[31m");
    expect(responseExcerpt("x".repeat(5000))).toHaveLength(2048);
    expect(responseExcerpt("x".repeat(2047) + "😀")).toBe("x".repeat(2047));
  });

  it("drops cookie, authorization and token-like headers", () => {
    const kept = responseHeaders({ "content-type": "text/plain", "set-cookie": "a=b", authorization: "Bearer x", "www-authenticate": "Basic", "x-auth-token": "t", "x-session-id": "s", "x-request-id": "r\u00001" });
    expect(kept).toEqual({ "content-type": "text/plain", "x-request-id": "r1" });
  });

  it("shows the request's headers with the signature withheld", () => {
    const request = deliveryRequest("https://shop.test/hooks", { id: 7n, type: "webhook.test", createdAt: new Date("2026-01-01T00:00:00Z"), payload: { message: "hi" } });
    expect(request.headers).toContainEqual({ name: "webhook-signature", value: "(signed; not shown)" });
    expect(request.headers).toContainEqual({ name: "webhook-id", value: "7" });
    expect(JSON.parse(request.body)).toEqual({ type: "webhook.test", timestamp: "2026-01-01T00:00:00.000Z", data: { message: "hi" } });
  });

  it("reads no more than the bound of a long answer, and the status still decides", async () => {
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "x-request-id": "big" });
        // 4 MB in 64 KB writes; the reader stops long before.
        let left = 64;
        const more = () => {
          while (left-- > 0) if (!res.write("y".repeat(64 * 1024))) return void res.once("drain", more);
          res.end();
        };
        res.on("close", () => (left = 0));
        more();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const result = await postOutbound(url, { headers: {}, body: "{}", timeoutMs: 10_000, allowPrivate: true, maxResponseBytes: RESPONSE_READ_BYTES });
      expect(result.ok).toBe(true);
      expect(result.statusCode).toBe(200);
      expect(result.body).toHaveLength(RESPONSE_READ_BYTES);
      expect(result.headers["x-request-id"]).toBe("big");
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
