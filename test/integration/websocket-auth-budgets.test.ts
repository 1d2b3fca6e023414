import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { useTestGateway } from "../support/fixture.ts";

/**
 * graphql-ws's connection_init is budgeted like an HTTP request. A missing or
 * bad key spends the client IP's budget (the same one as a 401 over HTTP); an IP or key over budget
 * is closed with 4429 before any key lookup; each subscribe spends the key's budget.
 */

const IP_BUDGET = 5;
const KEY_BUDGET = 6;

let nextIp = 1;
/** Each test speaks from its own address (the gateway trusts X-Forwarded-For from loopback here). */
const freshIp = () => `198.51.100.${nextIp++}`;

interface InitOutcome {
  /** The open socket when the server acknowledged; closed otherwise. */
  socket: WebSocket;
  acked: boolean;
  close?: { code: number; reason: string };
}

/** Opens a graphql-transport-ws socket from `ip` and sends connection_init with `payload`. */
async function connect(url: string, ip: string, payload: Record<string, unknown>): Promise<InitOutcome> {
  const socket = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws", { headers: { "x-forwarded-for": ip } });
  return new Promise((resolve, reject) => {
    socket.once("error", reject);
    socket.once("open", () => socket.send(JSON.stringify({ type: "connection_init", payload })));
    socket.on("message", (data) => {
      if (JSON.parse(String(data)).type === "connection_ack") resolve({ socket, acked: true });
    });
    socket.once("close", (code, reason) => resolve({ socket, acked: false, close: { code, reason: reason.toString() } }));
  });
}

const keyParams = (key: string | undefined) => (key === undefined ? {} : { "X-API-Key": key });

/** Sends one subscribe on an acknowledged socket; resolves with the first message about it, {type: "started"} for the ready signal. */
function subscribe(socket: WebSocket, id: string): Promise<{ type: string; payload?: any }> {
  return new Promise((resolve) => {
    const onMessage = (data: WebSocket.RawData) => {
      const message = JSON.parse(String(data));
      if (message.id !== id) return;
      socket.off("message", onMessage);
      const ready = message.type === "next" && message.payload?.data === undefined && message.payload?.extensions?.ready === true;
      resolve(ready ? { type: "started" } : message);
    };
    socket.on("message", onMessage);
    socket.send(JSON.stringify({ id, type: "subscribe", payload: { query: "subscription { transactionEvents(ready: true) { type } }" } }));
  });
}

describe.each(["memory", "redis"] as const)("WebSocket authentication and subscribe budgets (%s counters)", (store) => {
  let gw: TestGateway;
  let sql: string[] = [];
  // No job runner: its polls are statements too, and "no database work" is asserted of the refused connections.
  const env = { RATE_LIMIT_IP_PER_MINUTE: String(IP_BUDGET), RATE_LIMIT_PER_MINUTE: String(KEY_BUDGET), TRUST_PROXY: "127.0.0.1", JOBS_ENABLED: "false" };
  useTestGateway({ redis: store === "redis", env, onQuery: (statement) => sql.push(statement) }, (started) => void (gw = started));

  it("failed connection_inits spend the IP budget; then the IP is closed with 4429, without a key lookup", async () => {
    const { testKey } = await gw.createMerchant();
    const guesser = freshIp();
    const attempts = [undefined, "not-a-key", "sk_test_wrongwrongwrongwrongwrong1", "sk_live_wrongwrongwrongwrongwrong2", "sk_test_wrongwrongwrongwrongwrong3"];
    for (const key of attempts) {
      const outcome = await connect(gw.url, guesser, keyParams(key));
      expect(outcome.acked).toBe(false);
      expect(outcome.close).toEqual({ code: 4403, reason: "Forbidden" });
    }
    // The budget is spent: a further guess, and even a valid key, is refused before any database work.
    sql = [];
    for (const key of ["sk_test_wrongwrongwrongwrongwrong4", undefined, testKey]) {
      const outcome = await connect(gw.url, guesser, keyParams(key));
      expect(outcome.acked).toBe(false);
      expect(outcome.close?.code).toBe(4429);
      expect(outcome.close?.reason).toMatch(/^Rate limit exceeded, retry in \d+ seconds$/);
    }
    expect(sql).toEqual([]);
    // One budget for both transports: the same IP is refused over HTTP too.
    const http = await apiClient(gw.url).get("/v1/status", { "x-forwarded-for": guesser });
    expect(http.status).toBe(429);
    expect(http.body).toMatchObject({ status: "error", code: "rate_limited" });
    // Another address is not affected (and its valid key is looked up and accepted).
    const other = await connect(gw.url, freshIp(), keyParams(testKey));
    expect(other.acked).toBe(true);
    expect(sql.length).toBeGreaterThan(0);
    other.socket.close();
  });

  it("HTTP 401s and WebSocket failures share one per-IP budget", async () => {
    const ip = freshIp();
    for (let i = 0; i < 3; i++) expect((await apiClient(gw.url, "sk_test_wrongwrongwrongwrongwrong9").get("/v1/status", { "x-forwarded-for": ip })).status).toBe(401);
    for (let i = 0; i < 2; i++) expect((await connect(gw.url, ip, keyParams(undefined))).close?.code).toBe(4403);
    expect((await connect(gw.url, ip, keyParams(undefined))).close?.code).toBe(4429);
  });

  it("a burst of bad connection_inits from one IP: no more than the budget get past the limiter", async () => {
    const ip = freshIp();
    // Keys that cannot be keys spend the budget before anything else, so even a concurrent burst is capped.
    const outcomes = await Promise.all(Array.from({ length: 40 }, () => connect(gw.url, ip, keyParams("guess"))));
    const codes = outcomes.map((o) => o.close?.code);
    expect(codes.filter((c) => c === 4403)).toHaveLength(IP_BUDGET);
    expect(codes.filter((c) => c === 4429)).toHaveLength(40 - IP_BUDGET);
  });

  it("a valid connection_init does not spend the IP budget", async () => {
    const { testKey } = await gw.createMerchant();
    const ip = freshIp();
    for (let i = 0; i < IP_BUDGET + 1; i++) {
      const outcome = await connect(gw.url, ip, keyParams(testKey));
      expect(outcome.acked).toBe(true);
      outcome.socket.close();
    }
    const http = await apiClient(gw.url).get("/v1/status", { "x-forwarded-for": ip });
    expect(http.status).toBe(401);
    expect(http.headers.get("x-ratelimit-remaining")).toBe(String(IP_BUDGET - 1));
  });

  it("a key over its HTTP budget is refused over WebSocket: at connection_init, and on each subscribe", async () => {
    const { testKey } = await gw.createMerchant();
    const api = apiClient(gw.url, testKey);
    // connection_init counts one request of the key's budget, like an HTTP request.
    const open = await connect(gw.url, freshIp(), keyParams(testKey));
    expect(open.acked).toBe(true);
    expect(await subscribe(open.socket, "1")).toEqual({ type: "started" });
    // 2 of 6 spent; HTTP spends the rest.
    for (let i = 0; i < KEY_BUDGET - 2; i++) expect((await api.get("/v1/status")).status).toBe(200);
    expect((await api.get("/v1/status")).status).toBe(429);
    // On the socket opened before: the subscribe is refused with the 429's code and message.
    const refused = await subscribe(open.socket, "2");
    expect(refused.type).toBe("error");
    expect(refused.payload).toEqual([
      { message: expect.stringMatching(/^Rate limit exceeded, retry in \d+ seconds$/), extensions: { code: "rate_limited" } },
    ]);
    open.socket.close();
    // A new socket with that key is closed at once.
    const late = await connect(gw.url, freshIp(), keyParams(testKey));
    expect(late.acked).toBe(false);
    expect(late.close?.code).toBe(4429);
  });
});

describe("WebSocket authentication with rate limiting off", () => {
  it("still refuses a bad key with 4403 and accepts a good one", async () => {
    const gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    try {
      const { testKey } = await gw.createMerchant();
      for (let i = 0; i < 3; i++) expect((await connect(gw.url, "127.0.0.1", keyParams("sk_test_wrongwrongwrongwrongwrong1"))).close?.code).toBe(4403);
      const ok = await connect(gw.url, "127.0.0.1", keyParams(testKey));
      expect(ok.acked).toBe(true);
      ok.socket.close();
    } finally {
      await gw.close();
    }
  });
});
