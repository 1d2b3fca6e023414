import { describe, expect, it } from "vitest";
import { GatewayError, ValidationError } from "../../src/errors.ts";
import { matchCallbackPath } from "../../src/modules/callbacks/service.ts";
import { readJsonBody } from "../../src/providers/inbound-json.ts";
import { createMpesaConnector } from "../../src/providers/mpesa/index.ts";
import { buildC2bBody, buildStkCallbackBody } from "../../src/providers/mpesa/wire.ts";
import { createMemoryTokenStore } from "../../src/providers/mpesa/token-store.ts";
import { createPaystackConnector } from "../../src/providers/paystack/index.ts";
import { createSandboxConnector } from "../../src/providers/sandbox/index.ts";
import type { InboundCallback, InboundConnector } from "../../src/providers/types.ts";

/**
 * The inbound side of each connector: which paths it serves, how a callback's bytes become a
 * provider-neutral outcome, and how it is acknowledged or refused in the provider's own reply shape.
 * Payloads as Safaricom and Paystack document them (see /work/shared/notes/providers.md).
 */
const mpesa = createMpesaConnector({ tokenStore: createMemoryTokenStore() }).inbound!;
const sandboxConnector = createSandboxConnector({ stkDelayMs: 1 });
const sandbox = sandboxConnector.inbound!;
const paystack = createPaystackConnector().inbound!;

const at = (segment: string, path: string) => `https://pay.example.com/callbacks/${segment}/abcd${path}`;

function read(inbound: InboundConnector, path: string, body: unknown, params: Record<string, string> = {}): InboundCallback {
  return inbound.read({
    path,
    params,
    rawBody: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
    contentType: "application/json",
    headers: {},
    config: () => {
      throw new Error("Daraja's callbacks need no credentials");
    },
  });
}

function thrown(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (error) {
    if (error instanceof GatewayError) return error;
    throw error;
  }
  throw new Error("expected a refusal");
}

/** Built with the wire module's builders (the sandbox's), in the shapes Safaricom documents; test/unit/daraja-wire.test.ts holds the verbatim samples. */
const STK_SUCCESS = buildStkCallbackBody({
  merchantRequestId: "29115-34620561-1",
  checkoutRequestId: "ws_CO_191220191020363925",
  resultCode: 0,
  resultDesc: "The service request is processed successfully.",
  shillings: 1,
  receipt: "NLJ7RT61SV",
  phoneNumber: "254708374149",
});

/** MSISDN masked, as Daraja may send it: the payment is kept without a phone. */
const C2B = { ...buildC2bBody({ transId: "RKL51ZDR4F", shillings: 5, shortcode: "600966", billRef: "INV-7", phoneNumber: "2547 ***** 126" }), OrgAccountBalance: "25.00" };

const b2cResult = (resultCode: number | string) => ({
  Result: {
    ResultType: 0,
    ResultCode: resultCode,
    ResultDesc: resultCode === 0 || resultCode === "0" ? "The service request is processed successfully." : "The balance is insufficient for the transaction.",
    OriginatorConversationID: "5118-111210482-1",
    ConversationID: "AG_20240706_2010",
    TransactionID: "SG6JQ1WXYZ",
    ResultParameters: { ResultParameter: [{ Key: "TransactionAmount", Value: 10 }, { Key: "TransactionReceipt", Value: "SG6JQ1WXYZ" }, { Key: "TransactionCompletedDateTime", Value: "06.07.2024 22:48:52" }] },
  },
});

describe("Daraja's callbacks (the mpesa connector)", () => {
  it("serves its eleven paths and is handed out as /callbacks/daraja/... (Daraja refuses 'mpesa' in URLs)", () => {
    expect([...mpesa.paths].sort()).toEqual([
      "/b2c/result", "/b2c/status/:reference", "/b2c/timeout", "/balance/result/:reference", "/balance/timeout/:reference", "/c2b/confirmation", "/c2b/validation",
      "/refund/result", "/refund/status/:reference", "/refund/timeout", "/stk",
    ]);
    expect(mpesa.aliases).toEqual(["daraja"]);
    const urls = mpesa.callbackUrls(at);
    expect(urls.collection).toBe("https://pay.example.com/callbacks/daraja/abcd/stk");
    expect(urls.payoutStatusResult?.("po_1")).toBe("https://pay.example.com/callbacks/daraja/abcd/b2c/status/po_1");
    expect(mpesa.webhookUrl).toBeUndefined();
  });

  it("refuses to hand out URLs on a host Daraja would refuse", () => {
    const error = thrown(() => mpesa.callbackUrls((segment, path) => `https://sql.example.com/callbacks/${segment}/abcd${path}`));
    expect(error.message).toBe('PUBLIC_BASE_URL contains "sql", which M-Pesa refuses in callback URLs; serve the gateway from another host name');
  });

  it("an STK result: the collection's outcome, amount in minor units and phone; acknowledged Accepted", () => {
    const callback = read(mpesa, "/stk", STK_SUCCESS);
    expect(callback).toEqual({
      kind: "collection_result",
      result: {
        providerRequestId: "ws_CO_191220191020363925",
        outcome: { state: "completed", providerReference: "NLJ7RT61SV", message: "The service request is processed successfully." },
        amount: 100n,
        phoneNumber: "254708374149",
      },
    });
    expect(mpesa.acknowledge(callback, undefined)).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  });

  it("C2B validation and confirmation keep the payload for the merchant; their replies are Daraja's", () => {
    const validation = read(mpesa, "/c2b/validation", C2B);
    expect(validation).toEqual({ kind: "c2b_validation", payment: { transId: "RKL51ZDR4F", amount: 500n, phoneNumber: null, billRef: "INV-7", shortcode: "600966" }, body: C2B });
    expect(mpesa.acknowledge(validation, { accept: true })).toEqual({ ResultCode: "0", ResultDesc: "Accepted" });
    expect(mpesa.acknowledge(validation, { accept: false, code: "C2B00012" })).toEqual({ ResultCode: "C2B00012", ResultDesc: "Rejected" });
    const confirmation = read(mpesa, "/c2b/confirmation", C2B);
    expect(confirmation.kind).toBe("c2b_confirmation");
    expect(mpesa.acknowledge(confirmation, undefined)).toEqual({ ResultCode: 0, ResultDesc: "Success" });
  });

  it.each([0, "0"])("a B2C result with ResultCode %j completes; acknowledged Accepted", (code) => {
    const callback = read(mpesa, "/b2c/result", b2cResult(code));
    expect(callback).toEqual({
      kind: "payout_result",
      result: { providerRequestId: "5118-111210482-1", outcome: { state: "completed", providerReference: "SG6JQ1WXYZ", message: "The service request is processed successfully." }, amount: 1000n },
    });
    expect(mpesa.acknowledge(callback, undefined)).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  });

  it.each([1, "1"])("a B2C result with ResultCode %j fails with that code", (code) => {
    expect(read(mpesa, "/b2c/result", b2cResult(code))).toMatchObject({ kind: "payout_result", result: { outcome: { state: "failed", code: "1" } } });
  });

  it("a queue timeout names only the request; a Transaction Status answer is read for the payout the path names", () => {
    expect(read(mpesa, "/b2c/timeout", { Result: { ResultCode: "SFC_IC0003", OriginatorConversationID: "5118-1" } })).toEqual({ kind: "payout_timeout", providerRequestId: "5118-1" });
    expect(read(mpesa, "/b2c/timeout", { Result: {} })).toEqual({ kind: "payout_timeout", providerRequestId: null });
    const status = {
      Result: {
        ResultCode: 0, ResultDesc: "The service request is processed successfully.", OriginatorConversationID: "query-id",
        ResultParameters: { ResultParameter: [{ Key: "TransactionStatus", Value: "Completed" }, { Key: "ReceiptNo", Value: "SG6JQ1WXYZ" }, { Key: "Amount", Value: 10 }, { Key: "OriginatorConversationID", Value: "5118-1" }] },
      },
    };
    expect(read(mpesa, "/b2c/status/:reference", status, { reference: "po_1" })).toEqual({
      kind: "payout_status_result",
      reference: "po_1",
      result: { providerRequestId: "5118-1", amount: 1000n, outcome: { state: "completed", providerReference: "SG6JQ1WXYZ", message: "The service request is processed successfully." } },
    });
    // ResultCode 0 only says the query worked: without a TransactionStatus nothing is settled.
    expect(read(mpesa, "/b2c/status/:reference", { Result: { ResultCode: 0 } }, { reference: "po_1" })).toEqual({ kind: "payout_status_result", reference: "po_1", result: null });
  });

  it.each([
    ["/stk", {}, "Body.stkCallback: is required"],
    ["/stk", { Body: { stkCallback: { ResultCode: 0 } } }, "CheckoutRequestID: is required"],
    ["/stk", { Body: { stkCallback: { CheckoutRequestID: "ws_CO_1" } } }, "ResultCode: is required"],
    ["/c2b/confirmation", { ...C2B, TransID: undefined }, "TransID: is required"],
    ["/c2b/validation", { ...C2B, TransAmount: "ten" }, 'TransAmount: must be a positive amount in shillings, e.g. "10.00"'],
    ["/b2c/result", { Result: { ResultDesc: "x" } }, "ResultCode: is required"],
    ["/b2c/result", [], "Result: is required"],
    ["/b2c/status/:reference", { Result: "x" }, "Result: is required"],
    ["/stk", { Body: { stkCallback: { CheckoutRequestID: "ws\u0000", ResultCode: 0 } } }, "Body.stkCallback.CheckoutRequestID: must not contain control characters such as NUL (\\u0000)"],
  ] as [string, unknown, string][])("%s %j is refused in Daraja's shape: %s", (path, body, message) => {
    const error = thrown(() => read(mpesa, path, body));
    expect(error).toBeInstanceOf(ValidationError);
    expect(mpesa.refuse(error)).toEqual({ status: 400, body: { ResultCode: 1, ResultDesc: `Rejected: ${message}` } });
  });

  it("unsafe text in a path parameter is refused by name; errors that are not refusals keep the gateway's envelope", () => {
    const error = thrown(() => read(mpesa, "/b2c/status/:reference", b2cResult(0), { reference: "po_\u0007" }));
    expect(mpesa.refuse(error)?.body).toEqual({ ResultCode: 1, ResultDesc: "Rejected: reference: must not contain control characters such as NUL (\\u0000)" });
    expect(mpesa.refuse(new GatewayError("malformed_json"))).toBeNull();
    expect(mpesa.refuse(new GatewayError("service_unavailable"))).toBeNull();
  });
});

describe("the sandbox speaks Daraja's callbacks under its own name", () => {
  it("answers at /callbacks/sandbox/... and the registered /callbacks/daraja/..., with no URL rule of Daraja's", () => {
    expect(sandbox.aliases).toEqual(["daraja"]);
    expect(sandbox.paths).toEqual(mpesa.paths);
    expect(sandbox.callbackUrls((segment, path) => `https://sql.example.com/callbacks/${segment}/abcd${path}`).collection).toBe("https://sql.example.com/callbacks/sandbox/abcd/stk");
  });

  it("reads a status answer as the simulator sends it (the payout's own result)", () => {
    expect(read(sandbox, "/b2c/status/:reference", b2cResult(0), { reference: "po_1" })).toMatchObject({
      kind: "payout_status_result",
      result: { providerRequestId: "5118-111210482-1", outcome: { state: "completed" } },
    });
    sandboxConnector.momo?.close?.();
    sandboxConnector.payouts?.close?.();
  });
});

describe("Paystack's webhook", () => {
  it("is one URL per channel, the one the merchant pastes; no per-request URLs; refusals keep the gateway's envelope", () => {
    expect(paystack.paths).toEqual([""]);
    expect(paystack.aliases).toEqual([]);
    expect(paystack.maxBodyBytes).toBe(256 * 1024);
    expect(paystack.webhookUrl?.(at)).toBe("https://pay.example.com/callbacks/paystack/abcd");
    expect(paystack.callbackUrls(at)).toEqual({});
    expect(paystack.refuse(new GatewayError("invalid_signature"))).toBeNull();
  });
});

describe("readJsonBody: a JSON callback body read as the gateway's JSON routes read theirs", () => {
  const raw = (text: string) => Buffer.from(text);
  it.each([
    ["application/json", '{"a":1}', { a: 1 }],
    ["application/json; charset=utf-8", '{"a":1}', { a: 1 }],
    ["APPLICATION/JSON", "[1]", [1]],
    ["application/json", '\ufeff{"a":1}', { a: 1 }],
    ["application/json", '{"constructor":{"name":"x"}}', { constructor: { name: "x" } }],
  ])("%s %j -> %j", (type, text, value) => {
    expect(readJsonBody(raw(text), type)).toEqual(value);
  });

  it("no body and no Content-Type is undefined, for the payload's parser to refuse", () => {
    expect(readJsonBody(Buffer.alloc(0), undefined)).toBeUndefined();
  });

  it.each([
    [undefined, "{}", "unsupported_media_type"],
    ["text/plain", "{}", "unsupported_media_type"],
    ["application/jsonx", "{}", "unsupported_media_type"],
    ["application/json", "", "malformed_json"],
    ["application/json", "{nope", "malformed_json"],
    ["application/json", '{"__proto__":{"admin":true}}', "malformed_json"],
    ["application/json", '{"a":{"\\u005f_proto__":{}}}', "malformed_json"],
    ["application/json", '{"constructor":{"prototype":{}}}', "malformed_json"],
  ])("%s %j is %s", (type, text, code) => {
    expect(thrown(() => readJsonBody(raw(text), type)).code).toBe(code);
  });
});

describe("matchCallbackPath", () => {
  const paths = ["/stk", "/b2c/status/:reference", ""];
  it.each([
    ["/stk", { path: "/stk", params: {} }],
    ["", { path: "", params: {} }],
    ["/b2c/status/po_1", { path: "/b2c/status/:reference", params: { reference: "po_1" } }],
    ["/b2c/status/po%2F1", { path: "/b2c/status/:reference", params: { reference: "po/1" } }],
    ["/", null],
    ["/stk/", null],
    ["//stk", null],
    ["/STK", null],
    ["/b2c/status/", null],
    ["/b2c/status/%E0%A4%A", null],
    ["/b2c/status/po_1/x", null],
  ])("%j -> %j", (raw, expected) => {
    expect(matchCallbackPath(paths, raw)).toEqual(expected);
  });

  it("a parameter over Fastify's 100 characters is a 414, as the per-provider routes answered", () => {
    expect(thrown(() => matchCallbackPath(paths, `/b2c/status/${"p".repeat(101)}`)).code).toBe("uri_too_long");
    expect(matchCallbackPath(paths, `/b2c/status/${"p".repeat(100)}`)?.params.reference).toHaveLength(100);
  });
});
