import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { GatewayError } from "../../src/errors.ts";
import { createPaystackConnector } from "../../src/providers/paystack/index.ts";
import { readTransactionStatus, readTransferResult, readVerifyResponse } from "../../src/providers/paystack/wire.ts";
import { paystackSignatureValid, readPaystackNotification } from "../../src/providers/paystack/inbound.ts";
import { paystackMerchantNote, readRefundStatus } from "../../src/providers/paystack/refunds.ts";

/**
 * Paystack's wire format: webhook signatures (hex HMAC-SHA512 of the raw body keyed with the secret key),
 * webhook events, and verify answers ({status, message, data}, amounts in the currency's subunit). Shapes
 * as test/fakes/paystack-api.ts sends them.
 */
const SECRET = "sk_test_4f1e0c3d2b1a09f8e7d6c5b4a3928170";
const sign = (raw: string | Buffer, key = SECRET) => createHmac("sha512", key).update(raw).digest("hex");

/** verify's data for a paid transaction (test/fakes/paystack-api.ts verifyData). */
const PAID = {
  id: 4_000_123,
  domain: "test",
  status: "success",
  reference: "ref_abc123",
  amount: 150_000,
  currency: "KES",
  channel: "card",
  gateway_response: "Successful",
  paid_at: "2024-07-06T19:48:52.000Z",
  created_at: "2024-07-06T19:47:10.000Z",
  authorization: { authorization_code: "AUTH_x", bin: "408408", last4: "4081", exp_month: "12", exp_year: "2030", channel: "card", brand: "visa", reusable: true },
  customer: { id: 181873746, email: "payer@example.com", customer_code: "CUS_fake" },
};

function refusal(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(GatewayError);
    return error as GatewayError;
  }
  throw new Error("expected a refusal, got none");
}

describe("webhook signature (x-paystack-signature)", () => {
  const raw = Buffer.from(JSON.stringify({ event: "charge.success", data: PAID }));

  it("is HMAC-SHA512 as RFC 4231 defines it (test case 2)", () => {
    const data = Buffer.from("what do ya want for nothing?");
    const expected = "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737";
    expect(paystackSignatureValid(data, expected, "Jefe")).toBe(true);
    expect(paystackSignatureValid(data, expected, "jefe")).toBe(false);
  });

  it("accepts the signature of the raw body with the secret key, in either hex case", () => {
    expect(paystackSignatureValid(raw, sign(raw), SECRET)).toBe(true);
    expect(paystackSignatureValid(raw, sign(raw).toUpperCase(), SECRET)).toBe(true);
  });

  it("refuses a tampered body: one byte changed, or the same JSON re-serialized", () => {
    const signature = sign(raw);
    const tampered = Buffer.from(raw.toString().replace("150000", "150001"));
    expect(tampered.equals(raw)).toBe(false);
    expect(paystackSignatureValid(tampered, signature, SECRET)).toBe(false);
    const reformatted = Buffer.from(JSON.stringify(JSON.parse(raw.toString()), null, 2));
    expect(paystackSignatureValid(reformatted, signature, SECRET)).toBe(false);
  });

  it("refuses a signature made with another key (the public key, another merchant's secret)", () => {
    expect(paystackSignatureValid(raw, sign(raw, "pk_test_4f1e0c3d2b1a09f8e7d6c5b4a3928170"), SECRET)).toBe(false);
    expect(paystackSignatureValid(raw, sign(raw, `${SECRET}x`), SECRET)).toBe(false);
  });

  it.each([
    ["missing", undefined],
    ["null", null],
    ["empty", ""],
    ["repeated (an array)", ["a".repeat(128), "b".repeat(128)]],
    ["a SHA-256 length", "a".repeat(64)],
    ["a byte short", "a".repeat(126)],
    ["a byte long", "a".repeat(130)],
    ["not hex", "z".repeat(128)],
    ["padded", ` ${"a".repeat(127)}`],
  ])("refuses a %s header", (_name, header) => {
    expect(paystackSignatureValid(raw, header, SECRET)).toBe(false);
  });

  it("refuses a valid signature with whitespace around it, or prefixed like other providers' headers", () => {
    expect(paystackSignatureValid(raw, ` ${sign(raw)}`, SECRET)).toBe(false);
    expect(paystackSignatureValid(raw, `sha512=${sign(raw)}`, SECRET)).toBe(false);
  });
});

describe("webhook events", () => {
  const notification = (body: unknown, opts: { raw?: string; key?: string } = {}) => {
    const raw = opts.raw ?? JSON.stringify(body);
    return readPaystackNotification(Buffer.from(raw), sign(raw, opts.key), SECRET);
  };

  it("charge.success names the collection by its reference", () => {
    expect(notification({ event: "charge.success", data: PAID })).toEqual({ kind: "collection", reference: "ref_abc123", event: "charge.success" });
  });

  it.each(["charge.failed", "charge.dispute.create"])("other charge events (%s) name the collection too", (event) => {
    expect(notification({ event, data: { reference: "ref_abc123" } })).toEqual({ kind: "collection", reference: "ref_abc123", event });
  });

  it.each(["transfer.success", "transfer.failed", "transfer.reversed"])("%s names the payout by its reference", (event) => {
    expect(notification({ event, data: { reference: "po_0a1b2c", transfer_code: "TRF_x", status: "success" } })).toEqual({ kind: "payout", reference: "po_0a1b2c", event });
  });

  // Paystack's documented refund webhook samples: the payment's transaction_reference, the processor's refund_reference, amount as a string; `id` only on needs-attention.
  it.each(["refund.pending", "refund.processing", "refund.processed", "refund.failed"])("%s names the refunded payment by transaction_reference", (event) => {
    const data = { status: event.slice(7), transaction_reference: "txn-abc", refund_reference: "132013318360", amount: "5000", currency: "NGN", processor: "mpgs_zen", integration: 412829, domain: "live" };
    expect(notification({ event, data })).toEqual({ kind: "refund", event, paymentReference: "txn-abc", providerReference: null });
  });

  it("refund.needs-attention also names the refund by its id", () => {
    const data = { status: "needs-attention", transaction_reference: "txn-abc", refund_reference: "TRF_7jn", amount: 5306, currency: "NGN", id: "123456" };
    expect(notification({ event: "refund.needs-attention", data })).toEqual({ kind: "refund", event: "refund.needs-attention", paymentReference: "txn-abc", providerReference: "123456" });
    expect(notification({ event: "refund.processed", data: { id: 99 } })).toEqual({ kind: "refund", event: "refund.processed", paymentReference: null, providerReference: "99" });
  });

  it("a refund event naming neither the payment nor the refund is nothing to act on", () => {
    expect(notification({ event: "refund.processed", data: { id: "12x", transaction_reference: 5 } })).toEqual({ kind: "other", event: "refund.processed" });
  });

  it("ignores keys it does not know", () => {
    expect(notification({ event: "charge.success", data: { ...PAID, new_field: [1] }, extra: true })).toEqual({ kind: "collection", reference: "ref_abc123", event: "charge.success" });
  });

  it.each([
    [{ event: "charge.success", data: {} }, "charge.success"],
    [{ event: "charge.success", data: { reference: 12345 } }, "charge.success"],
    [{ event: "charge.success" }, "charge.success"],
    [{ event: "subscription.create", data: { reference: "ref_abc123" } }, "subscription.create"],
    [{ data: PAID }, "unknown"],
    [{ event: 7, data: PAID }, "unknown"],
    [[], "unknown"],
    [null, "unknown"],
  ])("%j names nothing to act on (event %j)", (body, event) => {
    expect(notification(body)).toEqual({ kind: "other", event });
  });

  it("a signed body that is not JSON is read as unreadable, not refused", () => {
    expect(notification(null, { raw: "{not json" })).toEqual({ kind: "other", event: "unreadable" });
  });

  it("a body signed with another key is nothing (null), whatever it says", () => {
    expect(notification({ event: "charge.success", data: PAID }, { key: "sk_test_other" })).toBeNull();
  });

  it("the connector reads the x-paystack-signature header with the channel's secret key", () => {
    const inbound = createPaystackConnector().inbound!;
    const raw = JSON.stringify({ event: "charge.success", data: PAID });
    const config = { public_key: "pk_test_x", secret_key: SECRET };
    const read = (headers: Record<string, string | string[] | undefined>) =>
      inbound.read({ path: "", params: {}, rawBody: Buffer.from(raw), contentType: "application/json", headers, config: () => config });
    const collection = read({ "x-paystack-signature": sign(raw) });
    expect(collection).toEqual({ kind: "notification", notification: { kind: "collection", reference: "ref_abc123", event: "charge.success" } });
    for (const headers of [{}, { "x-paystack-signature": sign(raw, "sk_test_other") }, { "x-signature": sign(raw) }]) {
      expect(refusal(() => read(headers)).code).toBe("invalid_signature");
    }
    expect(inbound.acknowledge(collection, undefined)).toEqual({ status: "success" });
  });
});

describe("verify data -> payment status", () => {
  it("success: completed, Paystack's id as the provider reference, the amount in the subunit as sent", () => {
    expect(readTransactionStatus(PAID)).toEqual({
      outcome: { state: "completed", providerReference: "4000123", message: "Successful" },
      amount: 150_000n,
      currency: "KES",
      paymentMethod: "card",
    });
  });

  it("amounts are not converted: kobo stay kobo, cents stay cents", () => {
    expect(readTransactionStatus({ ...PAID, amount: 5_000_050, currency: "NGN" })).toMatchObject({ amount: 5_000_050n, currency: "NGN" });
    expect(readTransactionStatus({ ...PAID, amount: 1, currency: "USD" })).toMatchObject({ amount: 1n, currency: "USD" });
  });

  it("a success without a gateway_response or id still completes", () => {
    const { id: _id, gateway_response: _g, ...bare } = PAID;
    expect(readTransactionStatus(bare).outcome).toEqual({ state: "completed", providerReference: null, message: "success" });
  });

  it("failed is declined, with Paystack's gateway_response as the reason", () => {
    expect(readTransactionStatus({ ...PAID, status: "failed", gateway_response: "Declined" })).toEqual({
      outcome: { state: "failed", code: "declined", message: "Declined" },
      amount: 150_000n,
      currency: "KES",
      paymentMethod: "card",
    });
  });

  it("reversed is a failure with its own code", () => {
    expect(readTransactionStatus({ ...PAID, status: "reversed" }).outcome).toEqual({ state: "failed", code: "reversed", message: "The payment was reversed at Paystack" });
  });

  it.each(["abandoned", "ongoing", "pending", "processing", "queued", "something_new", undefined, 1])("%j is not settled yet (pending)", (status) => {
    expect(readTransactionStatus({ ...PAID, status }).outcome).toEqual({ state: "pending" });
  });

  it("a long gateway_response is cut to 200 characters", () => {
    const outcome = readTransactionStatus({ ...PAID, status: "failed", gateway_response: "x".repeat(500) }).outcome;
    expect(outcome).toMatchObject({ state: "failed", message: "x".repeat(200) });
  });

  it.each([
    ["150000", 150_000n],
    [150_000, 150_000n],
    [0, 0n],
    [1.5, null],
    [-1, -1n], // a negative number is read as given; the amount check against the stored row refuses it
    ["1.50", null],
    ["-1", null],
    ["1234567890123456", null],
    [2 ** 53, null],
    [null, null],
    [undefined, null],
  ])("amount %j reads as %s", (amount, expected) => {
    expect(readTransactionStatus({ ...PAID, amount }).amount).toBe(expected);
  });

  it("odd types for currency and channel read as unknown", () => {
    expect(readTransactionStatus({ ...PAID, currency: 404, channel: { card: true } })).toMatchObject({ currency: null, paymentMethod: null });
  });

  it.each([null, undefined, {}])("no data (%j) is pending with nothing known", (data) => {
    expect(readTransactionStatus(data)).toEqual({ outcome: { state: "pending" }, amount: null, currency: null, paymentMethod: null });
  });
});

describe("verify answer (HTTP status and envelope)", () => {
  it("200 with status true is read from data", () => {
    expect(readVerifyResponse({ status: 200, body: { status: true, message: "Verification successful", data: PAID } }, SECRET)).toEqual(readTransactionStatus(PAID));
  });

  it.each([400, 404])("%s (a reference Paystack does not know) has not been paid: pending", (status) => {
    expect(readVerifyResponse({ status, body: { status: false, message: "Transaction reference not found", code: "transaction_not_found" } }, SECRET)).toEqual({
      outcome: { state: "pending" },
      amount: null,
      currency: null,
      paymentMethod: null,
    });
  });

  it("401: the channel's secret key is wrong", () => {
    const error = refusal(() => readVerifyResponse({ status: 401, body: { status: false, message: "Invalid key" } }, SECRET));
    expect(error.code).toBe("provider_error");
    expect(error.message).toBe("Paystack rejected the channel's secret key for the payment verification; check the payment channel's credentials");
  });

  it.each([
    [429, "Paystack is rate limiting this account; retry the payment verification shortly"],
    [500, "Paystack is unavailable (HTTP 500) for the payment verification"],
    [503, "Paystack is unavailable (HTTP 503) for the payment verification"],
  ])("%s is worth retrying (provider_unavailable)", (status, message) => {
    const error = refusal(() => readVerifyResponse({ status, body: null }, SECRET));
    expect(error.code).toBe("provider_unavailable");
    expect(error.message).toBe(message);
  });

  it("200 whose envelope says status false is a refusal, with Paystack's message", () => {
    const error = refusal(() => readVerifyResponse({ status: 200, body: { status: false, message: "Something odd" } }, SECRET));
    expect(error.code).toBe("provider_error");
    expect(error.message).toBe("Paystack refused the payment verification (HTTP 200: Something odd)");
  });

  it("a message echoing the secret key is blanked", () => {
    const error = refusal(() => readVerifyResponse({ status: 422, body: { status: false, message: `bad key ${SECRET} here` } }, SECRET));
    expect(error.message).toBe("Paystack refused the payment verification (HTTP 422: bad key [redacted] here)");
    expect(error.message).not.toContain(SECRET);
  });
});

describe("transfer verify data -> payout result", () => {
  const TRANSFER = { reference: "po_0a1b2c", transfer_code: "TRF_1ptvuv321ahaa7q", amount: 150_000, currency: "KES", status: "success", reason: "Payout" };

  it("success completes with the transfer code", () => {
    expect(readTransferResult(TRANSFER)).toEqual({
      providerRequestId: null,
      outcome: { state: "completed", providerReference: "TRF_1ptvuv321ahaa7q", message: "Transfer successful" },
      amount: 150_000n,
    });
  });

  it.each([
    ["failed", "transfer_failed", "The transfer failed at Paystack (Payout)"],
    ["rejected", "transfer_failed", "The transfer failed at Paystack (Payout)"],
    ["abandoned", "transfer_failed", "The transfer failed at Paystack (Payout)"],
    ["reversed", "reversed", "The transfer was reversed at Paystack (Payout)"],
  ])("%s fails with code %s", (status, code, message) => {
    expect(readTransferResult({ ...TRANSFER, status })?.outcome).toEqual({ state: "failed", code, message });
  });

  it.each(["pending", "otp", "processing", "received", "queued", undefined])("%j settles nothing yet", (status) => {
    expect(readTransferResult({ ...TRANSFER, status })).toBeNull();
  });

  it("the connector parses a transfer status answer with it, and refuses a posted result (outcomes come from verification)", () => {
    const payouts = createPaystackConnector().payouts!;
    expect(payouts.parseStatusResult(TRANSFER)).toEqual(readTransferResult(TRANSFER));
    expect(payouts.parseStatusResult(null)).toBeNull();
    expect(refusal(() => payouts.parseResult(TRANSFER)).code).toBe("validation_failed");
  });
});

describe("refund data -> refund outcome", () => {
  const refund = (status: string, extra: Record<string, unknown> = {}) => ({ id: 15581137, transaction: 4_000_123, amount: 5000, currency: "NGN", status, merchant_note: "[re_x]", ...extra });

  it.each(["pending", "processing", "reversal-queued"])("%s is pending, with Paystack's id", (status) => {
    expect(readRefundStatus(refund(status))).toEqual({ state: "pending", providerReference: "15581137", note: null });
  });

  it("processed is completed, with Paystack's refund id as the provider reference", () => {
    expect(readRefundStatus(refund("processed"))).toEqual({ state: "completed", providerReference: "15581137" });
  });

  it("failed is refund_failed, with Paystack's reason when it gives one", () => {
    expect(readRefundStatus(refund("failed", { reason: "Card closed" }))).toEqual({ state: "failed", code: "refund_failed", message: "Paystack could not process the refund (Card closed)" });
    expect(readRefundStatus(refund("failed"))).toMatchObject({ message: "Paystack could not process the refund" });
  });

  it("needs-attention stays pending, with a note saying what Paystack needs", () => {
    expect(readRefundStatus(refund("needs-attention"))).toMatchObject({ state: "pending", providerReference: "15581137", note: expect.stringMatching(/^needs-attention: .*bank account details/) });
  });

  it("merchant_note carries our reference first, within 255 characters", () => {
    expect(paystackMerchantNote("re_abc", null)).toBe("[re_abc]");
    expect(paystackMerchantNote("re_abc", "order #7")).toBe("[re_abc] order #7");
    const long = paystackMerchantNote("re_abc", "x".repeat(255));
    expect(long).toHaveLength(255);
    expect(long.startsWith("[re_abc] x")).toBe(true);
  });
});
