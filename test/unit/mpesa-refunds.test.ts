import { describe, expect, it } from "vitest";
import { GatewayError, ValidationError } from "../../src/errors.ts";
import { createMpesaRefunds } from "../../src/providers/mpesa/refunds.ts";
import { parseRefundResultBody, parseRefundStatusBody } from "../../src/providers/mpesa/wire.ts";

/** The M-Pesa refund rail's decisions (which method, or why none) and its Result parsing. */
const result = (code: number | string, extra: Record<string, unknown> = {}) => ({
  Result: { ResultType: 0, ResultCode: code, ResultDesc: `desc ${code}`, OriginatorConversationID: "ocid-1", ConversationID: "AG_1", TransactionID: "SFX1234567", ...extra },
});

describe("parseRefundResultBody", () => {
  it.each([0, "0"])("ResultCode %j completes it with the reversal's TransactionID", (code) => {
    expect(parseRefundResultBody(result(code))).toEqual({
      providerRequestId: "ocid-1",
      conversationId: "AG_1",
      amount: null,
      outcome: { state: "completed", providerReference: "SFX1234567", message: `desc ${code}` },
    });
  });

  it("R000001 (already reversed) completes it", () => {
    expect(parseRefundResultBody(result("R000001")).outcome).toMatchObject({ state: "completed" });
  });

  it.each([2001, "R000002", "21", 1])("ResultCode %j fails it with that code and ResultDesc", (code) => {
    expect(parseRefundResultBody(result(code)).outcome).toEqual({ state: "failed", code: String(code), message: `desc ${code}` });
  });

  it("reads a reversal's Amount and a B2C refund's receipt and amount", () => {
    expect(parseRefundResultBody(result(0, { ResultParameters: { ResultParameter: [{ Key: "Amount", Value: 1500 }] } })).amount).toBe(150_000n);
    const b2c = parseRefundResultBody(result(0, { ResultParameters: { ResultParameter: [{ Key: "TransactionReceipt", Value: "RCP1" }, { Key: "TransactionAmount", Value: 500 }] } }));
    expect(b2c).toMatchObject({ amount: 50_000n, outcome: { providerReference: "RCP1" } });
  });

  it("a status answer carries the request's ConversationID from its parameters; a failed query settles nothing", () => {
    const params = [{ Key: "TransactionStatus", Value: "Completed" }, { Key: "OriginatorConversationID", Value: "ocid-1" }, { Key: "ConversationID", Value: "AG_9" }, { Key: "ReceiptNo", Value: "SFXR" }];
    expect(parseRefundStatusBody(result(0, { ResultParameters: { ResultParameter: params } }))).toMatchObject({ conversationId: "AG_9", providerRequestId: "ocid-1", outcome: { state: "completed", providerReference: "SFXR" } });
    expect(parseRefundStatusBody(result("R000001"))).toBeNull();
  });
});

describe("the M-Pesa refund method", () => {
  const rail = createMpesaRefunds({
    checkAfterMs: 60_000,
    payouts: { canPayOut: (config) => Boolean((config as { initiator_name?: string }).initiator_name), send: async () => ({ providerConversationId: "" }) },
    // Only the rail's choice is tested here: nothing is sent to Daraja.
    client: { request: async () => ({}), securityCredential: () => "" },
  });
  const payment = { reference: "txn_1", amount: 150_000n, currency: "KES", paymentMethod: "momo_stk", providerReference: "RCPT1", phoneNumber: "+254708374149" };
  const withInitiator = { initiator_name: "api" };
  const thrown = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      return error as GatewayError;
    }
    throw new Error("did not throw");
  };

  it("the whole payment: mpesa_reversal of its receipt; a part: mpesa_b2c", () => {
    expect(rail.method(payment, 150_000n, withInitiator)).toEqual({ method: "mpesa_reversal", reverses: payment.providerReference });
    expect(rail.method(payment, 50_000n, withInitiator)).toEqual({ method: "mpesa_b2c" });
  });

  it("a part on a channel that cannot pay out is refused saying why", () => {
    expect(rail.method(payment, 50_000n, {})).toEqual({ refused: expect.stringMatching(/reverses only a whole payment.*initiator_name/) });
  });

  it("no receipt, no initiator, or an amount M-Pesa cannot move: thrown, naming the reason", () => {
    expect(thrown(() => rail.method({ ...payment, providerReference: null }, 150_000n, withInitiator))).toMatchObject({ code: "transaction_not_refundable" });
    expect(thrown(() => rail.method(payment, 150_000n, {}))).toMatchObject({ code: "transaction_not_refundable" });
    expect(thrown(() => rail.method(payment, 50_050n, withInitiator))).toBeInstanceOf(ValidationError);
    expect(thrown(() => rail.method(payment, 500n, withInitiator)).message).toMatch(/^amount: must be between KES 10/);
  });
});
