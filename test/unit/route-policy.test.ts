import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { requireRoutePolicies } from "../../src/route-policy.ts";

/**
 * A route that forgets to say who may call it must not start: the gateway installs requireRoutePolicies
 * before its first route (src/server.ts), so every test run would fail on it. What callers see of each
 * declared policy is checked over HTTP in test/integration/route-policy.test.ts.
 */
describe("a route without a declared policy", () => {
  const app = () => {
    const instance = Fastify();
    requireRoutePolicies(instance);
    return instance;
  };

  it("is refused when it is registered, naming the route", () => {
    expect(() => app().get("/v1/forgotten", async () => ({}))).toThrow(/Route GET \/v1\/forgotten declares no policy/);
    expect(() => app().post("/callbacks/forgotten", { config: { auth: "none" } }, async () => ({}))).toThrow(/POST \/callbacks\/forgotten declares no policy/);
  });

  it("is refused inside a plugin too: the gateway does not become ready", async () => {
    const instance = app();
    instance.register(async (scope) => {
      scope.post("/webhooks/forgotten", async () => ({}));
    });
    await expect(instance.ready()).rejects.toThrow(/POST \/webhooks\/forgotten declares no policy/);
  });

  it("is refused with a policy that names no known rule, or checks a credential without a budget", () => {
    expect(() => app().get("/x", { config: { auth: "api-keys" as never, rateLimit: "caller" } }, async () => ({}))).toThrow(/unknown auth policy "api-keys"/);
    expect(() => app().get("/x", { config: { auth: "none", rateLimit: "ip" as never } }, async () => ({}))).toThrow(/unknown rateLimit policy "ip"/);
    expect(() => app().get("/x", { config: { auth: "api-key", rateLimit: "none" } }, async () => ({}))).toThrow(/must be rate limited per caller/);
  });

  it("starts once it declares one", async () => {
    const instance = app();
    instance.get("/health", { config: { auth: "none", rateLimit: "none" } }, async () => ({ ok: true }));
    instance.get("/v1/thing", { config: { auth: "api-key-or-user", rateLimit: "caller" } }, async () => ({ ok: true }));
    await instance.ready();
    expect((await instance.inject({ method: "GET", url: "/health" })).json()).toEqual({ ok: true });
    await instance.close();
  });
});
