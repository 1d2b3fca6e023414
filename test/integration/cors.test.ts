import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/** Issue 35, item 14: /graphql no longer reflects any Origin with credentials; only CORS_ORIGINS, and never cookies. */
describe("CORS on /graphql", () => {
  let closed: TestGateway;
  let open: TestGateway;
  const keys = new Map<TestGateway, TestMerchant>();

  beforeAll(async () => {
    closed = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    open = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", CORS_ORIGINS: "https://shop.example,http://localhost:5173" } });
    for (const gw of [closed, open]) keys.set(gw, await gw.createMerchant("Cors"));
  });
  afterAll(async () => {
    await open?.close();
    await closed?.close();
  });

  const post = (gw: TestGateway, origin: string) =>
    fetch(`${gw.url}/graphql`, { method: "POST", headers: { origin, "content-type": "application/json", "x-api-key": keys.get(gw)!.testKey }, body: JSON.stringify({ query: "{ viewer { name } }" }) });
  const preflight = (gw: TestGateway, origin: string) =>
    fetch(`${gw.url}/graphql`, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-api-key" } });

  it("by default no origin is allowed: no Access-Control-Allow-* header, on the request or its preflight", async () => {
    for (const origin of ["https://evil.example", "null", "https://shop.example"]) {
      const res = await post(closed, origin);
      expect(res.status).toBe(200); // the server still answers; the browser withholds it from the page
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
      const options = await preflight(closed, origin);
      expect(options.headers.get("access-control-allow-origin")).toBeNull();
    }
  });

  it("CORS_ORIGINS allows exactly those origins, without credentials, and no other", async () => {
    const allowed = await post(open, "https://shop.example");
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://shop.example");
    expect(allowed.headers.get("access-control-allow-credentials")).not.toBe("true");
    const options = await preflight(open, "http://localhost:5173");
    expect(options.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    expect((options.headers.get("access-control-allow-headers") ?? "").toLowerCase()).toContain("x-api-key");
    for (const origin of ["https://evil.example", "https://shop.example.evil.example", "null"]) {
      const res = await post(open, origin);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
    }
  });
});
