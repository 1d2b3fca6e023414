import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { retryAfterMs, retrying, retryingUnavailable } from "./retry.ts";

/** A server answering each request with the next planned status and headers (the last one from then on). */
describe("retrying 503 + Retry-After as a client does", () => {
  let server: Server;
  let url: string;
  let plan: { status: number; headers?: Record<string, string> }[] = [];
  let requests = 0;

  beforeAll(async () => {
    server = createServer((_req, res) => {
      const answer = plan[Math.min(requests, plan.length - 1)]!;
      requests++;
      res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers }).end(JSON.stringify({ n: requests }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const given = (...answers: typeof plan) => {
    plan = answers;
    requests = 0;
  };
  const unavailable = { status: 503, headers: { "retry-after": "0" } };
  const send = async (method = "GET") => {
    const res = await fetch(url, { method });
    return { status: res.status, headers: res.headers, body: (await res.json()) as { n: number } };
  };
  const client = { get: () => send(), post: () => send("POST") };

  it("sends again after each 503 with Retry-After, and returns the first other answer", async () => {
    given(unavailable, unavailable, { status: 200 });
    const res = await retryingUnavailable(() => send());
    expect([res.status, res.body.n, requests]).toEqual([200, 3, 3]);
  });

  it("gives up after the attempts it is given, returning the last 503 for the test to see", async () => {
    given(unavailable);
    const res = await retryingUnavailable(() => send(), 3);
    expect([res.status, requests]).toEqual([503, 3]);
  });

  it("does not retry a 503 without Retry-After, a 429, or a 500", async () => {
    for (const answer of [{ status: 503 }, { status: 429, headers: { "retry-after": "0" } }, { status: 500 }]) {
      given(answer, { status: 200 });
      expect((await retryingUnavailable(() => send())).status).toBe(answer.status);
      expect(requests).toBe(1);
    }
  });

  it("waits what Retry-After says, in seconds or as a date", () => {
    const answer = (value: string) => ({ status: 503, headers: new Headers({ "retry-after": value }) });
    expect(retryAfterMs(answer("5"))).toBe(5000);
    expect(retryAfterMs(answer(new Date(Date.now() + 60_000).toUTCString()))).toBeGreaterThan(50_000);
    expect(retryAfterMs(answer("soon"))).toBeUndefined();
    expect(retryAfterMs({ status: 200, headers: new Headers({ "retry-after": "5" }) })).toBeUndefined();
  });

  it("retrying(client) does the same for every method of a client", async () => {
    given(unavailable, { status: 201 });
    const res = await retrying(client).post();
    expect([res.status, requests]).toEqual([201, 2]);
  });
});
