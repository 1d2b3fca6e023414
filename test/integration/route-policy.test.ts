import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * Who may call what, as the API's documentation promises it, checked over HTTP for every route the running
 * gateway serves (walked from Fastify's own route list, so a route added tomorrow is checked too):
 * - /api/* needs an X-API-Key; /v1/* (but sign-in, /v1/auth/*) and /graphql take a key or a user's token;
 *   without one: a 401 that spent the IP's budget;
 * - a payer's card payment, return from a provider's page and payment-link form post need no credential but spend the IP's budget;
 * - everything else (health, docs, dashboard, sign-in, checkout page, provider callbacks) is open and unbudgeted.
 * A route registered without a policy does not start at all (test/unit/route-policy.test.ts).
 */
const IP_BUDGET = 1000;

type Contract = "credential" | "payer" | "open";

function contractOf(method: string, path: string): Contract {
  // A CORS preflight carries no credential (browsers never send one): answered without one, on the IP's budget.
  if (path === "/graphql" && method === "OPTIONS") return "payer";
  if (path.startsWith("/api/") || path === "/graphql" || (path.startsWith("/v1/") && !path.startsWith("/v1/auth/"))) return "credential";
  if (path.startsWith("/payment/checkout/") && (method === "POST" || path.endsWith("/return"))) return "payer";
  // A payment link's form post makes a transaction: the payer's IP budget, as a card payment.
  if (path.startsWith("/pay/") && method === "POST") return "payer";
  return "open";
}

/** Every method and path in app.printRoutes()'s tree (parameters and wildcards filled with a value). */
function servedRoutes(tree: string): { method: string; path: string }[] {
  const stack: string[] = [];
  const routes: { method: string; path: string }[] = [];
  for (const line of tree.split("\n")) {
    const match = /^([│ ]*)[├└]── (\S+)(?: \(([A-Z, ]+)\))?$/.exec(line.replace(/\s+$/, ""));
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    stack.push(match[2]!);
    if (!match[3]) continue;
    const path = stack.join("").replace(/:[A-Za-z_]+/g, "routepolicy0probe").replace(/\*$/, "anything");
    for (const method of match[3].split(", ")) routes.push({ method, path });
  }
  return routes;
}

describe("route policies, as callers see them", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  let nextIp = 1;
  const freshIp = () => `198.51.100.${nextIp++}`;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { TRUST_PROXY: "127.0.0.1", RATE_LIMIT_IP_PER_MINUTE: String(IP_BUDGET) } });
    merchant = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  const send = (method: string, path: string, headers: Record<string, string> = {}) =>
    apiClient(gw.url).raw(path, {
      method,
      headers: { "x-forwarded-for": freshIp(), ...(method === "POST" ? { "content-type": "application/json" } : {}), ...headers },
      ...(method === "POST" ? { body: "{}" } : {}),
    });

  const budgetSpent = (res: HttpResult) => res.headers.get("x-ratelimit-limit");

  it("walks every served route, and each answers a caller without a credential as its family's contract says", async () => {
    const routes = servedRoutes(gw.gateway.app.printRoutes({ commonPrefix: false }));
    // The walk finds the route families (a broken parse would make the test below vacuous).
    for (const family of ["/api/", "/v1/status", "/v1/auth/login", "/graphql", "/payment/checkout/", "/callbacks/", "/dashboard", "/health"]) {
      expect(routes.some((route) => route.path.startsWith(family)), family).toBe(true);
    }
    const mismatches: string[] = [];
    for (const { method, path } of routes) {
      const res = await send(method, path);
      const refused = res.status === 401 && (method === "HEAD" || res.body?.code === "invalid_api_key");
      const seen: Contract = refused ? "credential" : budgetSpent(res) === String(IP_BUDGET) ? "payer" : "open";
      const expected = contractOf(method, path);
      if (seen !== expected || (refused && budgetSpent(res) !== String(IP_BUDGET))) {
        mismatches.push(`${method} ${path}: expected ${expected}, answered ${res.status} ${res.body?.code ?? ""} (X-RateLimit-Limit ${budgetSpent(res)})`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it("keeps the URL family's policy for unknown URLs: no route discovery without a key", async () => {
    const key = { "x-api-key": merchant.testKey };
    for (const path of ["/api/nope", "/v1/nope", "/api/transactions/list/extra"]) {
      const anonymous = await send("GET", path);
      expect([path, anonymous.status, anonymous.body?.code, budgetSpent(anonymous)]).toEqual([path, 401, "invalid_api_key", String(IP_BUDGET)]);
      const keyed = await send("GET", path, key);
      expect([path, keyed.status, keyed.body?.code]).toEqual([path, 404, "route_not_found"]);
    }
    // A method a known path does not serve is an unknown URL too.
    expect((await send("DELETE", "/api/transactions/list")).status).toBe(401);
    expect((await send("PUT", "/graphql")).status).toBe(401);
    // Outside the API families a 404 is just that, unbudgeted.
    for (const path of ["/v1/auth/nope", "/nope", "/api", "/graphql/"]) {
      const res = await send("GET", path);
      expect([path, res.status, res.body?.code, budgetSpent(res)]).toEqual([path, 404, "route_not_found", null]);
    }
    // A payer's POST to an unknown checkout path spends the budget as a payment does.
    const payer = await send("POST", "/payment/checkout/nope/nope");
    expect([payer.status, budgetSpent(payer)]).toEqual([404, String(IP_BUDGET)]);
  });

  it("applies a route's policy however its path is spelled: a percent-encoded /api path still needs the key and spends its budget", async () => {
    const anonymous = await send("GET", "/%61pi/transactions/list");
    expect([anonymous.status, anonymous.body?.code, budgetSpent(anonymous)]).toEqual([401, "invalid_api_key", String(IP_BUDGET)]);
    const keyed = await send("GET", "/%61pi/transactions/list", { "x-api-key": merchant.testKey });
    expect(keyed.status).toBe(200);
    expect(budgetSpent(keyed)).not.toBeNull();
  });
});
