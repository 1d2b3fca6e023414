import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { apiClient, bearerClient, startTestGateway, type HttpResult, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * Issue 21, items 2 and 3: an Idempotency-Key belongs to the caller that sent it (API key or user), the
 * caller's authorization is checked before any replay, and what is stored for a replay holds no secret in
 * plaintext. Every secret any response showed is collected, then looked for in every column of every table,
 * in every log line (debug level) and in /metrics.
 */
const CREATE_KEY = "mutation { createApiKey { __typename ... on CreatedApiKey { secret apiKey { prefix } } ... on Error { code message } } }";
const ROTATE = "mutation($id: Int!) { rotateWebhookSecret(id: $id) { __typename ... on WebhookEndpointWithSecret { secret } ... on Error { code message } } }";
/** Whole API keys (not their 8-character visible prefixes, which are meant to be stored) and webhook secrets. */
const SECRET = /\b(?:sk_(?:test|live)_[A-Za-z0-9_-]{16,}|whsec_[A-Za-z0-9+/=_-]{16,})/g;

type Role = "owner" | "developer" | "viewer";
type Client = ReturnType<typeof apiClient>;

describe("Idempotency-Key: per caller, authorized before a replay, sealed at rest", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  const logLines: string[] = [];
  /** Every secret a response showed to a client. */
  const shown = new Set<string>();

  beforeAll(async () => {
    gw = await startTestGateway({
      env: { RATE_LIMIT_ENABLED: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true", SANDBOX_STK_DELAY_MS: "30" },
      logger: createLogger("debug", { write: (line) => void logLines.push(line) }),
    });
    merchant = await gw.createMerchant("Keyholders");
    shown.add(merchant.testKey).add(merchant.liveKey);
    // A sandbox default channel, for payouts.
    expect((await as(apiClient(gw.url, merchant.testKey)).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" })).status).toBe(201);
  });
  afterAll(() => gw?.close());

  /** A client whose every answer is searched for secrets. */
  function as(client: Client) {
    const seen = <T extends HttpResult>(result: T): T => {
      for (const secret of result.text.match(SECRET) ?? []) shown.add(secret);
      return result;
    };
    return {
      post: async (path: string, body: unknown, headers?: Record<string, string>) => seen(await client.post(path, body, headers)),
      gql: async (query: string, variables?: Record<string, unknown>, headers?: Record<string, string>) => seen(await client.post("/graphql", { query, variables }, headers)),
    };
  }

  async function signedIn(role: Role, mode: "test" | "live" = "test") {
    const user = await gw.createUser(merchant.id, role);
    return { ...user, client: as(bearerClient(gw.url, await accessToken(user, mode))) };
  }

  async function accessToken(user: { email: string; password: string }, mode: "test" | "live" = "test"): Promise<string> {
    const res = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password, mode });
    expect(res.status, res.text).toBe(200);
    return res.body.data.access_token as string;
  }

  const key = () => ({ "idempotency-key": `k-${randomUUID()}` });
  const replayed = (res: HttpResult) => res.headers.get("idempotent-replayed");
  const records = (idempotencyKey: string) => gw.gateway.db.prisma.idempotencyKey.findMany({ where: { key: idempotencyKey } });

  it("a viewer or developer sending an owner's key and body gets the 403 it gets without a key, never the owner's secret", async () => {
    const owner = await signedIn("owner");
    const viewer = await signedIn("viewer");
    const developer = await signedIn("developer");

    // createApiKey (GraphQL)
    const k1 = key();
    const created = await owner.client.gql(CREATE_KEY, undefined, k1);
    expect(created.body.data.createApiKey.secret).toMatch(/^sk_test_/);
    const viewerKey = await viewer.client.gql(CREATE_KEY, undefined, k1);
    expect(viewerKey.text).not.toContain(created.body.data.createApiKey.secret);
    expect(replayed(viewerKey)).toBeNull();
    expect(viewerKey.body.errors[0].extensions.code).toBe("forbidden");
    expect(viewerKey.text).toBe((await viewer.client.gql(CREATE_KEY)).text);

    // Webhook endpoint (REST)
    const k2 = key();
    const hookBody = { url: "http://127.0.0.1:9/hooks", events: ["transaction.completed"] };
    const hook = await owner.client.post("/v1/webhooks", hookBody, k2);
    expect(hook.status, hook.text).toBe(201);
    const hookSecret = hook.body.data.secret as string;
    expect(hookSecret).toMatch(/^whsec_/);
    const viewerHook = await viewer.client.post("/v1/webhooks", hookBody, k2);
    expect([viewerHook.status, replayed(viewerHook)]).toEqual([403, null]);
    expect(viewerHook.text).not.toContain(hookSecret);
    expect(viewerHook.body).toEqual((await viewer.client.post("/v1/webhooks", hookBody)).body);

    // rotateWebhookSecret (GraphQL)
    const endpointId = hook.body.data.id as number;
    const k3 = key();
    const rotated = await owner.client.gql(ROTATE, { id: endpointId }, k3);
    expect(rotated.body.data.rotateWebhookSecret.secret).toMatch(/^whsec_/);
    const viewerRotate = await viewer.client.gql(ROTATE, { id: endpointId }, k3);
    expect(replayed(viewerRotate)).toBeNull();
    expect(viewerRotate.body.errors[0].extensions.code).toBe("forbidden");
    expect(viewerRotate.text).not.toContain(rotated.body.data.rotateWebhookSecret.secret);

    // Payouts (REST, owners only): a developer is refused too.
    const k4 = key();
    const payoutBody = { amount: 10000, phone_number: "254708374149", reference: "IDEM-ROLE" };
    const payout = await owner.client.post("/v1/payouts", payoutBody, k4);
    expect(payout.status, payout.text).toBe(201);
    for (const refused of [viewer, developer]) {
      const res = await refused.client.post("/v1/payouts", payoutBody, k4);
      expect([res.status, res.body.code, replayed(res)]).toEqual([403, "forbidden", null]);
    }

    // Refusals are neither stored nor claimed: each key has the owner's record only.
    for (const k of [k1, k2, k3, k4]) {
      expect((await records(k["idempotency-key"])).map((r) => [r.principal, r.status])).toEqual([[`user:${owner.id}`, "completed"]]);
    }
    // And the owner's own retry is the replay, secret included (sealed, then opened).
    const ownerRetry = await owner.client.gql(CREATE_KEY, undefined, k1);
    expect([replayed(ownerRetry), ownerRetry.text]).toEqual(["true", created.text]);
  });

  it("another owner, and a developer, sending the same key and body run their own request instead of getting the first's answer", async () => {
    const owner = await signedIn("owner");
    const otherOwner = await signedIn("owner");
    const developer = await signedIn("developer");
    const k = key();
    const first = await owner.client.gql(CREATE_KEY, undefined, k);
    const second = await otherOwner.client.gql(CREATE_KEY, undefined, k);
    const third = await developer.client.gql(CREATE_KEY, undefined, k);
    for (const other of [second, third]) {
      expect(replayed(other)).toBeNull();
      expect(other.body.data.createApiKey.secret).toMatch(/^sk_test_/);
      expect(other.body.data.createApiKey.secret).not.toBe(first.body.data.createApiKey.secret);
    }
    expect((await records(k["idempotency-key"])).map((r) => r.principal).sort()).toHaveLength(3);
  });

  it("a user whose role was lowered to viewer gets the 403, not the replay of what they created as an owner", async () => {
    const owner = await signedIn("owner");
    const k = key();
    const first = await owner.client.gql(CREATE_KEY, undefined, k);
    expect(first.body.data.createApiKey.secret).toMatch(/^sk_test_/);
    const kHook = key();
    const hookBody = { url: "http://127.0.0.1:9/demoted", events: ["transaction.completed"] };
    const hook = await owner.client.post("/v1/webhooks", hookBody, kHook);
    expect(hook.status, hook.text).toBe(201);

    // Another owner lowers the role: it applies at once, to the token already issued too.
    const other = await signedIn("owner");
    const lowered = await other.client.gql("mutation($id: Int!) { changeUserRole(input: { id: $id, role: viewer }) { __typename } }", { id: owner.id });
    expect(lowered.body.data.changeUserRole.__typename).toBe("User");
    const demoted = owner.client;
    // The same caller (same user id), so only the authorization check stands between it and the replay.
    const retry = await demoted.gql(CREATE_KEY, undefined, k);
    expect(replayed(retry)).toBeNull();
    expect(retry.body.errors[0].extensions.code).toBe("forbidden");
    expect(retry.text).not.toContain(first.body.data.createApiKey.secret);
    const hookRetry = await demoted.post("/v1/webhooks", hookBody, kHook);
    expect([hookRetry.status, hookRetry.body.code, replayed(hookRetry)]).toEqual([403, "forbidden", null]);
    expect(hookRetry.text).not.toContain(hook.body.data.secret);
  });

  it("no secret shown to a client is in any column of any table, in any log line, or in /metrics", async () => {
    // Keys, webhook endpoints, rotations and payouts, all with Idempotency-Keys, each retried once (replays).
    const owner = await signedIn("owner");
    const liveOwner = await signedIn("owner", "live");
    const keyClient = as(apiClient(gw.url, merchant.testKey));
    for (const client of [owner.client, liveOwner.client]) {
      const k = key();
      for (let i = 0; i < 2; i++) expect((await client.gql(CREATE_KEY, undefined, k)).body.data.createApiKey.secret).toMatch(/^sk_(test|live)_/);
    }
    for (const client of [owner.client, keyClient]) {
      const k = key();
      const body = { url: `http://127.0.0.1:9/hooks/${randomUUID()}`, events: ["payout.completed"] };
      const hook = await client.post("/v1/webhooks", body, k);
      expect((await client.post("/v1/webhooks", body, k)).text).toBe(hook.text);
      const id = hook.body.data.id as number;
      const kr = key();
      for (let i = 0; i < 2; i++) expect((await client.gql(ROTATE, { id }, kr)).body.data.rotateWebhookSecret.secret).toMatch(/^whsec_/);
      const kp = key();
      const payout = { amount: 12300, phone_number: "254708374149", reference: `P-${randomUUID().slice(0, 8)}` };
      for (let i = 0; i < 2; i++) expect((await client.post("/v1/payouts", payout, kp)).status).toBe(201);
    }
    const metrics = await apiClient(gw.url).get("/metrics");
    expect(metrics.status).toBe(200);

    const secrets = [...shown];
    expect(secrets.filter((s) => s.startsWith("sk_")).length).toBeGreaterThanOrEqual(6);
    expect(secrets.filter((s) => s.startsWith("whsec_")).length).toBeGreaterThanOrEqual(4);

    const prisma = gw.gateway.db.prisma;
    const tables = await prisma.$queryRaw<{ name: string }[]>`
      SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`;
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["idempotency_keys", "api_keys", "webhook_endpoints", "payouts", "events", "jobs"]));
    const dump: string[] = [];
    for (const { name } of tables) {
      const rows = await prisma.$queryRawUnsafe<{ row: string }[]>(`SELECT t::text AS row FROM "${name.replaceAll('"', '""')}" t`);
      dump.push(...rows.map((r) => `${name}: ${r.row}`));
    }
    // The replays above were answered from stored bodies: they are there, sealed.
    const stored = await prisma.idempotencyKey.findMany({ where: { status: "completed", merchantId: merchant.id } });
    expect(stored.length).toBeGreaterThanOrEqual(10);
    for (const record of stored) expect(record.responseBody).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/);

    const everything = { tables: dump.join("\n"), logs: logLines.join(""), metrics: metrics.text };
    expect(everything.logs).toContain("request completed"); // the log was written at all
    for (const [where, text] of Object.entries(everything)) {
      const found = secrets.filter((secret) => text.includes(secret));
      expect(found, `secrets in ${where}`).toEqual([]);
    }
  });
});
