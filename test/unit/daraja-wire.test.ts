import { describe, expect, it } from "vitest";
import { ValidationError } from "../../src/errors.ts";
import {
  b2cResultAck,
  buildB2cResultBody,
  buildC2bBody,
  buildStkCallbackBody,
  c2bConfirmationAck,
  c2bValidationReply,
  nairobiTimestamp,
  parseB2cResultBody,
  parseB2cTimeoutBody,
  parseC2bBody,
  parseStkCallbackBody,
  parseTransactionStatusBody,
  readC2bValidationDecision,
  stkCallbackAck,
  stkPassword,
} from "../../src/providers/mpesa/wire.ts";
import { refusal as anyRefusal } from "../support/refusal.ts";

/**
 * Daraja's wire format as it arrives: the payloads below are the documented ones (notes/providers.md) in
 * the shapes test/fakes/daraja.ts posts. Refusals are ValidationErrors naming the missing field.
 */

/** The error `fn` throws: a ValidationError naming the missing field (failing the test when it throws none). */
const refusal = (fn: () => unknown) => anyRefusal(fn, ValidationError);

const clone = <T>(value: T): T => structuredClone(value);

/** Safaricom's documented STK success callback, verbatim. */
const STK_SUCCESS = {
  Body: {
    stkCallback: {
      MerchantRequestID: "29115-34620561-1",
      CheckoutRequestID: "ws_CO_191220191020363925",
      ResultCode: 0,
      ResultDesc: "The service request is processed successfully.",
      CallbackMetadata: {
        Item: [
          { Name: "Amount", Value: 1.0 },
          { Name: "MpesaReceiptNumber", Value: "NLJ7RT61SV" },
          { Name: "Balance" },
          { Name: "TransactionDate", Value: 20191219102115 },
          { Name: "PhoneNumber", Value: 254708374149 },
        ],
      },
    },
  },
};

const STK_CANCELLED = {
  Body: {
    stkCallback: {
      MerchantRequestID: "29115-34620561-1",
      CheckoutRequestID: "ws_CO_191220191020363925",
      ResultCode: 1032,
      ResultDesc: "Request cancelled by user",
    },
  },
};

describe("STK callback", () => {
  it("reads the documented success: receipt, amount in minor units, phone", () => {
    expect(parseStkCallbackBody(STK_SUCCESS)).toEqual({
      providerRequestId: "ws_CO_191220191020363925",
      outcome: { state: "completed", providerReference: "NLJ7RT61SV", message: "The service request is processed successfully." },
      amount: 100n,
      phoneNumber: "254708374149",
    });
  });

  it("reads items by Name, whatever their order (the fake shuffles them)", () => {
    const body = clone(STK_SUCCESS);
    body.Body.stkCallback.CallbackMetadata.Item.reverse();
    const parsed = parseStkCallbackBody(body);
    expect(parsed.outcome).toEqual({ state: "completed", providerReference: "NLJ7RT61SV", message: "The service request is processed successfully." });
    expect(parsed.amount).toBe(100n);
    expect(parsed.phoneNumber).toBe("254708374149");
  });

  it("takes amounts of several shillings and strings where numbers are documented", () => {
    const body = clone(STK_SUCCESS) as any;
    body.Body.stkCallback.CallbackMetadata.Item = [
      { Name: "PhoneNumber", Value: "254712345678" },
      { Name: "Amount", Value: "1500.00" },
      { Name: "MpesaReceiptNumber", Value: "SGR7ABCDEF" },
    ];
    expect(parseStkCallbackBody(body)).toMatchObject({ amount: 150_000n, phoneNumber: "254712345678", outcome: { providerReference: "SGR7ABCDEF" } });
  });

  it("reads the cancelled callback (1032) as a failure with its code and text, nothing echoed", () => {
    expect(parseStkCallbackBody(STK_CANCELLED)).toEqual({
      providerRequestId: "ws_CO_191220191020363925",
      outcome: { state: "failed", code: "1032", message: "Request cancelled by user" },
      amount: null,
      phoneNumber: null,
    });
  });

  it.each([
    [1, "The balance is insufficient for the transaction."],
    [1037, "DS timeout user cannot be reached"],
    [2001, "The initiator information is invalid."],
    [1019, "Transaction has expired"],
    [17, "Rule limited."],
  ])("reads ResultCode %s as a failure with that code", (code, desc) => {
    const body = clone(STK_CANCELLED);
    body.Body.stkCallback.ResultCode = code;
    body.Body.stkCallback.ResultDesc = desc;
    expect(parseStkCallbackBody(body).outcome).toEqual({ state: "failed", code: String(code), message: desc });
  });

  it.each([
    [0, "completed"],
    ["0", "completed"],
    [1032, "failed"],
    ["1032", "failed"],
  ])("ResultCode %j (number or string) is %s", (code, state) => {
    const body = clone(STK_SUCCESS) as any;
    body.Body.stkCallback.ResultCode = code;
    expect(parseStkCallbackBody(body).outcome.state).toBe(state);
  });

  it("keeps a string code that is not a number (SFC_IC0003)", () => {
    const body = clone(STK_CANCELLED) as any;
    body.Body.stkCallback.ResultCode = "SFC_IC0003";
    expect(parseStkCallbackBody(body).outcome).toMatchObject({ state: "failed", code: "SFC_IC0003" });
  });

  it("ignores keys it does not know, at every level", () => {
    const body = clone(STK_SUCCESS) as any;
    body.Extra = { x: 1 };
    body.Body.Extra = "y";
    body.Body.stkCallback.Surprise = [1, 2];
    body.Body.stkCallback.CallbackMetadata.Item.push({ Name: "NewField", Value: "z" }, null, "junk");
    expect(parseStkCallbackBody(body)).toEqual(parseStkCallbackBody(STK_SUCCESS));
  });

  it("a success without CallbackMetadata is still a success, with nothing echoed to check", () => {
    const body = clone(STK_SUCCESS) as any;
    delete body.Body.stkCallback.CallbackMetadata;
    expect(parseStkCallbackBody(body)).toEqual({
      providerRequestId: "ws_CO_191220191020363925",
      outcome: { state: "completed", providerReference: null, message: "The service request is processed successfully." },
      amount: null,
      phoneNumber: null,
    });
  });

  it("an Amount that is not a shilling amount reads as no amount (the stored amount check then refuses it)", () => {
    for (const value of [1.555, "ten", -5, null]) {
      const body = clone(STK_SUCCESS) as any;
      body.Body.stkCallback.CallbackMetadata.Item[0] = { Name: "Amount", Value: value };
      expect(parseStkCallbackBody(body).amount, String(value)).toBeNull();
    }
  });

  it("a CallbackMetadata.Item that is not a list reads as no items", () => {
    const body = clone(STK_SUCCESS) as any;
    body.Body.stkCallback.CallbackMetadata.Item = { Name: "Amount", Value: 1 };
    expect(parseStkCallbackBody(body)).toMatchObject({ amount: null, phoneNumber: null, outcome: { providerReference: null } });
  });

  it("a missing ResultDesc is an empty message", () => {
    const body = clone(STK_CANCELLED) as any;
    delete body.Body.stkCallback.ResultDesc;
    expect(parseStkCallbackBody(body).outcome).toEqual({ state: "failed", code: "1032", message: "" });
  });

  it.each([null, undefined, "text", 42, [], {}, { Body: null }, { Body: {} }, { Body: { stkCallback: [] } }, { Body: { stkCallback: "x" } }, { body: { stkCallback: {} } }])(
    "refuses %j as no Body.stkCallback",
    (body) => {
      const error = refusal(() => parseStkCallbackBody(body));
      expect(error.field).toBe("Body.stkCallback");
      expect(error.message).toBe("Body.stkCallback: is required");
    },
  );

  it.each([undefined, null, "", {}, [], true])("refuses CheckoutRequestID %j", (value) => {
    const body = clone(STK_SUCCESS) as any;
    body.Body.stkCallback.CheckoutRequestID = value;
    expect(refusal(() => parseStkCallbackBody(body)).field).toBe("CheckoutRequestID");
  });

  it.each([undefined, null, {}, [], true, Number.NaN])("refuses ResultCode %j", (value) => {
    const body = clone(STK_SUCCESS) as any;
    body.Body.stkCallback.ResultCode = value;
    const error = refusal(() => parseStkCallbackBody(body));
    expect(error.field).toBe("ResultCode");
    expect(error.message).toBe("ResultCode: is required");
  });

  it("reads what the sandbox connector builds, with the same values (they share this format)", () => {
    const at = new Date("2024-07-06T19:48:52Z");
    const body = buildStkCallbackBody({
      merchantRequestId: "m-1",
      checkoutRequestId: "ws_CO_1",
      resultCode: 0,
      resultDesc: "ok",
      shillings: 250,
      receipt: "SBX123",
      phoneNumber: "254708374149",
      at,
    });
    expect(body.Body.stkCallback.CallbackMetadata).toEqual({
      Item: [
        { Name: "Amount", Value: 250 },
        { Name: "MpesaReceiptNumber", Value: "SBX123" },
        { Name: "Balance" },
        { Name: "TransactionDate", Value: 20240706224852 },
        { Name: "PhoneNumber", Value: 254708374149 },
      ],
    });
    expect(parseStkCallbackBody(body)).toEqual({
      providerRequestId: "ws_CO_1",
      outcome: { state: "completed", providerReference: "SBX123", message: "ok" },
      amount: 25_000n,
      phoneNumber: "254708374149",
    });
    const failed = buildStkCallbackBody({ merchantRequestId: "m-2", checkoutRequestId: "ws_CO_2", resultCode: 1032, resultDesc: "Request cancelled by user" });
    expect(failed.Body.stkCallback).not.toHaveProperty("CallbackMetadata");
    expect(parseStkCallbackBody(failed).outcome).toEqual({ state: "failed", code: "1032", message: "Request cancelled by user" });
  });

  it("is acknowledged as Daraja expects", () => {
    expect(stkCallbackAck()).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  });
});

describe("STK request credentials", () => {
  it("timestamps in Nairobi time (UTC+3), YYYYMMDDHHmmss", () => {
    expect(nairobiTimestamp(new Date("2019-12-19T07:21:15Z"))).toBe("20191219102115");
    expect(nairobiTimestamp(new Date("2023-12-31T22:30:00Z"))).toBe("20240101013000");
  });

  it("the password is base64(shortcode + passkey + timestamp), as Daraja's sandbox example", () => {
    const passkey = "bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919";
    const password = stkPassword("174379", passkey, "20191219102115");
    expect(Buffer.from(password, "base64").toString()).toBe(`174379${passkey}20191219102115`);
    expect(password).toBe(
      "MTc0Mzc5YmZiMjc5ZjlhYTliZGJjZjE1OGU5N2RkNzFhNDY3Y2QyZTBjODkzMDU5YjEwZjc4ZTZiNzJhZGExZWQyYzkxOTIwMTkxMjE5MTAyMTE1",
    );
  });
});

/** The documented C2B validation/confirmation payload. */
const C2B = {
  TransactionType: "Pay Bill",
  TransID: "RKL51ZDR4F",
  TransTime: "20231121121325",
  TransAmount: "5.00",
  BusinessShortCode: "600966",
  BillRefNumber: "INV-42",
  InvoiceNumber: "",
  OrgAccountBalance: "25.00",
  ThirdPartyTransID: "",
  MSISDN: "2547 ***** 126",
  FirstName: "John",
  MiddleName: "",
  LastName: "",
};

describe("C2B validation and confirmation", () => {
  it("reads the documented payload; a masked MSISDN is no phone number", () => {
    expect(parseC2bBody(C2B)).toEqual({ transId: "RKL51ZDR4F", amount: 500n, phoneNumber: null, billRef: "INV-42", shortcode: "600966" });
  });

  it.each([
    ["254708374149", "254708374149"],
    ["0708374149", "254708374149"],
    [254712345678, "254712345678"],
    ["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", null], // hashed
    ["", null],
    [undefined, null],
  ])("MSISDN %j is phone %j", (msisdn, phone) => {
    expect(parseC2bBody({ ...C2B, MSISDN: msisdn }).phoneNumber).toBe(phone);
  });

  it.each([
    ["1.00", 100n],
    ["250000.00", 25_000_000n],
    [10, 1000n],
    ["12.5", 1250n],
  ])("TransAmount %j is %s minor units", (amount, minor) => {
    expect(parseC2bBody({ ...C2B, TransAmount: amount }).amount).toBe(minor);
  });

  it.each(["0.00", 0, "-5.00", "5.555", "five", "", null, undefined, {}])("refuses TransAmount %j", (amount) => {
    const error = refusal(() => parseC2bBody({ ...C2B, TransAmount: amount }));
    expect(error.field).toBe("TransAmount");
    expect(error.message).toBe('TransAmount: must be a positive amount in shillings, e.g. "10.00"');
  });

  it.each([undefined, null, "", {}])("refuses TransID %j", (transId) => {
    expect(refusal(() => parseC2bBody({ ...C2B, TransID: transId })).field).toBe("TransID");
  });

  it.each([null, "text", 5, []])("refuses %j as no payload", (body) => {
    const error = refusal(() => parseC2bBody(body));
    expect(error.field).toBe("body");
  });

  it("numbers where strings are documented, missing optional fields, and unknown keys are read as text or ignored", () => {
    const { BillRefNumber: _b, ...withoutBillRef } = C2B;
    expect(parseC2bBody({ ...withoutBillRef, BusinessShortCode: 600966, Unknown: { a: 1 } })).toEqual({
      transId: "RKL51ZDR4F",
      amount: 500n,
      phoneNumber: null,
      billRef: "",
      shortcode: "600966",
    });
  });

  it("reads what the sandbox connector builds", () => {
    const body = buildC2bBody({ transId: "SBX1", shillings: 1500, shortcode: "174379", billRef: "acct", phoneNumber: "254708374149", at: new Date("2023-11-21T09:13:25Z") });
    expect(body.TransAmount).toBe("1500.00");
    expect(body.TransTime).toBe("20231121121325");
    expect(parseC2bBody(body)).toEqual({ transId: "SBX1", amount: 150_000n, phoneNumber: "254708374149", billRef: "acct", shortcode: "174379" });
  });

  it("answers validation with \"0\" to accept or the C2B000xx code to reject, and acknowledges confirmations", () => {
    expect(c2bValidationReply({ accept: true })).toEqual({ ResultCode: "0", ResultDesc: "Accepted" });
    expect(c2bValidationReply({ accept: false, code: "C2B00012" })).toEqual({ ResultCode: "C2B00012", ResultDesc: "Rejected" });
    expect(c2bConfirmationAck()).toEqual({ ResultCode: 0, ResultDesc: "Success" });
  });

  it.each([
    [{ ResultCode: "0", ResultDesc: "Accepted" }, { accept: true }],
    [{ ResultCode: 0 }, { accept: true }],
    [{ ResultCode: "C2B00011", ResultDesc: "Rejected" }, { accept: false, code: "C2B00011" }],
    [{ ResultCode: "C2B00016" }, { accept: false, code: "C2B00016" }],
  ])("reads the merchant's validation answer %j", (answer, decision) => {
    expect(readC2bValidationDecision(answer)).toEqual(decision);
  });

  it.each([{ ResultCode: "C2B00010" }, { ResultCode: "C2B00017" }, { ResultCode: "1" }, { ResultCode: "c2b00011" }, { ResultCode: "C2B000111" }, {}, null, "0", []])(
    "%j is no validation answer",
    (answer) => {
      expect(readC2bValidationDecision(answer)).toBeNull();
    },
  );
});

/** A B2C Result in the shape test/fakes/daraja.ts posts (and notes/providers.md documents). */
const B2C_PAID = {
  Result: {
    ResultType: 0,
    ResultCode: 0,
    ResultDesc: "The service request is processed successfully.",
    OriginatorConversationID: "po-ocid-1",
    ConversationID: "AG_20240706_2010",
    TransactionID: "SG67AB12CD",
    ResultParameters: {
      ResultParameter: [
        { Key: "TransactionAmount", Value: 10 },
        { Key: "TransactionReceipt", Value: "SG67AB12CD" },
        { Key: "ReceiverPartyPublicName", Value: "254708374149 - John Doe" },
        { Key: "TransactionCompletedDateTime", Value: "06.07.2024 22:48:52" },
        { Key: "B2CUtilityAccountAvailableFunds", Value: 9990 },
        { Key: "B2CWorkingAccountAvailableFunds", Value: 900_000 },
        { Key: "B2CRecipientIsRegisteredCustomer", Value: "Y" },
        { Key: "B2CChargesPaidAccountAvailableFunds", Value: 0 },
      ],
    },
    ReferenceData: { ReferenceItem: { Key: "QueueTimeoutURL", Value: "https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit" } },
  },
};

const B2C_FAILED = {
  Result: {
    ResultType: 0,
    ResultCode: 2001,
    ResultDesc: "The initiator information is invalid.",
    OriginatorConversationID: "po-ocid-2",
    ConversationID: "AG_20240706_2011",
    TransactionID: "SG60000000",
    ReferenceData: { ReferenceItem: { Key: "QueueTimeoutURL", Value: "https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit" } },
  },
};

describe("B2C result", () => {
  it("reads a paid result: the request id, the receipt, the amount sent in minor units", () => {
    expect(parseB2cResultBody(B2C_PAID)).toEqual({
      providerRequestId: "po-ocid-1",
      outcome: { state: "completed", providerReference: "SG67AB12CD", message: "The service request is processed successfully." },
      amount: 1000n,
    });
  });

  it("reads a failed result, which carries no ResultParameters", () => {
    expect(parseB2cResultBody(B2C_FAILED)).toEqual({
      providerRequestId: "po-ocid-2",
      outcome: { state: "failed", code: "2001", message: "The initiator information is invalid." },
      amount: null,
    });
  });

  it.each([
    [0, "completed"],
    ["0", "completed"],
    [2001, "failed"],
    ["2001", "failed"],
  ])("ResultCode %j (number or string) is %s", (code, state) => {
    const body = clone(B2C_PAID) as any;
    body.Result.ResultCode = code;
    expect(parseB2cResultBody(body).outcome.state).toBe(state);
  });

  it("reads parameters by Key, in any order, and a single parameter given as an object", () => {
    const reversed = clone(B2C_PAID);
    reversed.Result.ResultParameters.ResultParameter.reverse();
    expect(parseB2cResultBody(reversed)).toEqual(parseB2cResultBody(B2C_PAID));
    const single = clone(B2C_PAID) as any;
    single.Result.ResultParameters.ResultParameter = { Key: "TransactionAmount", Value: "250.00" };
    expect(parseB2cResultBody(single)).toEqual({
      providerRequestId: "po-ocid-1",
      outcome: { state: "completed", providerReference: "SG67AB12CD", message: "The service request is processed successfully." },
      amount: 25_000n,
    });
  });

  it("takes the receipt from TransactionReceipt, else ReceiptNo, else TransactionID", () => {
    const body = clone(B2C_PAID) as any;
    body.Result.ResultParameters.ResultParameter = [{ Key: "ReceiptNo", Value: "RCPT2" }, { Key: "Amount", Value: 10 }];
    expect(parseB2cResultBody(body).outcome).toMatchObject({ providerReference: "RCPT2" });
    expect(parseB2cResultBody(body).amount).toBe(1000n);
    delete body.Result.ResultParameters;
    expect(parseB2cResultBody(body)).toMatchObject({ outcome: { providerReference: "SG67AB12CD" }, amount: null });
  });

  it("a result naming no request has a null request id (it then matches no payout)", () => {
    const body = clone(B2C_PAID) as any;
    delete body.Result.OriginatorConversationID;
    expect(parseB2cResultBody(body).providerRequestId).toBeNull();
  });

  it("ignores keys it does not know", () => {
    const body = clone(B2C_PAID) as any;
    body.Result.NewThing = { a: 1 };
    body.Extra = true;
    body.Result.ResultParameters.ResultParameter.push({ Key: "Unknown", Value: "x" }, null, 7);
    expect(parseB2cResultBody(body)).toEqual(parseB2cResultBody(B2C_PAID));
  });

  it.each([null, "x", [], {}, { Result: null }, { Result: [] }, { Result: "x" }, { result: B2C_PAID.Result }])("refuses %j as no Result", (body) => {
    const error = refusal(() => parseB2cResultBody(body));
    expect(error.field).toBe("Result");
    expect(error.message).toBe("Result: is required");
  });

  it.each([undefined, null, {}, false])("refuses ResultCode %j", (code) => {
    const body = clone(B2C_PAID) as any;
    body.Result.ResultCode = code;
    expect(refusal(() => parseB2cResultBody(body)).field).toBe("ResultCode");
  });

  it("reads what the sandbox connector builds", () => {
    const paid = buildB2cResultBody({ originatorConversationId: "o1", conversationId: "c1", transactionId: "T1", resultCode: 0, resultDesc: "ok", shillings: 75 });
    expect(parseB2cResultBody(paid)).toEqual({ providerRequestId: "o1", outcome: { state: "completed", providerReference: "T1", message: "ok" }, amount: 7500n });
    const failed = buildB2cResultBody({ originatorConversationId: "o2", conversationId: "c2", transactionId: "", resultCode: 1, resultDesc: "insufficient", shillings: 75 });
    expect(failed.Result).not.toHaveProperty("ResultParameters");
    expect(parseB2cResultBody(failed)).toEqual({ providerRequestId: "o2", outcome: { state: "failed", code: "1", message: "insufficient" }, amount: null });
  });

  it("is acknowledged as Daraja expects", () => {
    expect(b2cResultAck()).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  });
});

describe("B2C queue timeout", () => {
  /** What QueueTimeOutURL receives (test/fakes/daraja.ts b2cTimeoutBody). */
  const TIMEOUT = {
    Result: {
      ResultType: 0,
      ResultCode: "SFC_IC0003",
      ResultDesc: "The service request timed out.",
      OriginatorConversationID: "po-ocid-3",
      ConversationID: "AG_20240706_2012",
      TransactionID: "",
    },
  };

  it("names the request whose outcome is now unknown, and nothing else (it is not a failure)", () => {
    expect(parseB2cTimeoutBody(TIMEOUT)).toBe("po-ocid-3");
  });

  it.each([
    [{ Result: { ...TIMEOUT.Result, OriginatorConversationID: undefined } }],
    [{ Result: { ...TIMEOUT.Result, OriginatorConversationID: 12345 } }],
    [{ Result: "po-ocid-3" }],
    [{ Result: [TIMEOUT.Result] }],
    [{ OriginatorConversationID: "po-ocid-3" }],
    [null],
    ["text"],
    [[]],
  ])("%j names no request", (body) => {
    expect(parseB2cTimeoutBody(body)).toBeNull();
  });
});

/** A Transaction Status result (test/fakes/daraja.ts statusResultBody): the top-level ids are the query's. */
function statusResult(payout: { status?: string; reason?: string; code?: number | string } = {}) {
  return {
    Result: {
      ResultType: 0,
      ResultCode: payout.code ?? 0,
      ResultDesc: "The service request is processed successfully.",
      OriginatorConversationID: "query-ocid",
      ConversationID: "AG_query",
      TransactionID: "SG60000000",
      ResultParameters: {
        ResultParameter: [
          { Key: "DebitPartyName", Value: "600000 - Fake B2C" },
          { Key: "CreditPartyName", Value: "254708374149 - John Doe" },
          { Key: "OriginatorConversationID", Value: "po-ocid-1" },
          { Key: "InitiatedTime", Value: 20240706224852 },
          { Key: "DebitAccountType", Value: "Utility Account" },
          { Key: "DebitPartyCharges", Value: "Fee For B2C Payment|KES|22.40" },
          payout.reason ? { Key: "TransactionReason", Value: payout.reason } : { Key: "TransactionReason" },
          { Key: "ReasonType", Value: "Business Payment to Customer via API" },
          { Key: "TransactionStatus", Value: payout.status ?? "Completed" },
          { Key: "FinalisedTime", Value: 20240706224852 },
          { Key: "Amount", Value: 10 },
          { Key: "ConversationID", Value: "AG_20240706_2010" },
          { Key: "ReceiptNo", Value: "SG67AB12CD" },
        ],
      },
      ReferenceData: { ReferenceItem: { Key: "Occasion", Value: "" } },
    },
  };
}

describe("Transaction Status result", () => {
  it("a Completed payout: the payout's request id and receipt from ResultParameters, not the query's", () => {
    expect(parseTransactionStatusBody(statusResult())).toEqual({
      providerRequestId: "po-ocid-1",
      outcome: { state: "completed", providerReference: "SG67AB12CD", message: "The service request is processed successfully." },
      amount: 1000n,
    });
  });

  it.each(["Failed", "Expired", "Cancelled", "Declined"])("a %s payout is failed with that status as its code and the reason as message", (status) => {
    expect(parseTransactionStatusBody(statusResult({ status, reason: "The initiator information is invalid." }))).toEqual({
      providerRequestId: "po-ocid-1",
      outcome: { state: "failed", code: status, message: "The initiator information is invalid." },
      amount: 1000n,
    });
  });

  it("ResultCode \"0\" as a string is the same as 0", () => {
    expect(parseTransactionStatusBody(statusResult({ code: "0" }))).toEqual(parseTransactionStatusBody(statusResult({ code: 0 })));
  });

  it.each(["Pending", "Processing", "", "completed"])("TransactionStatus %j settles nothing", (status) => {
    expect(parseTransactionStatusBody(statusResult({ status }))).toBeNull();
  });

  it("a query that failed (R000001, or any non-zero code, string or number) settles nothing", () => {
    expect(parseTransactionStatusBody({ Result: { ResultType: 0, ResultCode: "R000001", ResultDesc: "The transaction does not exist", OriginatorConversationID: "query-ocid", TransactionID: "SFX0000000" } })).toBeNull();
    expect(parseTransactionStatusBody(statusResult({ code: 2001 }))).toBeNull();
    expect(parseTransactionStatusBody(statusResult({ code: "1" }))).toBeNull();
  });

  it("no ResultParameters: nothing to settle", () => {
    expect(parseTransactionStatusBody({ Result: { ResultCode: 0, ResultDesc: "ok" } })).toBeNull();
  });

  it.each([null, {}, { Result: null }, { Result: [] }])("refuses %j as no Result", (body) => {
    expect(refusal(() => parseTransactionStatusBody(body)).field).toBe("Result");
  });
});
