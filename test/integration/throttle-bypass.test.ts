import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Two ways around the per-IP budget that throttles key guessing and card testing, closed: a made-up key on the
 * payer's routes, and a request that only claims to be a WebSocket upgrade on a keyed route.
 */
const IP_BUDGET = 5;

/** Each test speaks from its own client address (the gateway trusts X-Forwarded-For from loopback here). */
let nextIp = 1;
const freshIp = () => `198.51.100.${nextIp++}`;

/** A raw HTTP/1.1 GET, to send headers fetch refuses to (Upgrade), as any client can. */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "GET", headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the per-IP budget cannot be sidestepped", () => {
  let gw: TestGateway;
  let testKey: string;
  let reference: string;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_IP_PER_MINUTE: String(IP_BUDGET), TRUST_PROXY: "127.0.0.1" } });
    const merchant = await gw.createMerchant();
    testKey = merchant.testKey;
    const api = apiClient(gw.url, testKey);
    expect((await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} })).status).toBe(201);
    reference = (await api.post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com" })).body.reference;
  });
  afterAll(async () => {
    await gw?.close();
  });

  const pay = (ip: string, key?: string) =>
    fetch(`${gw.url}/payment/checkout/${reference}/pay`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": ip, ...(key ? { "x-api-key": key } : {}) },
      // A card the sandbox declines: the first attempt settles the transaction, the rest are 409s; all spend a budget.
      body: JSON.stringify({ card_number: "4000000000000002", expiry_month: 12, expiry_year: 2040, cvc: "123" }),
    });

  it("a payer presenting a fresh made-up key each time spends its IP's budget: the request after it is refused", async () => {
    const ip = freshIp();
    const statuses: number[] = [];
    for (let i = 0; i <= IP_BUDGET; i++) statuses.push((await pay(ip, `sk_test_${String(i).padStart(32, "x")}`)).status);
    expect(statuses.slice(0, IP_BUDGET)).not.toContain(429);
    expect(statuses[IP_BUDGET]).toBe(429);
    // Without any key the same IP is refused too: it is one budget.
    expect((await pay(ip)).status).toBe(429);
  });

  it("a payer route called with the merchant's valid key spends the key's budget, not the IP's", async () => {
    const ip = freshIp();
    const statuses: number[] = [];
    for (let i = 0; i <= IP_BUDGET + 2; i++) statuses.push((await pay(ip, testKey)).status);
    expect(statuses).not.toContain(429);
  });

  it("a keyed route answers a request that only claims `Upgrade: websocket` as any other: a bad key spends the IP's budget", async () => {
    const ip = freshIp();
    const statuses: number[] = [];
    for (let i = 0; i <= IP_BUDGET; i++) {
      statuses.push((await rawGet(`${gw.url}/api/transactions/list`, { upgrade: "websocket", "x-forwarded-for": ip })).status);
    }
    expect(statuses.slice(0, IP_BUDGET)).toEqual(Array(IP_BUDGET).fill(401));
    expect(statuses[IP_BUDGET]).toBe(429);
  });

  it("and with a valid key it is authenticated and served (the header changes nothing)", async () => {
    const res = await rawGet(`${gw.url}/api/transactions/list`, { upgrade: "websocket", "x-api-key": testKey, "x-forwarded-for": freshIp() });
    expect(res.status, res.body).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ status: "success", total: 1 });
  });
});
