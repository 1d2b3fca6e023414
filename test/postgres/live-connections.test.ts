import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { withGateways } from "../support/fixture.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { collect, sseSubscribe, wsClientWith, type ClosedSocket } from "../support/subscriptions.ts";
import { EVENTUALLY_MS } from "../support/timing.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * A long-lived connection never outlives its credential (issue 35, item 3): every operation on a graphql-ws socket
 * checks the principal again, and a principal's sockets and SSE streams end at once, on every instance, when it is
 * disabled, given another role or a new password, or (a key) revoked; a socket closes when its access token expires
 * unless the client refreshed it. Two instances on one PostgreSQL and one Redis: the change is made on B, the
 * connections are open on A.
 */
const Everything = graphql(`
  subscription LiveConnectionEvents {
    transactionEvents(ready: true) {
      transaction {
        reference
      }
    }
  }
`);

/** Generous: the change travels through Redis to the other instance on a machine that may be busy. */
const CLOSE_WITHIN_MS = EVENTUALLY_MS;
/** Short access tokens for the expiry test; each refresh below comes well before the token in use expires (5 s margin). */
const TOKEN_TTL_SECONDS = 8;
const REFRESH_EVERY_MS = 3_000;

type Role = "owner" | "developer" | "viewer";

async function signIn(gw: TestGateway, user: { email: string; password: string }, mode: "test" | "live" = "test") {
  const res = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password, mode });
  expect(res.status, res.text).toBe(200);
  return res.body.data as { access_token: string; refresh_token: string };
}

/** A socket on `gw` with a live subscription (ready), recording how it closed. */
async function openSocket(gw: TestGateway, params: Record<string, unknown>) {
  const closed: ClosedSocket[] = [];
  const client = wsClientWith(gw.url, params, (event) => closed.push(event));
  const events = collect(client, Everything);
  await events.ready();
  return {
    client,
    closed,
    async closedWith(code: number) {
      await waitUntil(() => closed.length > 0, `the socket to close with ${code}`, CLOSE_WITHIN_MS);
      expect(closed[0]!.code).toBe(code);
    },
    dispose: () => void client.dispose(),
  };
}

async function run(client: ReturnType<typeof wsClientWith>, query: string): Promise<{ data?: any; errors?: { message: string; extensions?: { code?: string } }[] }> {
  return new Promise((resolve, reject) => {
    let result: any;
    client.subscribe({ query }, { next: (value) => (result = value), error: reject, complete: () => resolve(result) });
  });
}

describe("long-lived connections follow their principal, across instances", () => {
  let a: TestGateway;
  let b: TestGateway;
  let merchant: TestMerchant;
  let admin: { access_token: string };

  withGateways({ redis: true, env: { RATE_LIMIT_ENABLED: "false" } }, async (started) => {
    [a, b] = started.gateways as [TestGateway, TestGateway];
    merchant = await a.createMerchant("Sockets");
    admin = await signIn(b, await b.createUser(merchant.id, "owner"));
  });

  const onB = (query: string, variables?: Record<string, unknown>) => bearerClient(b.url, admin.access_token).post("/graphql", { query, variables });
  const member = async (role: Role) => {
    const user = await a.createUser(merchant.id, role);
    return { ...user, session: await signIn(a, user) };
  };

  it("disableUser on B closes the user's socket (4403) and ends its SSE stream on A; its token is refused everywhere", async () => {
    const user = await member("developer");
    const socket = await openSocket(a, { Authorization: `Bearer ${user.session.access_token}` });
    const sse = await sseSubscribe(a.url, { authorization: `Bearer ${user.session.access_token}` }, Everything);
    await sse.ready();
    // The check below could fail: both are open and working before the change.
    expect(socket.closed).toEqual([]);
    expect(sse.ended()).toBe(false);
    const disabled = await onB("mutation($id: Int!) { disableUser(id: $id) { __typename } }", { id: user.id });
    expect(disabled.body.data.disableUser.__typename).toBe("User");
    await socket.closedWith(4403);
    await waitUntil(() => sse.ended(), "the SSE stream to end", CLOSE_WITHIN_MS);
    for (const gw of [a, b]) expect((await bearerClient(gw.url, user.session.access_token).get("/v1/status")).status).toBe(401);
    socket.dispose();
    await sse.close();
  });

  it("changeUserRole on B closes the socket on A; a new socket runs as the new role at once", async () => {
    const user = await member("owner");
    const socket = await openSocket(a, { Authorization: `Bearer ${user.session.access_token}` });
    expect((await run(socket.client, "mutation { createApiKey { __typename } }")).data?.createApiKey.__typename).toBe("CreatedApiKey");
    const changed = await onB("mutation($id: Int!) { changeUserRole(input: { id: $id, role: viewer }) { __typename } }", { id: user.id });
    expect(changed.body.data.changeUserRole.__typename).toBe("User");
    await socket.closedWith(4403);
    // The same (unexpired) token, on a new socket: a viewer now.
    const again = wsClientWith(a.url, { Authorization: `Bearer ${user.session.access_token}` });
    const refused = await run(again, "mutation { createApiKey { __typename } }");
    expect(refused.errors?.[0]?.extensions?.code).toBe("forbidden");
    expect((await run(again, "{ viewer { name } }")).data?.viewer.name).toBe("Sockets");
    again.dispose();
    socket.dispose();
  });

  it("changePassword on B closes the user's own socket on A", async () => {
    const user = await member("viewer");
    const socket = await openSocket(a, { Authorization: `Bearer ${user.session.access_token}` });
    const changed = await bearerClient(b.url, user.session.access_token).post("/graphql", {
      query: "mutation($input: ChangePasswordInput!) { changePassword(input: $input) { __typename } }",
      variables: { input: { currentPassword: user.password, newPassword: "a-brand-new-password" } },
    });
    expect(changed.body.data.changePassword.__typename).toBe("User");
    await socket.closedWith(4403);
    socket.dispose();
  });

  it("revokeApiKey on B closes the key's socket on A, and the key's SSE stream", async () => {
    const created = await onB("mutation { createApiKey(role: developer) { ... on CreatedApiKey { secret apiKey { prefix role } } } }");
    const { secret, apiKey } = created.body.data.createApiKey;
    expect(apiKey.role).toBe("developer");
    const socket = await openSocket(a, { "X-API-Key": secret });
    const sse = await sseSubscribe(a.url, secret, Everything);
    await sse.ready();
    const revoked = await onB("mutation($p: String!) { revokeApiKey(prefix: $p) { __typename } }", { p: apiKey.prefix });
    expect(revoked.body.data.revokeApiKey.__typename).toBe("ApiKey");
    await socket.closedWith(4403);
    await waitUntil(() => sse.ended(), "the key's SSE stream to end", CLOSE_WITHIN_MS);
    socket.dispose();
    await sse.close();
  });
});

describe("every operation on a socket checks the principal, even when no change was announced", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;

  beforeAll(async () => {
    // No state kept between requests (0 ms), so a change written straight to the database is seen by the next operation.
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", API_KEY_CACHE_TTL_MS: "0", ACCESS_TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS) } });
    merchant = await gw.createMerchant("Per operation");
  });
  afterAll(() => gw?.close());

  it("a user disabled behind the gateway's back: the next operation closes the socket (4403) instead of running", async () => {
    const user = await gw.createUser(merchant.id, "owner");
    const session = await signIn(gw, user);
    // A subscription keeps the (lazy) socket open between the operations.
    const socket = await openSocket(gw, { Authorization: `Bearer ${session.access_token}` });
    expect((await run(socket.client, "{ viewer { name } }")).data?.viewer.name).toBe("Per operation");
    await gw.gateway.db.prisma.user.update({ where: { id: user.id }, data: { disabledAt: new Date() } });
    const keys = await gw.gateway.db.prisma.apiKey.count({ where: { merchantId: merchant.id } });
    await run(socket.client, "mutation { createApiKey { __typename } }").catch(() => undefined);
    await socket.closedWith(4403);
    expect(await gw.gateway.db.prisma.apiKey.count({ where: { merchantId: merchant.id } })).toBe(keys);
    socket.dispose();
  });

  it("an access token's expiry closes the socket with 4401; a fresh token sent in a ping keeps it open past it", async () => {
    const user = await gw.createUser(merchant.id, "viewer");
    const expiring = await signIn(gw, user);
    const first = await openSocket(gw, { Authorization: `Bearer ${expiring.access_token}` });
    await first.closedWith(4401);
    first.dispose();

    // Refreshed before expiry, through graphql-ws's ping (a raw socket, to send the ping with a payload).
    const { default: WebSocket } = await import("ws");
    let session = await signIn(gw, user);
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
    const messages: any[] = [];
    let closedCode: number | undefined;
    ws.on("message", (raw) => messages.push(JSON.parse(String(raw))));
    ws.on("close", (code) => (closedCode = code));
    await new Promise((resolve) => ws.once("open", resolve));
    ws.send(JSON.stringify({ type: "connection_init", payload: { Authorization: `Bearer ${session.access_token}` } }));
    await waitUntil(() => messages.some((m) => m.type === "connection_ack"), "connection_ack");
    const startedAt = Date.now();
    // Refreshes, each before the token in use expires: the socket lives past the first token's expiry.
    while (Date.now() - startedAt <= TOKEN_TTL_SECONDS * 1000 + 1000) {
      await new Promise((resolve) => setTimeout(resolve, REFRESH_EVERY_MS));
      session = await refresh(gw, session.refresh_token);
      ws.send(JSON.stringify({ type: "ping", payload: { Authorization: `Bearer ${session.access_token}` } }));
    }
    expect(closedCode).toBeUndefined();
    ws.send(JSON.stringify({ id: "1", type: "subscribe", payload: { query: "{ viewer { name } }" } }));
    await waitUntil(() => messages.some((m) => m.id === "1" && m.type === "next"), "the query's answer");
    expect(messages.find((m) => m.id === "1" && m.type === "next").payload.data.viewer.name).toBe("Per operation");
    // Another user's token is no refresh: the socket closes.
    const other = await signIn(gw, await gw.createUser(merchant.id, "viewer"));
    ws.send(JSON.stringify({ type: "ping", payload: { Authorization: `Bearer ${other.access_token}` } }));
    await waitUntil(() => closedCode !== undefined, "the socket to close");
    expect(closedCode).toBe(4403);
  });
});

async function refresh(gw: TestGateway, refreshToken: string) {
  const res = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: refreshToken });
  expect(res.status, res.text).toBe(200);
  return res.body.data as { access_token: string; refresh_token: string };
}
