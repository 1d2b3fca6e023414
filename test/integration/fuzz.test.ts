import fc from "fast-check";
import { isInputObjectType, isListType, isNonNullType, isEnumType, isScalarType, type GraphQLInputType } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorCatalogue } from "../../src/errors.ts";
import { schema } from "../../src/app/schema.ts";
import { restRoutes } from "../../src/app/rest-routes.ts";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { parseJsonOrUndefined } from "../support/json.ts";

/**
 * Property-based fuzzing of every REST route, every GraphQL root field, the keyless checkout routes and
 * the provider callbacks, with hostile values (NUL and control characters, huge and odd strings and
 * numbers, wrong types, malformed ids and percent-encodings). Whatever is sent, the gateway answers
 * below 500, REST errors in the documented envelope with a catalogue code, GraphQL without a masked
 * internal error, and no stack trace, SQL or configured secret in any body.
 *
 * A fixed seed keeps CI repeatable; more on demand:
 *   FUZZ_RUNS=5000 FUZZ_SEED=42 npx vitest run --config test/vitest.config.ts test/integration/fuzz.test.ts
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 800);
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const params = { numRuns: RUNS, seed: SEED, endOnFailure: true };

const catalogueCodes = new Set(Object.keys(errorCatalogue));

// ---- hostile values -------------------------------------------------------------------------------------

const nastyText = fc.constantFrom(
  "\u0000", "a\u0000b", "\u0001\u001f\u007f", "%00", "%c0%ae", "../../etc/passwd", "' OR 1=1 --", "\"; DROP TABLE transactions; --",
  "💸💸", "\ud800", "\u202e", "<script>alert(1)</script>", "${7*7}", "{{7*7}}", " ", "", "null", "NaN", "-1", "1e309",
  "x".repeat(5000), "9".repeat(40), "254708374149", "+254708374149", "payer@example.com", "KES", "sandbox", "txn_unknown",
  "VHJhbnNhY3Rpb246MQ==", "R1BDOk46MQ==", "R1BDOlM6YWJj", "2026-13-45", "2026-01-01",
);
const text = fc.oneof({ weight: 3, arbitrary: nastyText }, { weight: 2, arbitrary: fc.string({ maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 20 }) });
const number = fc.oneof(
  fc.constantFrom(0, -1, 1, 1.5, -0.01, 2 ** 31, 2 ** 53, 1e21, Number.MAX_SAFE_INTEGER, 150000, 100),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const scalar = fc.oneof(text, number, fc.boolean(), fc.constant(null));
const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom("a", "public_key", "secret_key", "x"), scalar, { maxKeys: 3 }) },
);

/** Every body field name the REST routes read, plus some they do not. */
const fieldNames = [
  "amount", "email", "payment_channel_id", "currency", "description", "first_name", "last_name", "phone", "phone_number",
  "reference", "name", "provider", "config", "confirmation_url", "validation_url", "url", "events", "enabled", "command_id",
  "__proto__", "constructor", "unknown_field",
];
const body = fc.oneof(
  { weight: 8, arbitrary: fc.dictionary(fc.constantFrom(...fieldNames), value, { maxKeys: 8 }) },
  { weight: 1, arbitrary: value },
);
/** Percent-encoding that also takes lone surrogates (sent as U+FFFD, as a browser would). */
const encode = (t: string) => encodeURIComponent(t.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd"));

const queryNames = ["page", "limit", "status", "date_from", "date_to", "search", "active_only"];
const queryString = fc
  .dictionary(fc.constantFrom(...queryNames), fc.oneof(text, number.map(String)), { maxKeys: 4 })
  .map((q) => Object.entries(q).map(([k, v]) => `${k}=${encode(String(v))}`).join("&"));
/** A path segment: encoded junk, or raw percent sequences (some undecodable). */
const segment = fc.oneof(text.map(encode), fc.constantFrom("%00", "%c0%ae", "%ff", "%", "..", "x".repeat(200)));

// ---- checks ---------------------------------------------------------------------------------------------

const leaks: RegExp[] = [/\n\s+at \S+ \(/, /\bSELECT\s+[\w"*., ]+\s+FROM\s/i, /INSERT INTO/i, /violates/i, /SQLSTATE/i, /prisma/i];
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function checkRest(what: string, status: number, text: string, json: unknown) {
  expect(status, `${what} -> ${status} ${text.slice(0, 300)}`).toBeLessThan(500);
  for (const leak of leaks) expect(text, `${what} leaks ${leak}`).not.toMatch(leak);
  if (status >= 400) {
    const envelope = json as { status?: unknown; message?: unknown; code?: unknown } | undefined;
    expect(envelope?.status, `${what} -> ${status} not in the envelope: ${text.slice(0, 300)}`).toBe("error");
    expect(typeof envelope?.message, what).toBe("string");
    expect(catalogueCodes.has(String(envelope?.code)), `${what}: unknown code ${String(envelope?.code)}`).toBe(true);
  }
}

function checkGraphql(what: string, status: number, text: string) {
  expect(status, `${what} -> ${status} ${text.slice(0, 300)}`).toBeLessThan(500);
  expect(text, `${what}: ${text.slice(0, 400)}`).not.toMatch(/INTERNAL_SERVER_ERROR|Unexpected error/);
  for (const leak of leaks) expect(text, `${what} leaks ${leak}`).not.toMatch(leak);
}

// ---- GraphQL operations from the schema -----------------------------------------------------------------

function argValue(type: GraphQLInputType, depth = 0): fc.Arbitrary<unknown> {
  if (isNonNullType(type)) return argValue(type.ofType, depth);
  const wrongType = value;
  if (isListType(type)) return fc.oneof(fc.array(argValue(type.ofType, depth + 1), { maxLength: 3 }), wrongType);
  if (isEnumType(type)) return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...type.getValues().map((v) => v.name)) }, { weight: 1, arbitrary: wrongType });
  if (isInputObjectType(type)) {
    if (depth > 2) return fc.constant({});
    const fields = Object.values(type.getFields());
    const record = Object.fromEntries(fields.map((f) => [f.name, argValue(f.type, depth + 1)]));
    return fc.oneof({ weight: 4, arbitrary: fc.record(record, { requiredKeys: [] }) }, { weight: 1, arbitrary: wrongType });
  }
  if (isScalarType(type)) {
    switch (type.name) {
      case "Int":
      case "BigInt":
        return fc.oneof({ weight: 3, arbitrary: number }, { weight: 1, arbitrary: wrongType });
      case "Boolean":
        return fc.oneof(fc.boolean(), wrongType);
      default:
        return fc.oneof({ weight: 3, arbitrary: text }, { weight: 1, arbitrary: wrongType });
    }
  }
  return wrongType;
}

const rootFields = (["query", "mutation"] as const).flatMap((kind) => {
  const root = kind === "query" ? schema.getQueryType() : schema.getMutationType();
  return Object.values(root?.getFields() ?? {}).map((field) => ({ kind, field }));
});

const graphqlRequest = fc.constantFrom(...rootFields).chain(({ kind, field }) => {
  const args = field.args;
  const declared = args.map((a) => `$${a.name}: ${a.type.toString()}`).join(", ");
  const passed = args.map((a) => `${a.name}: $${a.name}`).join(", ");
  const query = `${kind} Fuzz${declared ? `(${declared})` : ""} { ${field.name}${passed ? `(${passed})` : ""} { __typename } }`;
  const variables = fc.record(Object.fromEntries(args.map((a) => [a.name, argValue(a.type)])), { requiredKeys: [] });
  return variables.map((v) => ({ name: field.name, query, variables: v }));
});

// ---- the suite ------------------------------------------------------------------------------------------

describe("fuzzing every route", () => {
  let gw: TestGateway;
  let fake: FakeDaraja;
  let apiKey: string;
  let reference: string;
  let callbackToken: string;

  beforeAll(async () => {
    fake = await startFakeDaraja();
    gw = await startTestGateway({
      env: { RATE_LIMIT_ENABLED: "false", ...darajaGatewayEnv(fake), SANDBOX_STK_DELAY_MS: "50", WEBHOOK_ALLOW_PRIVATE_URLS: "true" },
    });
    fake.switches.callbackOrigin = gw.url;
    const merchant = await gw.createMerchant();
    apiKey = merchant.testKey;
    const api = apiClient(gw.url, apiKey);
    const config = fake.channelConfig();
    // The channel's secrets must never come back in any body.
    leaks.push(new RegExp(escapeRegExp(config.consumer_secret)), new RegExp(escapeRegExp(config.passkey)));
    const mpesa = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config });
    expect(mpesa.status, mpesa.text).toBe(201);
    fake.switches.callbackOrigin = gw.url;
    // The STK push carries the channel's callback URL, and with it the token callbacks are authenticated by.
    const push = await api.post("/api/momo/stk-push", { amount: 1000, phone_number: "254708374149", payment_channel_id: mpesa.body.channel.id });
    const stkRequest = fake.requests.find((r) => r.path.includes("stkpush"));
    callbackToken = String((stkRequest?.body as { CallBackURL?: string } | undefined)?.CallBackURL ?? "").split("/callbacks/daraja/")[1]?.split("/")[0] ?? "";
    expect(callbackToken, push.text).toMatch(/^[0-9a-f]+$/);
    const sandbox = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    expect(sandbox.status, sandbox.text).toBe(201);
    const init = await api.post("/api/transactions/initialize", { amount: 5000, email: "fuzz@payers.test" });
    reference = init.body.reference;
    expect((await api.post("/v1/webhooks", { url: "http://127.0.0.1:9/fuzz" })).status).toBe(201);
  });

  afterAll(async () => {
    await gw?.close();
    await fake?.close();
  });

  async function send(method: string, path: string, payload?: unknown, headers: Record<string, string> = {}) {
    const response = await fetch(`${gw.url}${path}`, {
      method,
      headers: { "x-api-key": apiKey, ...(payload === undefined ? {} : { "content-type": "application/json" }), ...headers },
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    const text = await response.text();
    return { status: response.status, text, json: parseJsonOrUndefined(text) as unknown };
  }

  // The route table's rows, and the sign-in routes beside it.
  const authRoutes = ["/v1/auth/login", "/v1/auth/refresh", "/v1/auth/logout"].map((path) => ({ method: "POST" as const, path }));
  const routes = [...restRoutes.map((r) => ({ method: r.method, path: r.path })), ...authRoutes];

  it("REST routes: hostile bodies, path parameters and query strings", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), body, fc.oneof({ weight: 4, arbitrary: segment }, { weight: 1, arbitrary: fc.constant("@reference@") }), queryString, fc.boolean(), async (route, payload, param, query, keyed) => {
        const path = route.path.replace(/:[a-z_]+/g, param === "@reference@" ? reference : param) + (query ? `?${query}` : "");
        const headers: Record<string, string> = keyed ? { "idempotency-key": `fuzz-${param}`.slice(0, 300) } : {};
        const res = route.method === "GET" ? await send("GET", path) : await send("POST", path, payload, headers);
        checkRest(`${route.method} ${path} ${JSON.stringify(payload)?.slice(0, 200)}`, res.status, res.text, res.json);
      }),
      params,
    );
  });

  it("checkout page and card payment: hostile references and card fields", async () => {
    const cardBody = fc.record({ card_number: value, expiry_month: value, expiry_year: value, cvc: value }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(fc.oneof(segment, fc.constant(reference)), fc.oneof(cardBody, body), async (ref, payload) => {
        const page = await send("GET", `/payment/checkout/${ref}`);
        expect(page.status, `GET checkout ${ref}`).toBeLessThan(500);
        for (const leak of leaks) expect(page.text).not.toMatch(leak);
        const pay = await send("POST", `/payment/checkout/${ref}/pay`, payload);
        checkRest(`POST checkout ${ref} pay ${JSON.stringify(payload)?.slice(0, 200)}`, pay.status, pay.text, pay.json);
      }),
      { ...params, numRuns: Math.ceil(RUNS / 2) },
    );
  });

  it("Daraja callbacks: hostile bodies on a valid token, and hostile tokens", async () => {
    const kinds = ["stk", "c2b/validation", "c2b/confirmation", "b2c/result", "b2c/timeout", "b2c/status/po_x"];
    const darajaShaped = fc.record({
      Body: fc.record({ stkCallback: fc.record({ MerchantRequestID: value, CheckoutRequestID: value, ResultCode: value, ResultDesc: value, CallbackMetadata: value }, { requiredKeys: [] }) }, { requiredKeys: [] }),
      Result: fc.record({ ResultCode: value, OriginatorConversationID: value, ConversationID: value, TransactionID: value, ResultParameters: value }, { requiredKeys: [] }),
      TransID: value,
      TransAmount: value,
      MSISDN: value,
      BillRefNumber: value,
      BusinessShortCode: value,
    }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...kinds), fc.oneof(darajaShaped, body), fc.oneof({ weight: 3, arbitrary: fc.constant("VALID") }, { weight: 1, arbitrary: segment }), async (kind, payload, token) => {
        const res = await send("POST", `/callbacks/daraja/${token === "VALID" ? callbackToken : token}/${kind}`, payload, { "x-api-key": "" });
        expect(res.status, `${kind} ${JSON.stringify(payload).slice(0, 200)} -> ${res.status} ${res.text.slice(0, 300)}`).toBeLessThan(500);
        for (const leak of leaks) expect(res.text, `${kind} leaks ${leak}`).not.toMatch(leak);
      }),
      params,
    );
  });

  it("GraphQL: every query and mutation with generated variables, over POST and GET", async () => {
    await fc.assert(
      fc.asyncProperty(graphqlRequest, fc.boolean(), async ({ name, query, variables }, overGet) => {
        const res = overGet && query.startsWith("query")
          ? await send("GET", `/graphql?query=${encode(query)}&variables=${encode(JSON.stringify(variables))}`, undefined, { accept: "application/json" })
          : await send("POST", "/graphql", { query, variables });
        checkGraphql(`${name} ${JSON.stringify(variables).slice(0, 300)}`, res.status, res.text);
      }),
      params,
    );
  });

  it("GraphQL over GET: junk in query, variables and extensions", async () => {
    await fc.assert(
      fc.asyncProperty(text, text, text, async (query, variables, extensions) => {
        const res = await send("GET", `/graphql?query=${encode(query)}&variables=${encode(variables)}&extensions=${encode(extensions)}`, undefined, { accept: "application/json" });
        checkGraphql(`GET /graphql ${query.slice(0, 50)} ${variables.slice(0, 50)}`, res.status, res.text);
      }),
      { ...params, numRuns: Math.ceil(RUNS / 2) },
    );
  });
});
