import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorCatalogue } from "../../src/errors.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { parseJsonOrUndefined } from "../support/json.ts";

/**
 * Property-based: take one valid body (a Daraja C2B confirmation and validation, a REST and a GraphQL C2B
 * simulation), replace ONE of its fields with a hostile value, send it over HTTP. Whatever the field and
 * value, the gateway answers below 500 in the documented shape (Daraja's {ResultCode, ResultDesc} on a
 * callback, the error envelope on REST, GraphQL errors without a masked internal error); text no field can
 * hold (lone UTF-16 surrogates, control characters such as NUL, over 10,000 characters) is refused naming
 * the field; and a refusal records nothing.
 *
 * The seeded fuzz over every route is fuzz.test.ts; this one walks every field of these bodies.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const SEED = Number(process.env.FUZZ_SEED ?? 20261125);
const params = { numRuns: RUNS, seed: SEED, endOnFailure: true };
const catalogueCodes = new Set(Object.keys(errorCatalogue));

// ---- hostile values -------------------------------------------------------------------------------------

/** Text no field can take: each is refused by the one text rule (src/validation.ts), naming the field. */
const unstorableText = fc.constantFrom(
  "\ud800", "\udfff\ud800", "a\udc00b", "254708374149\ud83d", "\ud83d10.00", // lone surrogates (a pair cut in half)
  "\u0000", "a\u0000b", "10.00\u0000", "\u0007\u001f", // control characters
  "x".repeat(10_001), "9".repeat(20_000), // over the 10,000-character bound
);
const oddText = fc.constantFrom(
  "", " ", "-1", "-10.00", "0", "0.00", "00", "10.555", "1e3", "1E+21", "NaN", "Infinity", "-0", "0x10", "1_000", "10,00", "10.00.00",
  " 10.00 ", "+10", "999999999999.99", "9999999999999", "9".repeat(40), "💸", "\ud83d\udcb8", "\u202e", "null", "undefined", "[object Object]",
  "' OR 1=1 --", "<script>", "%00", "254708374149", "+254708374149", "0708374149", "2547 ***** 126",
);
const oddNumber = fc.constantFrom(0, -0, -1, -10.5, 0.001, 10.555, 1.005, 1e21, 1e308, -1e308, 2 ** 53 + 1, Number.MIN_VALUE, 254708374149, 25470837414900000);
const wrongType = fc.constantFrom<unknown>(null, true, false, [], ["10.00"], {}, { $gt: 0 }, { value: "10.00" }, [[["\ud800"]]], { a: { b: { c: "\u0000" } } });
const mutation: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: unstorableText },
  { weight: 3, arbitrary: oddText },
  { weight: 2, arbitrary: oddNumber },
  { weight: 2, arbitrary: wrongType },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 12 }) },
);

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;
/** Whether a value holds text (as a value or an object key, at any depth) that no field may hold. */
function holdsUnstorableText(value: unknown): boolean {
  if (typeof value === "string") return LONE_SURROGATE.test(value) || CONTROL.test(value) || value.length > 10_000;
  if (Array.isArray(value)) return value.some(holdsUnstorableText);
  if (value && typeof value === "object") return Object.entries(value).some(([k, v]) => holdsUnstorableText(k) || holdsUnstorableText(v));
  return false;
}

const leaks: RegExp[] = [/\n\s+at \S+ \(/, /\bSELECT\s+[\w"*., ]+\s+FROM\s/i, /INSERT INTO/i, /violates/i, /SQLSTATE/i, /prisma/i];

// ---- the suite ------------------------------------------------------------------------------------------

describe("one field of a valid C2B body at a time, mutated", () => {
  let gw: TestGateway;
  let api: ReturnType<typeof apiClient>;
  let merchantId: number;
  let apiKey: string;
  let channelId: number;
  let callbackBase: string;
  let seq = 0;
  const prisma = () => gw.gateway.db.prisma;
  const transactionCount = () => prisma().transaction.count({ where: { merchantId } });

  let merchantSite: Server;

  beforeAll(async () => {
    // The merchant's C2B and webhook URLs: accepts everything, so confirmations are forwarded (a job whose
    // payload is the body as sent) and events delivered, as in production.
    merchantSite = createServer((request, response) => {
      request.resume();
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ResultCode: "0", ResultDesc: "Accepted" }));
    });
    await new Promise<void>((resolve) => merchantSite.listen(0, "127.0.0.1", resolve));
    const site = `http://127.0.0.1:${(merchantSite.address() as AddressInfo).port}`;
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", PUBLIC_BASE_URL: "https://pay.gateway.test", WEBHOOK_ALLOW_PRIVATE_URLS: "true" } });
    const merchant = await gw.createMerchant();
    merchantId = merchant.id;
    apiKey = merchant.testKey;
    api = apiClient(gw.url, apiKey);
    const sandbox = await api.post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    expect(sandbox.status, sandbox.text).toBe(201);
    channelId = sandbox.body.channel.id;
    const channel = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: channelId } });
    callbackBase = gw.gateway.services.callbackUrls.of(channel).c2bConfirmation!.replace("https://pay.gateway.test", gw.url).replace(/\/c2b\/confirmation$/, "");
    const registered = await api.post("/api/momo/register-c2b-urls", { payment_channel_id: channelId, confirmation_url: `${site}/confirm`, validation_url: `${site}/validate` });
    expect(registered.status, registered.text).toBe(200);
    expect((await api.post("/v1/webhooks", { url: `${site}/hooks` })).status).toBe(201);
  });
  afterAll(async () => {
    await gw?.close();
    merchantSite?.closeAllConnections();
    await new Promise((resolve) => merchantSite?.close(resolve));
  });

  async function post(url: string, payload: unknown, headers: Record<string, string> = {}) {
    // JSON.stringify writes a lone surrogate as a \udXXX escape, as the fuzz that found these sent it.
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(payload) });
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, json: parseJsonOrUndefined(text) as unknown };
  }

  const confirmation = () => ({
    TransactionType: "Pay Bill",
    TransID: `FZ${(++seq).toString(36).toUpperCase().padStart(8, "0")}`,
    TransTime: "20261125101500",
    TransAmount: "10.00",
    BusinessShortCode: "174379",
    BillRefNumber: "INV-7",
    InvoiceNumber: "",
    OrgAccountBalance: "25.00",
    ThirdPartyTransID: "",
    MSISDN: "254708374149",
    FirstName: "Amina",
    MiddleName: "",
    LastName: "Otieno",
  });
  const confirmationFields = Object.keys(confirmation());

  it("the validation and confirmation callbacks: Daraja's reply shape, a refusal names the field and records nothing", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("c2b/confirmation", "c2b/validation"), fc.constantFrom(...confirmationFields), mutation, async (kind, field, bad) => {
        const body: Record<string, unknown> = { ...confirmation(), [field]: bad };
        const before = await transactionCount();
        const res = await post(`${callbackBase}/${kind}`, body);
        const what = `${kind} ${field}=${JSON.stringify(bad)?.slice(0, 80)} -> ${res.status} ${res.text.slice(0, 300)}`;
        expect(res.status, what).toBeLessThan(500);
        for (const leak of leaks) expect(res.text, what).not.toMatch(leak);
        // Daraja reads only this shape: an acknowledgement or a rejection, never the REST envelope.
        expect(Object.keys(res.json as object).sort(), what).toEqual(["ResultCode", "ResultDesc"]);
        const reply = res.json as { ResultCode: unknown; ResultDesc: string };
        if (holdsUnstorableText(bad)) {
          expect(res.status, what).toBe(400);
          expect(reply.ResultCode, what).toBe(1);
          expect(reply.ResultDesc, what).toMatch(new RegExp(`^Rejected: ${field}\\b`));
        }
        if (res.status >= 400) {
          expect(reply.ResultCode, what).not.toBe(0);
          expect(reply.ResultCode, what).not.toBe("0");
          expect(await transactionCount(), `${what}: a refused callback recorded a transaction`).toBe(before);
        } else if (kind === "c2b/confirmation") {
          expect(reply, what).toEqual({ ResultCode: 0, ResultDesc: "Success" });
          // An acknowledged confirmation is recorded once, as the TransID Daraja sent.
          const recorded = await prisma().transaction.findMany({ where: { merchantId, providerReference: String(body.TransID) } });
          expect(recorded, what).toHaveLength(1);
          // ...for exactly the amount sent: nothing zero, negative or rounded from a fraction of a cent.
          expect(recorded[0]!.amount, what).toBeGreaterThan(0n);
          if (field === "TransAmount") expect(Number(recorded[0]!.amount), what).toBe(Math.round(Number(String(bad).trim()) * 100));
        } else {
          expect(await transactionCount(), `${what}: a validation recorded a transaction`).toBe(before);
        }
      }),
      // The bodies the seeded fuzz found (issue 21), and amounts a lax parser would round or record as nothing.
      { ...params, examples: [["c2b/confirmation", "TransID", "\udfff\ud800"], ["c2b/confirmation", "MSISDN", "\ud800"], ["c2b/confirmation", "TransAmount", 10.555], ["c2b/confirmation", "TransAmount", "0.00"], ["c2b/confirmation", "TransAmount", 0]] },
    );
  });

  const simulation = () => ({ payment_channel_id: channelId, amount: 1000, phone_number: "254708374149", reference: `SIM-${++seq}` });
  const simulationFields = ["payment_channel_id", "amount", "phone_number", "reference"] as const;

  it("POST /api/momo/simulate-c2b: the error envelope naming the field, and a refusal records nothing", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...simulationFields), mutation, async (field, bad) => {
        const body: Record<string, unknown> = { ...simulation(), [field]: bad };
        const before = await transactionCount();
        const res = await post(`${gw.url}/api/momo/simulate-c2b`, body, { "x-api-key": apiKey });
        const what = `${field}=${JSON.stringify(bad)?.slice(0, 80)} -> ${res.status} ${res.text.slice(0, 300)}`;
        expect(res.status, what).toBeLessThan(500);
        for (const leak of leaks) expect(res.text, what).not.toMatch(leak);
        const envelope = res.json as { status?: string; code?: string; message?: string };
        if (holdsUnstorableText(bad)) {
          expect(res.status, what).toBe(400);
          expect(envelope.message, what).toMatch(new RegExp(`^${field}\\b`));
        }
        if (res.status >= 400) {
          expect(envelope.status, what).toBe("error");
          expect(catalogueCodes.has(String(envelope.code)), what).toBe(true);
          expect(typeof envelope.message, what).toBe("string");
          expect(await transactionCount(), `${what}: a refused simulation recorded a transaction`).toBe(before);
        } else {
          expect(envelope.status, what).toBe("success");
          expect(await transactionCount(), what).toBe(before + 1);
        }
      }),
      { ...params, examples: [["reference", "\ud800"], ["phone_number", "\ud800"], ["amount", "1e3"], ["amount", 10.5]] },
    );
  });

  const simulateMutation = `mutation Simulate($input: SimulateC2bInput!) {
    simulateC2b(input: $input) { __typename ... on Error { code message } ... on SimulateC2bPayload { status } }
  }`;
  const graphqlFields = ["paymentChannelId", "amount", "phoneNumber", "reference"] as const;

  it("GraphQL simulateC2b, one input field mutated in variables or written inline: no internal error, a refusal names the field", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...graphqlFields), mutation, fc.boolean(), async (field, bad, inline) => {
        const input: Record<string, unknown> = { paymentChannelId: channelId, amount: 1000, phoneNumber: "254708374149", reference: `GQL-${++seq}`, [field]: bad };
        const before = await transactionCount();
        const payload = inline && typeof bad === "string"
          // A GraphQL string literal carrying the value as is (JSON.stringify escapes a lone surrogate, which GraphQL also reads).
          ? { query: `mutation { simulateC2b(input: { ${Object.entries(input).map(([k, v]) => `${k}: ${JSON.stringify(typeof v === "number" ? v : String(v))}`).join(", ")} }) { __typename ... on Error { code message } } }`.replace(`paymentChannelId: "${channelId}"`, `paymentChannelId: ${channelId}`) }
          : { query: simulateMutation, variables: { input } };
        const res = await post(`${gw.url}/graphql`, payload, { "x-api-key": apiKey });
        const what = `${inline ? "inline" : "variable"} ${field}=${JSON.stringify(bad)?.slice(0, 80)} -> ${res.status} ${res.text.slice(0, 300)}`;
        expect(res.status, what).toBeLessThan(500);
        expect(res.text, what).not.toMatch(/INTERNAL_SERVER_ERROR|Unexpected error/);
        for (const leak of leaks) expect(res.text, what).not.toMatch(leak);
        const result = res.json as { data?: { simulateC2b?: { __typename: string; message?: string } } | null; errors?: { message: string; extensions?: { code?: string } }[] };
        // Inline, a string is only read as text by a String field; elsewhere GraphQL's own validation refuses its type first.
        if (holdsUnstorableText(bad) && (!inline || field === "phoneNumber" || field === "reference")) {
          // Refused before execution, naming where: `input.reference` in variables, `reference` inline.
          const refusal = result.errors?.[0];
          expect(refusal?.extensions?.code, what).toBe("validation_failed");
          expect(refusal?.message, what).toMatch(new RegExp(`^(input\\.)?${field}\\b`));
        }
        if (result.data?.simulateC2b?.__typename !== "SimulateC2bPayload") {
          expect(await transactionCount(), `${what}: a refused simulation recorded a transaction`).toBe(before);
        }
      }),
      { ...params, examples: [["reference", "\ud800", false], ["reference", "\udfff\ud800", true], ["phoneNumber", "\ud800", true]] },
    );
  });

  it("query strings: percent-encoding cannot carry a lone surrogate, a JSON variables parameter can and is refused naming it", async () => {
    // %ED%A0%80 would be a surrogate in UTF-8, which UTF-8 forbids: the text stays as sent, an ordinary search.
    const list = await fetch(`${gw.url}/api/customers/list?search=%ED%A0%80`, { headers: { "x-api-key": apiKey } });
    expect(list.status).toBe(200);
    expect(await list.json()).toMatchObject({ status: "success", data: [], total: 0 });
    const variables = encodeURIComponent(JSON.stringify({ ref: "txn-\ud800" }));
    const query = encodeURIComponent("query($ref: String!) { transaction(reference: $ref) { __typename } }");
    const res = await fetch(`${gw.url}/graphql?query=${query}&variables=${variables}`, { headers: { "x-api-key": apiKey, accept: "application/json" } });
    expect(res.status).toBeLessThan(500);
    expect(await res.json()).toEqual({
      errors: [{ message: "ref: must be valid Unicode: a lone UTF-16 surrogate (such as \\ud800) is not a character", extensions: { code: "validation_failed" } }],
    });
  });

  it("POST /graphql with an unparsable document and Accept: multipart/mixed answers in the envelope or GraphQL's error shape", async () => {
    // Only multipart/mixed accepted: the gateway does not offer it (it answers JSON, or SSE for subscriptions).
    for (const accept of ["multipart/mixed", "multipart/mixed; deferSpec=20220824", "multipart/*"]) {
      const res = await post(`${gw.url}/graphql`, { query: "{" }, { "x-api-key": apiKey, accept });
      expect([res.status, res.json], `${accept}: ${res.text.slice(0, 300)}`).toEqual([406, { status: "error", code: "not_acceptable", message: expect.any(String) }]);
    }
    // Listed beside JSON: JSON, with GraphQL's own error.
    for (const accept of ["multipart/mixed, application/json", "application/json;q=0.9, multipart/mixed"]) {
      const res = await post(`${gw.url}/graphql`, { query: "{" }, { "x-api-key": apiKey, accept });
      expect(res.headers.get("content-type"), `${accept}: ${res.text.slice(0, 300)}`).toMatch(/^application\/json/);
      expect((res.json as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code, accept).toBe("GRAPHQL_PARSE_FAILED");
    }
  });
});
