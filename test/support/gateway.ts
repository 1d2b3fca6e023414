import { randomBytes } from "node:crypto";
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { loadConfig } from "../../src/config.ts";
import { createLogger, type Logger } from "../../src/logger.ts";
import { createGateway, type Gateway } from "../../src/server.ts";
import { createTestDatabase, type TestDatabase } from "./backend.ts";
import { createResponseValidator, type ResponseValidator } from "./openapi-validation.ts";
import { parseJsonOrUndefined } from "./json.ts";
import { graphql } from "../gql/index.ts";
import { registerSecret } from "./secrets-in-logs.ts";

let responseValidator: ResponseValidator | undefined;

export interface TestMerchant {
  id: number;
  name: string;
  testKey: string;
  liveKey: string;
}

export type TestRole = "owner" | "developer" | "viewer";

/** A channel as the REST API shows it (GET /api/payment-channels/list): an integer id, snake_case fields. */
export interface RestChannel {
  id: number;
  name: string;
  provider: string;
  is_active: boolean;
  is_default: boolean;
  created_at: string;
  fee_percent_bps: number;
  fee_fixed: number;
  webhook_url?: string;
}

/** A channel to create, in the REST body's shape. */
export interface ChannelInput {
  name: string;
  provider: string;
  config?: Record<string, unknown>;
  fee_percent_bps?: number;
  fee_fixed?: number;
}

const CreateLiveChannel = graphql(`
  mutation TestGatewayCreateLiveChannel($input: CreatePaymentChannelInput!) {
    createPaymentChannel(input: $input) {
      __typename
      ... on PaymentChannel { databaseId }
      ... on Error { code message }
    }
  }
`);

export interface TestGateway {
  url: string;
  gateway: Gateway;
  database: TestDatabase;
  /** Seeds a merchant through the service (the testkit way), with one test and one live key. */
  createMerchant(name?: string): Promise<TestMerchant>;
  /** Seeds a user of a merchant through the service; answers the e-mail and password to sign in with. */
  createUser(merchantId: number, role: TestRole): Promise<{ id: number; email: string; password: string }>;
  /**
   * An access token of a user of the merchant with the role, in the mode, from the real POST /v1/auth/login.
   * The user is created once per merchant and role and its token reused while it has a minute left: sign-ins
   * spend the IP's login budget (LOGIN_FAILURES_PER_IP, successes too). Fails unless the sign-in answers 200.
   */
  signIn(merchantId: number, role: TestRole, mode?: "test" | "live"): Promise<string>;
  /**
   * A live-mode channel created the only way the API allows (issue 35): by a signed-in live owner, over GraphQL
   * createPaymentChannel (it becomes the live default, as over REST). Answers it as the REST list shows it.
   */
  createLiveChannel(merchant: TestMerchant, channel: ChannelInput): Promise<RestChannel>;
  /** REST answers checked against the OpenAPI document so far, and those that contradicted it. */
  openApi: { checked: number; violations: string[] };
  close(): Promise<void>;
}

export interface StartOptions {
  env?: Record<string, string>;
  onQuery?: (sql: string) => void;
  /** Every statement's text and parameters on PostgreSQL (OpenOptions.onStatement). */
  onStatement?: (text: string, values: readonly unknown[]) => void;
  /** Reuse a database (for a second instance on the same one); by default each gateway gets a fresh one. */
  database?: TestDatabase;
  /** Logger for the gateway (e.g. one writing to memory, to assert on log lines); by default LOG_LEVEL's. */
  logger?: Logger;
  /** A fixed port (so PUBLIC_BASE_URL can name it, for providers that send the payer back); default ephemeral. */
  port?: number;
}

/** The real server, in this process, listening on an ephemeral loopback port. */
export async function startTestGateway(options: StartOptions = {}): Promise<TestGateway> {
  const database = options.database ?? (await createTestDatabase());
  const config = loadConfig({
    NODE_ENV: "test",
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    // scrypt N = 2^10 instead of 2^15: sign-ins cost ~1 ms instead of ~80; test/unit/passwords.test.ts covers 2^15.
    // (Allowed with NODE_ENV=test only: a gateway started as production keeps the production cost.)
    ...((options.env?.NODE_ENV ?? "test") === "test" ? { PASSWORD_HASH_COST: "10" } : {}),
    // One attempt per checkout payment, as before issue 25, so a decline still fails it in the suites written
    // for that; the attempts tests (checkout-attempts.test.ts) and the page's set CHECKOUT_MAX_ATTEMPTS themselves.
    CHECKOUT_MAX_ATTEMPTS: "1",
    ...database.env,
    ENCRYPTION_KEY: database.encryptionKeyHex,
    ...options.env,
  });
  const gateway = await createGateway(config, options.logger ?? createLogger(config.logLevel), {
    ...(options.onQuery ? { onQuery: options.onQuery } : {}),
    ...(options.onStatement ? { onStatement: options.onStatement } : {}),
  });
  // Every REST answer of every test is checked against the OpenAPI document; close() reports what did not match.
  const validator = (responseValidator ??= createResponseValidator());
  const openApi = { checked: 0, violations: [] as string[] };
  const violations = openApi.violations;
  gateway.app.addHook("onSend", async (request, reply, payload) => {
    const violation = validator.check(request.method, request.routeOptions.url, reply.statusCode, payload);
    if (violation !== undefined) openApi.checked++;
    if (violation) violations.push(violation);
    return payload;
  });
  const address = await gateway.app.listen({ port: options.port ?? 0, host: "127.0.0.1" });
  const ownsDatabase = !options.database;
  const users = new Map<string, Promise<{ email: string; password: string }>>();
  const tokens = new Map<string, { token: Promise<string>; expiresAt: number }>();
  const createUser = async (merchantId: number, role: TestRole) => {
    const credentials = { email: `${role}-${randomBytes(6).toString("hex")}@users.test`, password: `pw-${randomBytes(12).toString("base64url")}` };
    registerSecret(credentials.password);
    const user = await gateway.services.users.createUser({ merchantId, role, ...credentials });
    return { id: user.id, ...credentials };
  };
  const signIn = (merchantId: number, role: TestRole, mode: "test" | "live" = "test"): Promise<string> => {
    const userKey = `${merchantId}:${role}`;
    const tokenKey = `${userKey}:${mode}`;
    const cached = tokens.get(tokenKey);
    if (cached && cached.expiresAt > Date.now() + 60_000) return cached.token;
    let user = users.get(userKey);
    if (!user) users.set(userKey, (user = createUser(merchantId, role)));
    const token = user.then(async ({ email, password }) => {
      const login = await apiClient(address).post("/v1/auth/login", { email, password, mode, merchant_id: merchantId });
      if (login.status !== 200) throw new Error(`signing a ${role} of merchant ${merchantId} in to ${mode} mode answered ${login.status}: ${login.text}`);
      return login.body.data.access_token as string;
    });
    // Until the sign-in answers, a concurrent caller shares it; then it is kept until a minute before it expires.
    tokens.set(tokenKey, { token, expiresAt: Number.POSITIVE_INFINITY });
    token.then(
      (access) => tokens.set(tokenKey, { token, expiresAt: expiryOf(access) }),
      () => tokens.delete(tokenKey),
    );
    return token;
  };
  return {
    url: address,
    gateway,
    database,
    openApi,
    async createMerchant(name = `Merchant ${randomBytes(3).toString("hex")}`) {
      const { merchant, keys } = await gateway.services.merchants.createMerchant({
        name,
        email: `${randomBytes(6).toString("hex")}@merchants.test`,
      });
      return { id: merchant.id, name: merchant.name, testKey: keys.test.plaintext, liveKey: keys.live.plaintext };
    },
    createUser,
    signIn,
    async createLiveChannel(merchant, channel) {
      const owner = bearerClient(address, await signIn(merchant.id, "owner", "live"));
      const input = { name: channel.name, provider: channel.provider, config: channel.config ?? null, feePercentBps: channel.fee_percent_bps ?? null, feeFixed: channel.fee_fixed ?? null };
      const created = await owner.graphql(CreateLiveChannel, { input });
      const result = created.body.data?.createPaymentChannel;
      if (result?.__typename !== "PaymentChannel") throw new Error(`creating live channel ${channel.name} answered ${created.status}: ${created.text}`);
      const list = await apiClient(address, merchant.liveKey).get("/api/payment-channels/list");
      const listed = (list.body?.channels as RestChannel[] | undefined)?.find((c) => c.id === result.databaseId);
      if (!listed) throw new Error(`live channel ${result.databaseId} is not in the live key's list: ${list.text}`);
      return listed;
    },
    async close() {
      await gateway.close();
      if (ownsDatabase) await database.drop();
      if (violations.length) throw new Error(`REST answers that contradict the OpenAPI document:\n${[...new Set(violations)].slice(0, 20).join("\n")}`);
    },
  };
}

export interface HttpResult<T = any> {
  status: number;
  headers: Headers;
  text: string;
  body: T;
}

/** When an access token (a JWT) expires, epoch ms, read from its payload (the server verified it). */
function expiryOf(token: string): number {
  const payload = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { exp?: number };
  return typeof payload.exp === "number" ? payload.exp * 1000 : 0;
}

async function toResult(response: Response): Promise<HttpResult> {
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: parseJsonOrUndefined(text) };
}

/** A client for one API key: REST calls and typed GraphQL operations over real HTTP. */
export function apiClient(baseUrl: string, apiKey?: string) {
  return httpClient(baseUrl, apiKey ? { "x-api-key": apiKey } : {});
}

/** The same client for a signed-in user: Authorization: Bearer <access token>. */
export function bearerClient(baseUrl: string, accessToken: string) {
  return httpClient(baseUrl, { authorization: `Bearer ${accessToken}` });
}

function httpClient(baseUrl: string, credential: Record<string, string>) {
  const headers = (extra: Record<string, string> = {}): Record<string, string> => ({ ...credential, ...extra });
  return {
    async get(path: string, extra?: Record<string, string>) {
      return toResult(await fetch(`${baseUrl}${path}`, { headers: headers(extra) }));
    },
    async post(path: string, body: unknown, extra?: Record<string, string>) {
      return toResult(
        await fetch(`${baseUrl}${path}`, {
          method: "POST",
          headers: headers({ "content-type": "application/json", ...extra }),
          body: typeof body === "string" ? body : JSON.stringify(body),
        }),
      );
    },
    async raw(path: string, init: RequestInit) {
      return toResult(await fetch(`${baseUrl}${path}`, { ...init, headers: { ...headers(), ...(init.headers as Record<string, string>) } }));
    },
    /** Runs a typed document; returns the HTTP result with `body.data` typed by codegen. */
    async graphql<TData, TVars>(document: TypedDocumentNode<TData, TVars>, variables?: TVars, extra?: Record<string, string>) {
      const result = await toResult(
        await fetch(`${baseUrl}/graphql`, {
          method: "POST",
          headers: headers({ "content-type": "application/json", ...extra }),
          body: JSON.stringify({ query: print(document), variables }),
        }),
      );
      return result as HttpResult<{ data?: TData; errors?: { message: string; extensions?: Record<string, unknown> }[] }>;
    },
  };
}

/**
 * Two instances of the gateway on one database, as a deployment scaled out runs (with REDIS_URL in the options they
 * share Redis too); `second` adds options of the second one only (its own logger). The first owns the database:
 * close the second first.
 */
export async function startTwoInstances(options: StartOptions = {}, second: Partial<StartOptions> = {}): Promise<[TestGateway, TestGateway]> {
  const a = await startTestGateway(options);
  const b = await startTestGateway({ ...options, ...second, database: a.database });
  return [a, b];
}

/** The built-in sandbox provider's channel, as a merchant creates it. */
export const SANDBOX_CHANNEL = { name: "Sandbox", provider: "sandbox", config: {} };

/**
 * A merchant with a test-mode sandbox channel (its default), the channel created over REST as the merchant would:
 * where most payment tests start. Fails unless the channel is created.
 */
export async function createSandboxMerchant(gw: TestGateway, name?: string): Promise<TestMerchant & { channelId: number }> {
  const merchant = await gw.createMerchant(name);
  const channel = await apiClient(gw.url, merchant.testKey).post("/api/payment-channels/create", SANDBOX_CHANNEL);
  if (channel.status !== 201) throw new Error(`creating a sandbox channel answered ${channel.status}: ${channel.text}`);
  return { ...merchant, channelId: channel.body.channel.id as number };
}

/** A card the sandbox approves. */
export const SANDBOX_CARD = { card_number: "4242424242424242", expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 2, cvc: "123" };

/**
 * A transaction the merchant initializes with its key (`body`: amount, email, ...) and the payer pays by card on its
 * hosted checkout (keyless, as a browser posts it); answers its reference. Fails unless both answer 200.
 */
export async function paidTransaction(url: string, apiKey: string, body: Record<string, unknown>, card: Record<string, unknown> = SANDBOX_CARD): Promise<string> {
  const init = await apiClient(url, apiKey).post("/api/transactions/initialize", body);
  if (init.status !== 200) throw new Error(`initializing a transaction answered ${init.status}: ${init.text}`);
  const paid = await apiClient(url).post(`/payment/checkout/${init.body.reference}/pay`, card);
  if (paid.status !== 200) throw new Error(`paying ${init.body.reference} by card answered ${paid.status}: ${paid.text}`);
  return init.body.reference as string;
}
