import { randomBytes } from "node:crypto";
import { parse } from "graphql";
import { decodeJwt, jwtVerify, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { collect, sseSubscribe, wsClientWith, type ClosedSocket } from "../support/subscriptions.ts";
import { expectNothingMoreWithin } from "../support/wait.ts";

/**
 * Users, sign-in and bearer tokens (issue 11): login, refresh rotation and reuse detection, logout,
 * failed-login limits, roles, and isolation of merchants and modes for signed-in users. Tokens are
 * checked with jose, as a client or another service would, not with the gateway's own code.
 */
const JWT_SECRET = randomBytes(32).toString("hex");
const key = new TextEncoder().encode(JWT_SECRET);
const CARD = { card_number: "4084084084084081", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 1, cvc: "123" };

interface Session {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: string;
  mode: "test" | "live";
  user: { id: number; email: string; role: string; merchant_id: number };
}

/** GraphQL over HTTP as a signed-in user. */
const gql = (url: string, token: string) => ({
  async run(query: string, variables?: Record<string, unknown>) {
    parse(query); // a typo in a test's document fails here, not as a confusing assertion
    return bearerClient(url, token).post("/graphql", { query, variables });
  },
});

async function login(url: string, email: string, password: string, options?: "test" | "live" | { mode?: "test" | "live"; merchant_id?: number }) {
  const extra = typeof options === "string" ? { mode: options } : (options ?? {});
  return apiClient(url).post("/v1/auth/login", { email, password, ...extra });
}

async function signIn(url: string, credentials: { email: string; password: string }, mode?: "test" | "live"): Promise<Session> {
  const res = await login(url, credentials.email, credentials.password, mode);
  expect(res.status, res.text).toBe(200);
  return res.body.data as Session;
}

describe("sign-in and tokens", () => {
  let gw: TestGateway;
  let acme: TestMerchant;
  let owner: { id: number; email: string; password: string };
  const logLines: string[] = [];

  beforeAll(async () => {
    gw = await startTestGateway({
      // The production scrypt cost here (the other gateways of the suite use a cheap one): the timing test needs it.
      env: { JWT_SECRET, RATE_LIMIT_ENABLED: "false", PASSWORD_HASH_COST: "15" },
      logger: createLogger("info", { write: (line) => void logLines.push(line) }),
    });
    acme = await gw.createMerchant("Acme");
    owner = await gw.createUser(acme.id, "owner");
  });
  afterAll(() => gw?.close());

  it("login answers the documented shape with a 15-minute JWT that jose verifies with the gateway's key", async () => {
    const res = await login(gw.url, owner.email.toUpperCase(), owner.password);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toEqual({
      status: "success",
      data: {
        access_token: expect.any(String),
        token_type: "Bearer",
        expires_in: 900,
        refresh_token: expect.stringMatching(/^rt_[A-Za-z0-9_-]{43}$/),
        user: { id: owner.id, email: owner.email, role: "owner", merchant_id: acme.id },
        mode: "test",
      },
    });
    const { payload, protectedHeader } = await jwtVerify(res.body.data.access_token, key, { issuer: "payment-gateway", audience: "payment-gateway:api" });
    expect(protectedHeader.alg).toBe("HS256");
    expect(payload).toMatchObject({ sub: String(owner.id), mid: acme.id, mode: "test", role: "owner" });
    expect(payload.exp! - payload.iat!).toBe(900);
  });

  it("the token works on /v1 REST, GraphQL over HTTP, SSE and graphql-ws; not on /api, which keeps X-API-Key", async () => {
    const session = await signIn(gw.url, owner, "test");
    const api = bearerClient(gw.url, session.access_token);
    const status = await api.get("/v1/status");
    expect(status.status, status.text).toBe(200);
    expect(status.body.data).toMatchObject({ merchant: { id: acme.id, name: "Acme" }, mode: "test" });

    const viewer = await gql(gw.url, session.access_token).run("{ viewer { name mode } currentUser { databaseId email role } }");
    expect(viewer.body).toEqual({ data: { viewer: { name: "Acme", mode: "test" }, currentUser: { databaseId: owner.id, email: owner.email, role: "owner" } } });

    const legacy = await api.get("/api/transactions/list");
    expect(legacy.status).toBe(401);
    // The documented /api routes take API keys only, and say where: a bearer token there is taken for a misplaced key.
    expect(legacy.body).toEqual({ status: "error", message: expect.stringContaining("X-API-Key header, not Authorization: Bearer"), code: "invalid_api_key" });

    // The same subscription over SSE and graphql-ws, authenticated by the token.
    await apiClient(gw.url, acme.testKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    const subscription = parse("subscription { transactionEvents(ready: true) { type transaction { reference } } }") as never;
    const sse = await sseSubscribe(gw.url, { authorization: `Bearer ${session.access_token}` }, subscription);
    expect(sse.status).toBe(200);
    const ws = wsClientWith(gw.url, { Authorization: `Bearer ${session.access_token}` });
    const events = collect(ws, subscription);
    await Promise.all([sse.ready(), events.ready()]);
    const init = await apiClient(gw.url, acme.testKey).post("/api/transactions/initialize", { amount: 1500, email: "payer@example.com" });
    await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, CARD);
    const expected = ["transaction.created", "transaction.completed"].map((type) => ({ type, transaction: { reference: init.body.reference } }));
    await events.waitFor(2);
    expect(events.results.map((r) => (r.data as any).transactionEvents)).toEqual(expected);
    await sse.waitFor(() => sse.events.filter((e) => e.data?.data).length >= 2);
    expect(sse.events.filter((e) => e.data?.data).map((e) => e.data.data.transactionEvents)).toEqual(expected);
    await sse.close();
    await ws.dispose();
  });

  it("a graphql-ws connection_init with a bad token is closed with 4403", async () => {
    const session = await signIn(gw.url, owner);
    const closed: ClosedSocket[] = [];
    const ws = wsClientWith(gw.url, { Authorization: `Bearer ${session.access_token.slice(0, -2)}xx` }, (event) => closed.push(event));
    const sub = collect(ws, parse("subscription { transactionEvents { type } }") as never);
    await sub.done().catch(() => undefined);
    expect(closed[0]?.code).toBe(4403);
    await ws.dispose();
  });

  describe("refused tokens: 401 invalid_token on REST and GraphQL", () => {
    const refusedWith = async (token: string) => {
      const rest = await bearerClient(gw.url, token).get("/v1/status");
      expect(rest.status).toBe(401);
      expect(rest.body).toEqual({ status: "error", code: "invalid_token", message: "The access or refresh token is invalid or has expired" });
      const graph = await gql(gw.url, token).run("{ viewer { name } }");
      expect(graph.status).toBe(401);
      expect(graph.body.code).toBe("invalid_token");
    };
    const claims = () => ({ mid: acme.id, mode: "test", role: "owner" });
    const signed = (secret: Uint8Array, exp: number | string = "15m") =>
      new SignJWT(claims()).setProtectedHeader({ alg: "HS256" }).setSubject(String(owner.id)).setIssuer("payment-gateway").setAudience("payment-gateway:api").setIssuedAt().setExpirationTime(exp).sign(secret);

    it("a token signed the same way is accepted (so the refusals below are about what they change)", async () => {
      const res = await bearerClient(gw.url, await signed(key)).get("/v1/status");
      expect(res.status).toBe(200);
    });

    it("expired", async () => {
      await refusedWith(await signed(key, Math.floor(Date.now() / 1000) - 5));
    });

    it("tampered with: a viewer's token edited to say owner", async () => {
      const viewer = await gw.createUser(acme.id, "viewer");
      const token = (await signIn(gw.url, viewer)).access_token;
      const [header, payload, signature] = token.split(".");
      const edited = Buffer.from(JSON.stringify({ ...decodeJwt(token), role: "owner" })).toString("base64url");
      expect(edited).not.toBe(payload);
      await refusedWith(`${header}.${edited}.${signature}`);
    });

    it("signed with another key, or unsigned (alg none)", async () => {
      await refusedWith(await signed(randomBytes(32)));
      const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${Buffer.from(JSON.stringify({ ...claims(), sub: String(owner.id), iss: "payment-gateway", aud: "payment-gateway:api", exp: Math.floor(Date.now() / 1000) + 600 })).toString("base64url")}.`;
      await refusedWith(none);
    });

    it("not a JWT at all, or absurdly long", async () => {
      await refusedWith("not-a-token");
      await refusedWith("a".repeat(5000));
    });
  });

  it("wrong e-mail and wrong password are the same 401, after the same work", async () => {
    const timed = async (email: string, password: string) => {
      const started = performance.now();
      const res = await login(gw.url, email, password);
      return { res, ms: performance.now() - started };
    };
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < 5; i++) {
      const someone = await gw.createUser(acme.id, "viewer");
      const a = await timed(`nobody-${i}-${randomBytes(4).toString("hex")}@users.test`, "whatever-password");
      const b = await timed(someone.email, "not-the-password");
      for (const { res } of [a, b]) {
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ status: "error", message: "Invalid e-mail or password", code: "invalid_credentials" });
      }
      unknown.push(a.ms);
      wrong.push(b.ms);
    }
    const median = (xs: number[]) => xs.sort((x, y) => x - y)[2]!;
    // Both pay for one scrypt hash (tens of milliseconds); a missing dummy hash would make unknown e-mails ~1 ms,
    // a ratio near 0.01. The bounds leave room for other test files sharing the CPU.
    expect(median(unknown)).toBeGreaterThan(15);
    expect(median(unknown) / median(wrong)).toBeGreaterThan(0.33);
    expect(median(unknown) / median(wrong)).toBeLessThan(3);
  });

  it("refresh rotates: a new pair, the old refresh token dead; reusing it revokes the whole session", async () => {
    const first = await signIn(gw.url, owner);
    const refreshed = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: first.refresh_token });
    expect(refreshed.status, refreshed.text).toBe(200);
    const second = refreshed.body.data as Session;
    expect(second).toMatchObject({ token_type: "Bearer", expires_in: 900, mode: "test", user: { id: owner.id } });
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).not.toBe(first.access_token);
    expect((await bearerClient(gw.url, second.access_token).get("/v1/status")).status).toBe(200);

    // The first token again: treated as stolen. It fails, and so does the one issued from it.
    const reuse = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: first.refresh_token });
    expect(reuse.status).toBe(401);
    expect(reuse.body.code).toBe("invalid_token");
    const afterTheft = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: second.refresh_token });
    expect(afterTheft.status).toBe(401);
    // Another session of the same user is untouched.
    const other = await signIn(gw.url, owner);
    expect((await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: other.refresh_token })).status).toBe(200);
  });

  it("ten concurrent refreshes with one token: exactly one succeeds (and the race counts as reuse)", async () => {
    const session = await signIn(gw.url, owner);
    const results = await Promise.all(Array.from({ length: 10 }, () => apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: session.refresh_token })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 401)).toHaveLength(9);
    const winner = results.find((r) => r.status === 200)!.body.data as Session;
    expect((await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: winner.refresh_token })).status).toBe(401);
  });

  it("refresh can switch the session's mode; the mode sticks to later refreshes", async () => {
    const session = await signIn(gw.url, owner);
    const live = (await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: session.refresh_token, mode: "live" })).body.data as Session;
    expect(live.mode).toBe("live");
    expect(decodeJwt(live.access_token).mode).toBe("live");
    expect((await gql(gw.url, live.access_token).run("{ viewer { mode } }")).body.data.viewer.mode).toBe("live");
    const again = (await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: live.refresh_token })).body.data as Session;
    expect(again.mode).toBe("live");
  });

  it("logout ends the session: its refresh tokens stop working", async () => {
    const session = await signIn(gw.url, owner);
    const out = await apiClient(gw.url).post("/v1/auth/logout", { refresh_token: session.refresh_token });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ status: "success", message: "Signed out" });
    expect((await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: session.refresh_token })).status).toBe(401);
    expect((await apiClient(gw.url).post("/v1/auth/logout", { refresh_token: "rt_unknown" })).status).toBe(401);
  });

  it("bad input is a 400 naming the field, a non-JSON body a 415, never a 500", async () => {
    const cases: [unknown, string][] = [
      [{}, "email"],
      [{ email: owner.email }, "password"],
      [{ email: owner.email, password: "x", mode: "sandbox" }, "mode"],
      [{ email: `a\u0000@b.test`, password: "whatever-password" }, "email"],
      [{ email: owner.email, password: "p".repeat(201) }, "password"],
      [{ email: 42, password: [] }, "email"],
    ];
    for (const [body, field] of cases) {
      const res = await apiClient(gw.url).post("/v1/auth/login", body);
      expect(res.status, res.text).toBe(400);
      expect(res.body).toMatchObject({ status: "error", code: "validation_failed" });
      expect(res.body.message).toContain(field);
    }
    const refresh = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: "t".repeat(300) });
    expect(refresh.status).toBe(400);
    const text = await apiClient(gw.url).raw("/v1/auth/login", { method: "POST", headers: { "content-type": "text/plain" }, body: "email=x" });
    expect(text.status).toBe(415);
    expect(text.body.code).toBe("unsupported_media_type");
  });

  it("passwords, password hashes and refresh tokens never appear in responses or logs", async () => {
    const session = await signIn(gw.url, owner);
    const users = await gql(gw.url, session.access_token).run("{ users { email role } }");
    expect(users.body.errors).toBeUndefined();
    const everything = JSON.stringify(users.body) + logLines.join("\n");
    expect(everything).not.toContain(owner.password);
    expect(everything).not.toContain("scrypt$");
    expect(logLines.join("\n")).not.toContain(session.refresh_token);
    expect(logLines.join("\n")).not.toContain(session.access_token);
    const stored = await gw.gateway.db.prisma.user.findUniqueOrThrow({ where: { id: owner.id } });
    expect(stored.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(stored.passwordHash).not.toContain(owner.password);
  });
});

describe("failed sign-ins are limited: 5 per e-mail, 20 per IP, in 15 minutes", () => {
  let gw: TestGateway;
  let acme: TestMerchant;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    acme = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  it("the sixth attempt on one e-mail is a 429 with Retry-After, even with the right password; other e-mails still sign in", async () => {
    const victim = await gw.createUser(acme.id, "owner");
    for (let i = 0; i < 5; i++) expect((await login(gw.url, victim.email, `guess-${i}-xxxxx`)).status).toBe(401);
    const blocked = await login(gw.url, victim.email, victim.password);
    expect(blocked.status).toBe(429);
    expect(blocked.body).toMatchObject({ status: "error", code: "rate_limited" });
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(800);
    const someoneElse = await gw.createUser(acme.id, "viewer");
    expect((await login(gw.url, someoneElse.email, someoneElse.password)).status).toBe(200);
  });

  it("a success neither counts as a failure nor gives failures back", async () => {
    // Its own gateway: every attempt spends the IP's budget (successes too), so this one is large enough for the test.
    const own = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", LOGIN_FAILURES_PER_IP: "100" } });
    onTestFinished(() => own.close());
    const gw = own;
    const user = await gw.createUser((await gw.createMerchant()).id, "viewer");
    // Ten correct sign-ins at once lock nothing (successes are not failures).
    const together = await Promise.all(Array.from({ length: 10 }, () => login(gw.url, user.email, user.password)));
    expect(together.map((r) => r.status)).toEqual(Array(10).fill(200));
    for (let i = 0; i < 4; i++) expect((await login(gw.url, user.email, "wrong-password-x")).status).toBe(401);
    expect((await login(gw.url, user.email, user.password)).status).toBe(200);
    // The fifth failure after a success still counts: a success (anyone's) never resets the e-mail's budget.
    expect((await login(gw.url, user.email, "wrong-password-x")).status).toBe(401);
    const locked = await login(gw.url, user.email, user.password);
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("another merchant's user with the same e-mail is no password oracle: without merchant_id the answer never depends on the password", async () => {
    const own = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", LOGIN_FAILURES_PER_IP: "100" } });
    onTestFinished(() => own.close());
    const a = await own.createMerchant("Victim");
    const b = await own.createMerchant("Prober");
    const victim = await own.createUser(a.id, "owner");
    // B adds a user with A's owner's e-mail, then sets its password to each guess (here: one of them is right).
    const guesses = ["guess-one-xxxxx", victim.password, "guess-three-xxx"];
    const answers = [];
    for (const guess of guesses) {
      await own.gateway.db.prisma.user.deleteMany({ where: { merchantId: b.id, email: victim.email } });
      await own.gateway.services.users.createUser({ merchantId: b.id, email: victim.email, password: guess, role: "owner" });
      const res = await login(own.url, victim.email, guess);
      answers.push([res.status, res.body]);
    }
    // The same answer for every guess, the right one included: asked for the merchant before any password is checked.
    expect(answers[0]).toEqual([400, { status: "error", code: "validation_failed", message: expect.stringContaining("merchant_id"), errors: [{ field: "merchant_id", message: expect.any(String) }] }]);
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
    // Naming a merchant, a guess is checked against that merchant's user only; failures count per e-mail whoever
    // else signs in (B's own user signing in between gives nothing back), and the budget ends in a 429.
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await login(own.url, victim.email, `wrong-${i}-xxxxxx`, { merchant_id: a.id })).status);
      expect((await login(own.url, victim.email, guesses[2]!, { merchant_id: b.id })).status).toBe(statuses.length < 5 ? 200 : 429);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect((await login(own.url, victim.email, victim.password, { merchant_id: a.id })).status).toBe(429);
  });

  it("the IP is blocked after 20 failures in all, whatever the e-mails", async () => {
    const fresh = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    try {
      const merchant = await fresh.createMerchant();
      const user = await fresh.createUser(merchant.id, "owner");
      const attempts = await Promise.all(Array.from({ length: 20 }, (_, i) => login(fresh.url, `spray-${i}@users.test`, "Winter2026!")));
      expect(attempts.map((a) => a.status)).toEqual(Array(20).fill(401));
      const blocked = await login(fresh.url, user.email, user.password);
      expect(blocked.status).toBe(429);
      expect(blocked.headers.get("retry-after")).toBeTruthy();
    } finally {
      await fresh.close();
    }
  });
});

describe("roles", () => {
  let gw: TestGateway;
  let acme: TestMerchant;
  const sessions: Record<string, Session> = {};

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    acme = await gw.createMerchant();
    await apiClient(gw.url, acme.testKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox", config: {} });
    for (const role of ["owner", "developer", "viewer"] as const) {
      const user = await gw.createUser(acme.id, role);
      sessions[`${role}:test`] = await signIn(gw.url, user, "test");
      sessions[`${role}:live`] = await signIn(gw.url, user, "live");
    }
  });
  afterAll(() => gw?.close());

  const createHook = (session: Session) => bearerClient(gw.url, session.access_token).post("/v1/webhooks", { url: "https://93.184.216.34/hooks" });
  const createKey = (session: Session) => gql(gw.url, session.access_token).run("mutation { createApiKey { __typename ... on CreatedApiKey { secret apiKey { mode prefix } } } }");

  it("a viewer reads but every write is refused: 403 envelope on REST, forbidden on GraphQL", async () => {
    const viewer = sessions["viewer:test"]!;
    expect((await bearerClient(gw.url, viewer.access_token).get("/v1/webhooks")).status).toBe(200);
    expect((await gql(gw.url, viewer.access_token).run("{ transactions(first: 5) { totalCount } apiKeys { prefix } }")).body.errors).toBeUndefined();
    const rest = await createHook(viewer);
    expect(rest.status).toBe(403);
    expect(rest.body).toEqual({ status: "error", code: "forbidden", message: "Your role (viewer) can only read; ask an owner for the developer or owner role" });
    const stk = await bearerClient(gw.url, viewer.access_token).post("/v1/collections/stk", { amount: 100, phone_number: "254708374149" });
    expect(stk.status).toBe(403);
    const graph = await createKey(viewer);
    expect(graph.body.data).toBeNull();
    expect(graph.body.errors[0].extensions.code).toBe("forbidden");
    expect(await gw.gateway.db.prisma.webhookEndpoint.count({ where: { merchantId: acme.id } })).toBe(0);
  });

  it("a developer writes in test mode only, and never pays out or manages users", async () => {
    const test = sessions["developer:test"]!;
    const live = sessions["developer:live"]!;
    expect((await createHook(test)).status).toBe(201);
    const key = await createKey(test);
    expect(key.body.data.createApiKey).toMatchObject({ __typename: "CreatedApiKey", apiKey: { mode: "test" }, secret: expect.stringMatching(/^sk_test_/) });
    const liveHook = await createHook(live);
    expect(liveHook.status).toBe(403);
    expect(liveHook.body.message).toBe("Your role (developer) can change test-mode data only; ask an owner");
    expect((await createKey(live)).body.errors[0].extensions.code).toBe("forbidden");
    const payout = await bearerClient(gw.url, test.access_token).post("/v1/payouts", { amount: 10000, phone_number: "254708374149" });
    expect(payout.status).toBe(403);
    expect(payout.body.message).toBe("Your role (developer) cannot do this; only an owner can");
    expect((await gql(gw.url, test.access_token).run("{ users { email } }")).body.errors[0].extensions.code).toBe("forbidden");
    const addUser = await gql(gw.url, test.access_token).run(`mutation { createUser(input: { email: "x@users.test", password: "long-enough-password", role: owner }) { __typename } }`);
    expect(addUser.body.errors[0].extensions.code).toBe("forbidden");
  });

  it("an owner does everything: live keys, payouts, users (and a new user can sign in)", async () => {
    const live = sessions["owner:live"]!;
    const test = sessions["owner:test"]!;
    expect((await createKey(live)).body.data.createApiKey).toMatchObject({ apiKey: { mode: "live" }, secret: expect.stringMatching(/^sk_live_/) });
    expect((await createHook(live)).status).toBe(201);
    const payout = await bearerClient(gw.url, test.access_token).post("/v1/payouts", { amount: 10000, phone_number: "254708374149" });
    expect(payout.status, payout.text).toBe(201);
    const email = `new-${randomBytes(4).toString("hex")}@users.test`;
    const created = await gql(gw.url, test.access_token).run(
      `mutation($email: String!) { createUser(input: { email: $email, password: "long-enough-password", role: developer }) { __typename ... on User { email role } ... on Error { code message } } }`,
      { email },
    );
    expect(created.body.data.createUser).toEqual({ __typename: "User", email, role: "developer" });
    expect((await login(gw.url, email, "long-enough-password")).body.data.user.role).toBe("developer");
    const duplicate = await gql(gw.url, test.access_token).run(
      `mutation($email: String!) { createUser(input: { email: $email, password: "long-enough-password", role: viewer }) { __typename ... on Error { code } } }`,
      { email: email.toUpperCase() },
    );
    expect(duplicate.body.data.createUser).toEqual({ __typename: "ConflictError", code: "conflict" });
    const short = await gql(gw.url, test.access_token).run(`mutation { createUser(input: { email: "short@users.test", password: "short", role: viewer }) { __typename ... on ValidationError { field } } }`);
    expect(short.body.data.createUser).toEqual({ __typename: "ValidationError", field: "password" });
    const users = await gql(gw.url, test.access_token).run("{ users { email role } }");
    expect(users.body.data.users.map((u: { email: string }) => u.email)).toContain(email);
  });

  it("a revoked key stops working at once; a key of another mode cannot be revoked from this one", async () => {
    const owner = sessions["owner:test"]!;
    const created = (await createKey(owner)).body.data.createApiKey;
    expect((await apiClient(gw.url, created.secret).get("/v1/status")).status).toBe(200);
    const liveKey = (await createKey(sessions["owner:live"]!)).body.data.createApiKey;
    const crossMode = await gql(gw.url, owner.access_token).run(`mutation($p: String!) { revokeApiKey(prefix: $p) { __typename ... on Error { code } } }`, { p: liveKey.apiKey.prefix });
    expect(crossMode.body.data.revokeApiKey).toEqual({ __typename: "NotFoundError", code: "not_found" });
    const revoked = await gql(gw.url, owner.access_token).run(`mutation($p: String!) { revokeApiKey(prefix: $p) { __typename ... on ApiKey { prefix revokedAt } } }`, { p: created.apiKey.prefix });
    expect(revoked.body.data.revokeApiKey).toMatchObject({ __typename: "ApiKey", prefix: created.apiKey.prefix, revokedAt: expect.any(String) });
    expect((await apiClient(gw.url, created.secret).get("/v1/status")).status).toBe(401);
    const listed = await gql(gw.url, owner.access_token).run("{ apiKeys { prefix mode } }");
    expect(listed.body.data.apiKeys.every((k: { mode: string }) => k.mode === "test")).toBe(true);
    expect(JSON.stringify(listed.body)).not.toContain(created.secret);
  });
});

describe("isolation with bearer tokens: merchants and modes", () => {
  let gw: TestGateway;
  let a: TestMerchant;
  let b: TestMerchant;
  let bTest: Session;
  let bLive: Session;
  let aLive: Session;
  let aTest: Session;
  const own: Record<string, string | number> = {};

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true", SANDBOX_STK_DELAY_MS: "50" } });
    a = await gw.createMerchant("A");
    b = await gw.createMerchant("B");
    const aOwner = await gw.createUser(a.id, "owner");
    const bOwner = await gw.createUser(b.id, "owner");
    aTest = await signIn(gw.url, aOwner, "test");
    aLive = await signIn(gw.url, aOwner, "live");
    bTest = await signIn(gw.url, bOwner, "test");
    bLive = await signIn(gw.url, bOwner, "live");
    // A's test-mode objects of every kind, made with A's token.
    const api = bearerClient(gw.url, aTest.access_token);
    const channel = await gql(gw.url, aTest.access_token).run(`mutation { createPaymentChannel(input: { name: "Sandbox", provider: "sandbox", config: {} }) { ... on PaymentChannel { id databaseId } } }`);
    own.channelId = channel.body.data.createPaymentChannel.databaseId;
    own.channelNode = channel.body.data.createPaymentChannel.id;
    const init = await apiClient(gw.url, a.testKey).post("/api/transactions/initialize", { amount: 5000, email: "isolated@payers.test" });
    own.reference = init.body.reference;
    await apiClient(gw.url).post(`/payment/checkout/${own.reference}/pay`, CARD);
    const stk = await api.post("/v1/collections/stk", { amount: 100, phone_number: "254708374149" });
    expect(stk.status, stk.text).toBe(201);
    own.stkReference = stk.body.data.reference;
    const payout = await api.post("/v1/payouts", { amount: 10000, phone_number: "254708374149" });
    expect(payout.status, payout.text).toBe(201);
    own.payoutRef = payout.body.data.reference;
    own.payoutId = payout.body.data.id;
    const hook = await api.post("/v1/webhooks", { url: "http://127.0.0.1:9/hooks" });
    own.hookId = hook.body.data.id;
    const nodes = await gql(gw.url, aTest.access_token).run(
      `query($r: String!) { transaction(reference: $r) { ... on Transaction { id customer { id } events { id } } } currentUser { id } apiKeys { prefix } payouts(first: 1) { edges { node { id } } } }`,
      { r: own.reference },
    );
    expect(nodes.body.errors, nodes.text).toBeUndefined();
    const data = nodes.body.data;
    own.transactionNode = data.transaction.id;
    own.customerNode = data.transaction.customer.id;
    own.eventId = data.transaction.events[0].id;
    own.userNode = data.currentUser.id;
    own.payoutNode = data.payouts.edges[0].node.id;
    own.keyPrefix = data.apiKeys[0].prefix;
  });
  afterAll(() => gw?.close());

  it("A's own token sees all of it (so the checks below can fail)", async () => {
    const api = bearerClient(gw.url, aTest.access_token);
    expect((await api.get(`/v1/payouts/${own.payoutRef}`)).status).toBe(200);
    expect((await api.get("/v1/webhooks")).body.data).toHaveLength(1);
    const graph = await gql(gw.url, aTest.access_token).run(`query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, {
      ids: [own.transactionNode, own.customerNode, own.userNode, own.payoutNode, own.channelNode],
    });
    expect(graph.body.data.nodes.every((n: unknown) => n !== null)).toBe(true);
  });

  it("B's tokens, and A's live-mode token, find nothing of it on any /v1 route", async () => {
    for (const session of [bTest, bLive, aLive]) {
      const api = bearerClient(gw.url, session.access_token);
      for (const id of [own.payoutRef, own.payoutId]) {
        const payout = await api.get(`/v1/payouts/${id}`);
        expect(payout.status).toBe(404);
        expect(payout.body).toMatchObject({ status: "error", code: "not_found" });
      }
      expect((await api.get("/v1/webhooks")).body).toEqual({ status: "success", data: [] });
      const status = await api.get("/v1/status");
      expect(status.body.data.merchant.id).toBe(session.user.merchant_id);
      expect(status.body.data.mode).toBe(session.mode);
      // STK push on A's channel id: not found for anyone else.
      const stk = await api.post("/v1/collections/stk", { amount: 100, phone_number: "254708374149", payment_channel_id: own.channelId });
      expect(stk.status, stk.text).toBe(404);
    }
  });

  it("B's tokens, and A's live-mode token, find nothing of it in any GraphQL field", async () => {
    for (const session of [bTest, bLive, aLive]) {
      const graph = await gql(gw.url, session.access_token).run(
        `query($ids: [ID!]!, $ref: String!, $stk: String!, $po: String!, $event: ID!) {
          nodes(ids: $ids) { id }
          transaction(reference: $ref) { __typename }
          stkStatus(reference: $stk) { __typename }
          payout(reference: $po) { __typename }
          transactions(first: 50) { totalCount edges { node { reference } } }
          transactionsPage { __typename ... on TransactionPage { total } }
          payouts(first: 50) { totalCount }
          customers { __typename ... on CustomerPage { total } }
          paymentChannels { databaseId }
          webhookEndpoints { id }
          webhookDeliveries(eventId: $event) { id }
          apiKeys { prefix }
          users { email }
          currentUser { id }
          viewer { databaseId mode }
        }`,
        {
          ids: [own.transactionNode, own.customerNode, own.userNode, own.payoutNode, own.channelNode],
          ref: own.reference,
          stk: own.stkReference,
          po: own.payoutRef,
          event: own.eventId,
        },
      );
      expect(graph.body.errors, graph.text).toBeUndefined();
      const data = graph.body.data;
      // Users belong to the merchant, not to a mode: A's live-mode token still sees A's own user.
      const sameMerchant = session.user.merchant_id === a.id;
      expect(data.nodes).toEqual([null, null, sameMerchant ? { id: own.userNode } : null, null, null]);
      expect(data.transaction.__typename).toBe("NotFoundError");
      expect(data.stkStatus.__typename).toBe("NotFoundError");
      expect(data.payout.__typename).toBe("NotFoundError");
      expect(data.transactions.totalCount).toBe(0);
      expect(data.transactionsPage.total).toBe(0);
      expect(data.payouts.totalCount).toBe(0);
      expect(data.customers.total).toBe(0);
      expect(data.paymentChannels).toEqual([]);
      expect(data.webhookEndpoints).toEqual([]);
      expect(data.webhookDeliveries).toEqual([]);
      expect(data.apiKeys.map((k: { prefix: string }) => k.prefix)).not.toContain(own.keyPrefix);
      expect(data.viewer).toEqual({ databaseId: session.user.merchant_id, mode: session.mode });
      if (session.user.merchant_id !== a.id) expect(data.users.map((u: { email: string }) => u.email)).not.toContain(aTest.user.email);
      if (session.user.merchant_id !== a.id) expect(data.currentUser.id).not.toBe(own.userNode);
    }
  });

  it("B's token cannot change A's objects: not found, and nothing changed", async () => {
    const run = (query: string) => gql(gw.url, bTest.access_token).run(query);
    expect((await run(`mutation { deactivatePaymentChannel(id: ${own.channelId}) { __typename } }`)).body.data.deactivatePaymentChannel.__typename).toBe("NotFoundError");
    expect((await run(`mutation { deleteWebhookEndpoint(id: ${own.hookId}) { __typename } }`)).body.data.deleteWebhookEndpoint.__typename).toBe("NotFoundError");
    expect((await run(`mutation { revokeApiKey(prefix: "${own.keyPrefix}") { __typename } }`)).body.data.revokeApiKey.__typename).toBe("NotFoundError");
    expect((await run(`mutation { resendEvent(eventId: "${own.eventId}") { __typename } }`)).body.data.resendEvent.__typename).toBe("NotFoundError");
    const still = await gql(gw.url, aTest.access_token).run("{ paymentChannels { isActive } webhookEndpoints { id } apiKeys { prefix revokedAt } }");
    expect(still.body.data.paymentChannels).toEqual([{ isActive: true }]);
    expect(still.body.data.webhookEndpoints).toHaveLength(1);
    expect(still.body.data.apiKeys.find((k: { prefix: string }) => k.prefix === own.keyPrefix).revokedAt).toBeNull();
  });

  it("subscriptions over graphql-ws see only the token's merchant and mode", async () => {
    const clients = { aTest: aTest, aLive: aLive, bTest: bTest };
    const subs = Object.fromEntries(
      Object.entries(clients).map(([name, session]) => {
        const ws = wsClientWith(gw.url, { Authorization: `Bearer ${session.access_token}` });
        return [name, { ws, events: collect(ws, parse("subscription { transactionEvents(ready: true) { transaction { reference } } }") as never) }];
      }),
    );
    await Promise.all(Object.values(subs).map(({ events }) => events.ready()));
    const init = await apiClient(gw.url, a.testKey).post("/api/transactions/initialize", { amount: 700, email: "live-sub@payers.test" });
    await apiClient(gw.url).post(`/payment/checkout/${init.body.reference}/pay`, CARD);
    await subs.aTest!.events.waitFor(2);
    await expectNothingMoreWithin(300, () => Object.values(subs).map(({ events }) => events.results.length), "no event for another merchant or mode");
    expect(subs.aTest!.events.results.map((r) => (r.data as any).transactionEvents.transaction.reference)).toEqual([init.body.reference, init.body.reference]);
    expect(subs.aLive!.events.results).toEqual([]);
    expect(subs.bTest!.events.results).toEqual([]);
    for (const { ws } of Object.values(subs)) await ws.dispose();
  });
});

describe("bearer tokens and the rate limiter", () => {
  let gw: TestGateway;
  let acme: TestMerchant;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_PER_MINUTE: "40", RATE_LIMIT_IP_PER_MINUTE: "3" } });
    acme = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  it("a valid token spends its merchant's budget, never the IP's; bad tokens spend the IP's", async () => {
    const user = await gw.createUser(acme.id, "viewer");
    const session = await signIn(gw.url, user);
    // A dashboard loading many queries at once: far more than the IP budget of 3, all answered.
    const burst = await Promise.all(Array.from({ length: 15 }, () => bearerClient(gw.url, session.access_token).get("/v1/status")));
    expect(burst.map((r) => r.status)).toEqual(Array(15).fill(200));
    expect(burst.map((r) => r.headers.get("x-ratelimit-limit"))).toEqual(Array(15).fill("40"));
    // Its merchant's budget is shared with nobody else's: the merchant's API key has its own.
    expect((await apiClient(gw.url, acme.testKey).get("/v1/status")).headers.get("x-ratelimit-remaining")).toBe("39");
    // Bad tokens are guesses: the IP's budget of 3, then 429 — also for the valid token from that IP.
    for (let i = 0; i < 3; i++) expect((await bearerClient(gw.url, `${session.access_token}x`).get("/v1/status")).status).toBe(401);
    const blocked = await bearerClient(gw.url, session.access_token).get("/v1/status");
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get("retry-after")).toBeTruthy();
  });
});
