import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/db/database.ts";
import { createLogger } from "../../src/logger.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient } from "../support/gateway.ts";
import { gatewayProcesses, printedTestKey, processEnv, runCli, type StartedGatewayProcess } from "../support/process.ts";
import { registerSecret } from "../support/secrets-in-logs.ts";

const PUBLIC_BASE_URL = "https://pay.duka.test";

async function graphqlAs(url: string, token: string, query: string, variables?: Record<string, unknown>) {
  const response = await fetch(`${url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: Record<string, any>; errors?: unknown[] };
}

async function signIn(url: string, email: string, password: string, mode: "test" | "live" = "test") {
  const login = await apiClient(url).post("/v1/auth/login", { email, password, mode });
  expect(login.status, login.text).toBe(200);
  return login.body.data.access_token as string;
}

/** The output's JSON answer (the CLI prints one line of JSON on success). */
function answer(output: string) {
  return JSON.parse(output.trim().split("\n").find((line) => line.startsWith("{"))!);
}

describe("NODE_ENV=production on an empty database", () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  const gateways = gatewayProcesses();
  let gateway: StartedGatewayProcess;
  const password = "first-owner-password-1";
  registerSecret(password);
  let merchantId: number;

  beforeAll(async () => {
    database = await createTestDatabase({ empty: true });
    env = processEnv(database, { NODE_ENV: "production", LOG_LEVEL: "info", PUBLIC_BASE_URL });
    gateway = await gateways.start(env);
  });
  afterAll(async () => {
    await gateways.killAll();
    await database?.drop();
  });

  it("creates no demo merchant, answers /ready, and says once, at info level, to run setup", async () => {
    await gateway.waitFor(/no merchant yet/);
    expect((await apiClient(gateway.url).get("/ready")).status).toBe(200);
    const hints = gateway.output().split("\n").filter((line) => line.includes("no merchant yet"));
    expect(hints).toHaveLength(1);
    expect(JSON.parse(hints[0]!)).toMatchObject({ level: 30, msg: expect.stringContaining("npm run cli -- setup") });
    expect(gateway.output()).not.toMatch(/Demo merchant|Test API key/i);
    const list = await runCli(["merchant", "list"], env);
    expect(answer(list.output)).toEqual({ merchants: [] });
  });

  it("setup with flags and the password on stdin creates the merchant and its owner, prints the dashboard URL, and makes no key or channel", async () => {
    const setup = await runCli(["setup", "--name", "Duka la Mama", "--email", "Owner@Duka.test", "--country", "KE", "--password-stdin"], env, `${password}\n`);
    expect(setup.code, setup.output).toBe(0);
    expect(setup.output).not.toMatch(/sk_(test|live)_/);
    expect(setup.output).not.toContain(password);
    const created = answer(setup.output);
    expect(created).toMatchObject({
      merchant: { name: "Duka la Mama", email: "owner@duka.test", country: "KE", timezone: "Africa/Nairobi", default_currency: "KES" },
      owner: { email: "owner@duka.test", role: "owner" },
      dashboard_url: `${PUBLIC_BASE_URL}/dashboard`,
    });
    merchantId = created.merchant.id;

    const token = await signIn(gateway.url, "owner@duka.test", password);
    const seen = await graphqlAs(gateway.url, token, "{ viewer { name } currentUser { role } apiKeys { prefix } paymentChannels { name } }");
    expect(seen).toEqual({ data: { viewer: { name: "Duka la Mama" }, currentUser: { role: "owner" }, apiKeys: [], paymentChannels: [] } });
    const live = await signIn(gateway.url, "owner@duka.test", password, "live");
    expect(await graphqlAs(gateway.url, live, "{ apiKeys { prefix } paymentChannels { name } }")).toEqual({ data: { apiKeys: [], paymentChannels: [] } });
    const list = answer((await runCli(["merchant", "list"], env)).output);
    expect(list.merchants).toEqual([expect.objectContaining({ id: merchantId, demo: false, timezone: "Africa/Nairobi", keys: [] })]);
  });

  it("a second setup is refused; --another makes one more (time zone UTC outside Kenya); bad input is refused clearly", async () => {
    const again = await runCli(["setup", "--name", "Other", "--email", "other@duka.test", "--password-stdin"], env, "another-password-2");
    expect(again.code).toBe(1);
    expect(again.output).toMatch(/already has a merchant.*--another/);
    const another = await runCli(["setup", "--name", "Other Shop", "--email", "other@duka.test", "--country", "NG", "--another", "--password-stdin"], env, "another-password-2");
    expect(another.code, another.output).toBe(0);
    expect(answer(another.output).merchant).toMatchObject({ name: "Other Shop", country: "NG", timezone: "UTC", default_currency: "NGN" });
    await signIn(gateway.url, "other@duka.test", "another-password-2");

    const badZone = await runCli(["setup", "--name", "Z", "--email", "z@duka.test", "--timezone", "Mars/Olympus", "--another", "--password-stdin"], env, "zone-password-3");
    expect(badZone.code).toBe(1);
    expect(badZone.output).toContain("timezone: must be an IANA time zone name");
    const badCurrency = await runCli(["setup", "--name", "Z", "--email", "z@duka.test", "--currency", "EUR", "--another", "--password-stdin"], env, "zone-password-3");
    expect(badCurrency.code).toBe(1);
    expect(badCurrency.output).toContain("currency: must be one of");
    const noName = await runCli(["setup", "--email", "z@duka.test", "--password-stdin"], env, "zone-password-3");
    expect(noName.code).toBe(2);
    expect(noName.output).toContain("--name is required");
  });

  it("merchants rename and merchants set change the merchant; the owner renames it in the dashboard (Brand settings), a developer may not", async () => {
    const renamed = await runCli(["merchants", "rename", "--merchant", String(merchantId), "--name", "Duka Kubwa"], env);
    expect(renamed.code, renamed.output).toBe(0);
    expect(answer(renamed.output).merchant).toMatchObject({ id: merchantId, name: "Duka Kubwa" });
    const set = await runCli(["merchants", "set", "--merchant", String(merchantId), "--timezone", "Africa/Kampala", "--language", "sw"], env);
    expect(answer(set.output).merchant).toMatchObject({ name: "Duka Kubwa", timezone: "Africa/Kampala", language: "sw" });
    const bad = await runCli(["merchants", "set", "--merchant", String(merchantId), "--timezone", "Nowhere/Else"], env);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain("timezone: must be an IANA time zone name");
    const empty = await runCli(["merchant", "rename", "--merchant", String(merchantId), "--name", "  "], env);
    expect(empty.code).toBe(2);

    const owner = await signIn(gateway.url, "owner@duka.test", password);
    const mutation = `mutation($input: UpdateBrandInput!) { updateBrand(input: $input) { __typename ... on Brand { merchantName } ... on Error { message } } }`;
    expect(await graphqlAs(gateway.url, owner, mutation, { input: { merchantName: "  Duka Bora  " } })).toEqual({ data: { updateBrand: { __typename: "Brand", merchantName: "Duka Bora" } } });
    expect((await graphqlAs(gateway.url, owner, "{ viewer { name } }")).data).toEqual({ viewer: { name: "Duka Bora" } });
    const refused = await graphqlAs(gateway.url, owner, mutation, { input: { merchantName: "bad\nname" } });
    expect(refused.data?.updateBrand).toMatchObject({ message: expect.stringContaining("merchantName") });

    const developerPassword = "developer-password-4";
    const developer = await runCli(["user", "create", "--merchant", String(merchantId), "--email", "dev@duka.test", "--role", "developer", "--password-stdin"], env, developerPassword);
    expect(developer.code, developer.output).toBe(0);
    const dev = await signIn(gateway.url, "dev@duka.test", developerPassword);
    const forbidden = await graphqlAs(gateway.url, dev, mutation, { input: { merchantName: "Mine now" } });
    expect(JSON.stringify(forbidden)).not.toContain('"merchantName":"Mine now"');
    expect((await graphqlAs(gateway.url, owner, "{ viewer { name } }")).data).toEqual({ viewer: { name: "Duka Bora" } });
  });

  it("a secret key sent as Authorization: Bearer to /api gets a 401 that says to send it in X-API-Key", async () => {
    const created = await runCli(["key", "create", "--merchant", String(merchantId), "--mode", "test"], env);
    const { key } = answer(created.output);
    const bearer = await fetch(`${gateway.url}/api/transactions/list`, { headers: { authorization: `Bearer ${key}` } });
    expect(bearer.status).toBe(401);
    const body = (await bearer.json()) as { status: string; message: string; code: string };
    expect(body).toMatchObject({ status: "error", code: "invalid_api_key" });
    expect(body.message).toContain("X-API-Key");
    // The same key in X-API-Key works; /v1 takes only a user's bearer token, and says so as before.
    expect((await apiClient(gateway.url, key).get("/api/transactions/list")).status).toBe(200);
    const none = await fetch(`${gateway.url}/api/transactions/list`);
    expect(((await none.json()) as { message: string }).message).toBe("Invalid API key");
  });

  it("stops cleanly, and no log line held a key or a password", async () => {
    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
    expect(gateway.output()).not.toContain(password);
  });
});

/** Every table with a merchant_id column, and how many rows of this merchant each holds. */
async function rowsOf(database: TestDatabase, merchantId: number): Promise<Record<string, number>> {
  const db = await openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir }, createLogger("warn"));
  try {
    const tables = await db.prisma.$queryRawUnsafe<{ table_name: string }[]>(
      `SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'merchant_id' ORDER BY 1`,
    );
    const counts: Record<string, number> = {};
    for (const { table_name: table } of tables) {
      const [row] = await db.prisma.$queryRawUnsafe<{ n: bigint }[]>(`SELECT count(*) AS n FROM "${table}" WHERE merchant_id = $1`, merchantId);
      if (Number(row!.n) > 0) counts[table] = Number(row!.n);
    }
    const [merchant] = await db.prisma.$queryRawUnsafe<{ n: bigint }[]>(`SELECT count(*) AS n FROM merchants WHERE id = $1`, merchantId);
    if (Number(merchant!.n) > 0) counts.merchants = Number(merchant!.n);
    return counts;
  } finally {
    await db.close();
  }
}

describe("cli demo remove", () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  const gateways = gatewayProcesses();
  let gateway: StartedGatewayProcess;
  let testKey: string;
  let owner: { email: string; password: string };
  let demoId: number;

  beforeAll(async () => {
    database = await createTestDatabase({ empty: true });
    env = processEnv(database, { LOG_LEVEL: "info", ALLOW_PRIVATE_URLS: "true" });
    gateway = await gateways.start(env);
    testKey = await printedTestKey(gateway);
    const [, email, password] = await gateway.waitFor(/Dashboard: \S+\/dashboard {2}e-mail (\S+) {2}password \(shown once\) (\S+)/);
    owner = { email: email!, password: password! };
    registerSecret(owner.password);
  });
  afterAll(async () => {
    await gateways.killAll();
    await database?.drop();
  });

  it("gives test-mode data of every kind to the demo merchant (payments, refunds, payouts, disputes, webhooks, ledger)", async () => {
    const status = await apiClient(gateway.url, testKey).get("/v1/status");
    demoId = status.body.data.merchant.id;
    const endpoint = await apiClient(gateway.url, testKey).post("/v1/webhooks", { url: "http://127.0.0.1:9/hooks" });
    expect(endpoint.status, endpoint.text).toBeLessThan(300);
    for (const event of ["refund.completed", "payout.completed", "dispute.created", "transaction.pending"]) {
      const triggered = await runCli(["webhooks", "trigger", event, "--key", testKey, "--url", gateway.url], {});
      expect(triggered.code, triggered.output).toBe(0);
    }
    const initialized = await apiClient(gateway.url, testKey).post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com" });
    expect(initialized.status, initialized.text).toBe(200);
    await signIn(gateway.url, owner.email, owner.password);
  });

  it("is refused while the demo merchant has live-mode data, and leaves everything in place", async () => {
    const live = await signIn(gateway.url, owner.email, owner.password, "live");
    const created = await graphqlAs(gateway.url, live, `mutation($input: CreatePaymentChannelInput!) { createPaymentChannel(input: $input) { __typename ... on PaymentChannel { databaseId } ... on Error { message } } }`, {
      input: { name: "Live Paystack", provider: "paystack", config: { public_key: "pk_live_x", secret_key: "sk_live_x" } },
    });
    expect(created.data?.createPaymentChannel, JSON.stringify(created)).toMatchObject({ __typename: "PaymentChannel" });
    const refused = await runCli(["demo", "remove"], env);
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/live-mode data \(payment_channels\).*not removed.*merchant rename/);
    expect((await apiClient(gateway.url, testKey).get("/v1/status")).status).toBe(200);

    // Gone again (deleted while the gateway is stopped): the demo is removable.
    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
    const db = await openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir }, createLogger("warn"));
    try {
      await db.prisma.$executeRawUnsafe(`DELETE FROM payment_channels WHERE merchant_id = $1 AND mode = 'live'`, demoId);
    } finally {
      await db.close();
    }
  });

  it("removes the demo merchant and every row it owned, in every table with a merchant_id; other merchants stay", async () => {
    const before = await rowsOf(database, demoId);
    for (const table of ["transactions", "refunds", "payouts", "disputes", "events", "ledger_entries", "webhook_endpoints", "webhook_deliveries", "users", "api_keys", "payment_channels"]) {
      expect(before[table], `${table} before: ${JSON.stringify(before)}`).toBeGreaterThan(0);
    }
    const other = await runCli(["merchant", "create", "--name", "Real Shop", "--email", "real@shop.test"], env);
    const otherId = answer(other.output).merchant.id as number;

    gateway = await gateways.start(env); // the command is handed to it on the embedded database
    const removed = await runCli(["demo", "remove"], env);
    expect(removed.code, removed.output).toBe(0);
    expect(answer(removed.output)).toMatchObject({ removed: { id: demoId, name: "Demo Merchant" }, deleted: expect.objectContaining({ merchants: 1, transactions: before.transactions }) });
    expect((await apiClient(gateway.url, testKey).get("/v1/status")).status).toBe(401);
    expect((await apiClient(gateway.url).post("/v1/auth/login", { email: owner.email, password: owner.password })).status).toBe(401);
    const again = await runCli(["demo", "remove"], env);
    expect(again.code).toBe(1);
    expect(again.output).toMatch(/Demo merchant .* not found/);

    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
    expect(await rowsOf(database, demoId)).toEqual({});
    expect((await rowsOf(database, otherId)).merchants).toBe(1);
  });
});
