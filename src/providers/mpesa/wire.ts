import { ValidationError } from "../../errors.ts";
import { currencies, formatMoney, isKnownCurrency } from "../../money.ts";
import { kenyanMobileOrNull, toMsisdn } from "../../phone.ts";
import type { AccountBalanceResult, C2bPayment, CollectionCallback, PayoutResult, ProviderAccountBalance, RefundResult } from "../types.ts";

/**
 * Daraja's wire format: field names, units and timestamps. Shared by the mpesa connector and the
 * sandbox connector (which speaks the same callback format without a network).
 */

export const MAX_STK_SHILLINGS = 250_000;

/** Words Daraja refuses anywhere in a callback URL (any case). */
export const darajaForbiddenUrlWords = ["mpesa", "safaricom", "exe", "exec", "cmd", "sql", "query"] as const;

/** YYYYMMDDHHmmss in Africa/Nairobi time (UTC+3 all year, no daylight saving). */
export function nairobiTimestamp(at = new Date()): string {
  return new Date(at.getTime() + 3 * 60 * 60 * 1000).toISOString().replace(/[-:T]/g, "").slice(0, 14);
}

export function stkPassword(shortcode: string, passkey: string, timestamp: string): string {
  return Buffer.from(`${shortcode}${passkey}${timestamp}`).toString("base64");
}

/** M-Pesa's currency, and Daraja's own words for a push that expired unanswered and for a C2B payment refused by default. */
export const MPESA_CURRENCY = "KES";
export const STK_EXPIRED = { state: "failed", code: "1019", message: "The STK push expired with no answer from the customer" } as const;
export const C2B_DEFAULT_REJECT_CODE = "C2B00016";
/** The momo connector's constants, shared by Daraja's connector and the sandbox that plays it. */
export const MPESA_MOMO_CONSTANTS = { currency: MPESA_CURRENCY, expiredPush: STK_EXPIRED, c2bDefaultRejectCode: C2B_DEFAULT_REJECT_CODE } as const;

/** Daraja's B2C bounds: whole shillings, KES 10 to 250,000 per payment. */
export const MIN_B2C_SHILLINGS = 10;
export const MAX_B2C_SHILLINGS = 250_000;

/** Minor units -> whole shillings within an M-Pesa operation's bounds; a 400 naming the field otherwise. */
function toShillings(amount: bigint, currency: string, bounds: { min: number; max: number; payout: boolean }, field: string): number {
  if (currency !== MPESA_CURRENCY || !isKnownCurrency(currency)) throw new ValidationError("currency", `M-Pesa ${bounds.payout ? "pays out" : "collects"} only KES`);
  const unit = 10n ** BigInt(currencies.KES.exponent);
  if (amount % unit !== 0n) {
    throw new ValidationError(field, `must be a whole number of shillings for M-Pesa: ${formatMoney(amount, MPESA_CURRENCY)} has cents (in minor units a multiple of ${unit}: 150000 is KES 1,500.00)`);
  }
  const shillings = amount / unit;
  if (shillings < BigInt(bounds.min) || shillings > BigInt(bounds.max)) {
    throw new ValidationError(
      field,
      `must be between ${formatMoney(BigInt(bounds.min) * unit, MPESA_CURRENCY)} and ${formatMoney(BigInt(bounds.max) * unit, MPESA_CURRENCY)} for ${bounds.payout ? "an M-Pesa payout" : "M-Pesa"}, not ${formatMoney(amount, MPESA_CURRENCY)}`,
    );
  }
  return Number(shillings);
}

/** M-Pesa collects KES 1 to 250,000 with no cents. */
export function toWholeShillings(amount: bigint, currency: string, field = "amount"): number {
  return toShillings(amount, currency, { min: 1, max: MAX_STK_SHILLINGS, payout: false }, field);
}

export function toB2cShillings(amount: bigint, currency: string, field = "amount"): number {
  return toShillings(amount, currency, { min: MIN_B2C_SHILLINGS, max: MAX_B2C_SHILLINGS, payout: true }, field);
}

/** A decimal shilling amount as Daraja sends it (1, 1.00, "5.00") -> minor units; null when it is not one. */
export function shillingsToMinor(value: unknown): bigint | null {
  // A number with a fraction of a cent (10.555) is not an amount: toFixed would round it into one.
  if (typeof value === "number" && !(Number.isFinite(value) && Math.abs(Math.round(value * 100) - value * 100) < 1e-6)) return null;
  const text = typeof value === "number" ? value.toFixed(2) : typeof value === "string" ? value.trim() : "";
  const match = /^(\d{1,12})(?:\.(\d{1,2}))?$/.exec(text);
  if (!match) return null;
  return BigInt(match[1]!) * 100n + BigInt((match[2] ?? "0").padEnd(2, "0"));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function text(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return null;
}

/** Items are read by Name, never by position; Balance may come without a Value. */
export function parseStkCallbackBody(body: unknown): CollectionCallback {
  const callback = isObject(body) && isObject(body.Body) ? body.Body.stkCallback : undefined;
  if (!isObject(callback)) throw new ValidationError("Body.stkCallback", "is required");
  const checkoutRequestId = text(callback.CheckoutRequestID);
  const resultCode = text(callback.ResultCode);
  if (!checkoutRequestId) throw new ValidationError("CheckoutRequestID", "is required");
  if (resultCode === null) throw new ValidationError("ResultCode", "is required");
  const items = isObject(callback.CallbackMetadata) && Array.isArray(callback.CallbackMetadata.Item) ? callback.CallbackMetadata.Item : [];
  const item = (name: string): unknown => items.find((i): i is Record<string, unknown> => isObject(i) && i.Name === name)?.Value;
  const message = text(callback.ResultDesc) ?? "";
  return {
    providerRequestId: checkoutRequestId,
    outcome: resultCode === "0" ? { state: "completed", providerReference: text(item("MpesaReceiptNumber")), message } : { state: "failed", code: resultCode, message },
    amount: item("Amount") === undefined ? null : shillingsToMinor(item("Amount")),
    phoneNumber: text(item("PhoneNumber")),
  };
}

export function parseC2bBody(body: unknown): C2bPayment {
  if (!isObject(body)) throw new ValidationError("body", "must be a C2B payload");
  const transId = text(body.TransID);
  const amount = shillingsToMinor(body.TransAmount);
  if (!transId) throw new ValidationError("TransID", "is required");
  // M-Pesa moves at least KES 1: a zero amount is no payment, and is not recorded as one.
  if (amount === null || amount <= 0n) throw new ValidationError("TransAmount", "must be a positive amount in shillings, e.g. \"10.00\"");
  const msisdn = text(body.MSISDN);
  return {
    transId,
    amount,
    // MSISDN may be masked ("2547 ***** 126") or hashed: keep it only when it is a plain number.
    phoneNumber: toMsisdn(kenyanMobileOrNull(msisdn)),
    billRef: text(body.BillRefNumber) ?? "",
    shortcode: text(body.BusinessShortCode) ?? "",
  };
}

/**
 * A B2C (or Transaction Status) result: `{"Result":{ResultCode, ResultDesc, OriginatorConversationID,
 * TransactionID, ResultParameters:{ResultParameter:[{Key, Value}]}}}`, parameters read by Key.
 */
export function parseB2cResultBody(body: unknown): PayoutResult {
  const result = isObject(body) ? body.Result : undefined;
  if (!isObject(result)) throw new ValidationError("Result", "is required");
  const resultCode = text(result.ResultCode);
  if (resultCode === null) throw new ValidationError("ResultCode", "is required");
  const parameters = isObject(result.ResultParameters) ? result.ResultParameters.ResultParameter : undefined;
  const list = Array.isArray(parameters) ? parameters : isObject(parameters) ? [parameters] : [];
  const param = (key: string): unknown => list.find((p): p is Record<string, unknown> => isObject(p) && p.Key === key)?.Value;
  const message = text(result.ResultDesc) ?? "";
  const receipt = text(param("TransactionReceipt")) ?? text(param("ReceiptNo")) ?? text(result.TransactionID);
  const amount = param("TransactionAmount") ?? param("Amount");
  return {
    providerRequestId: text(result.OriginatorConversationID),
    outcome: resultCode === "0" ? { state: "completed", providerReference: receipt, message } : { state: "failed", code: resultCode, message },
    amount: amount === undefined ? null : shillingsToMinor(amount),
  };
}

/**
 * A Transaction Status result. Its top-level ids are the query's own; the payout is described in
 * ResultParameters (OriginatorConversationID, ReceiptNo, Amount, TransactionStatus, TransactionReason).
 * ResultCode 0 only says the query worked. Null when it does not establish the payout's outcome.
 */
export function parseTransactionStatusBody(body: unknown): PayoutResult | null {
  const result = isObject(body) ? body.Result : undefined;
  if (!isObject(result)) throw new ValidationError("Result", "is required");
  if (text(result.ResultCode) !== "0") return null;
  const parameters = isObject(result.ResultParameters) ? result.ResultParameters.ResultParameter : undefined;
  const list = Array.isArray(parameters) ? parameters : isObject(parameters) ? [parameters] : [];
  const param = (key: string): unknown => list.find((p): p is Record<string, unknown> => isObject(p) && p.Key === key)?.Value;
  const status = text(param("TransactionStatus"));
  const amount = param("Amount");
  const common = { providerRequestId: text(param("OriginatorConversationID")), amount: amount === undefined ? null : shillingsToMinor(amount) };
  const message = text(param("TransactionReason")) ?? text(result.ResultDesc) ?? "";
  if (status === "Completed") return { ...common, outcome: { state: "completed", providerReference: text(param("ReceiptNo")), message } };
  if (status && ["Failed", "Expired", "Cancelled", "Declined"].includes(status)) return { ...common, outcome: { state: "failed", code: status, message } };
  return null;
}

/**
 * A queue-timeout notice (posted to QueueTimeOutURL when Daraja's queue gives up on a B2C request):
 * `{"Result":{ResultCode:"SFC_IC0003", OriginatorConversationID, ...}}`. The payout's outcome is unknown,
 * not failed, so only the request it names is read; null when it names none.
 */
export function parseB2cTimeoutBody(body: unknown): string | null {
  const requestId = isObject(body) && isObject(body.Result) ? body.Result.OriginatorConversationID : undefined;
  return typeof requestId === "string" ? requestId : null;
}

/**
 * A refund's Result: a Reversal Result (`TransactionID` is the reversal's) or a refund's B2C Result, in the
 * B2C Result's shape. ResultCode 0 completes it, and so does `R000001` ("already reversed": the money went
 * back already; it carries no Amount, so the core applies it only once a status answer confirms it); anything
 * else fails it with that code and ResultDesc.
 */
export function parseRefundResultBody(body: unknown): RefundResult {
  const parsed = parseB2cResultBody(body);
  const result = (body as { Result: Record<string, unknown> }).Result;
  const conversationId = text(result.ConversationID);
  if (parsed.outcome.state === "failed" && parsed.outcome.code === "R000001") {
    return { ...parsed, conversationId, outcome: { state: "completed", providerReference: text(result.TransactionID), message: parsed.outcome.message } };
  }
  return { ...parsed, conversationId };
}

/** A Transaction Status answer about a refund (see parseTransactionStatusBody), with the request's ConversationID from its parameters. */
export function parseRefundStatusBody(body: unknown): RefundResult | null {
  const parsed = parseTransactionStatusBody(body);
  if (!parsed) return null;
  const parameters = (body as { Result: { ResultParameters?: { ResultParameter?: unknown } } }).Result.ResultParameters?.ResultParameter;
  const list = Array.isArray(parameters) ? parameters : isObject(parameters) ? [parameters] : [];
  const conversationId = text(list.find((p): p is Record<string, unknown> => isObject(p) && p.Key === "ConversationID")?.Value);
  return { ...parsed, conversationId };
}

export function buildB2cResultBody(input: { originatorConversationId: string; conversationId: string; transactionId: string; resultCode: number; resultDesc: string; shillings: number }) {
  const parameters =
    input.resultCode === 0
      ? [
          { Key: "TransactionAmount", Value: input.shillings },
          { Key: "TransactionReceipt", Value: input.transactionId },
          { Key: "B2CRecipientIsRegisteredCustomer", Value: "Y" },
        ]
      : [];
  return {
    Result: {
      ResultType: 0,
      ResultCode: input.resultCode,
      ResultDesc: input.resultDesc,
      OriginatorConversationID: input.originatorConversationId,
      ConversationID: input.conversationId,
      TransactionID: input.transactionId,
      ...(parameters.length ? { ResultParameters: { ResultParameter: parameters } } : {}),
    },
  };
}

export const b2cResultAck = () => ({ ResultCode: 0, ResultDesc: "Accepted" });

export const stkCallbackAck = () => ({ ResultCode: 0, ResultDesc: "Accepted" });
export const c2bConfirmationAck = () => ({ ResultCode: 0, ResultDesc: "Success" });

export function c2bValidationReply(decision: { accept: true } | { accept: false; code: string }) {
  return decision.accept ? { ResultCode: "0", ResultDesc: "Accepted" } : { ResultCode: decision.code, ResultDesc: "Rejected" };
}

/** A merchant's validation answer in Daraja's format: "0" accepts, a C2B000xx code rejects. */
export function readC2bValidationDecision(body: unknown): { accept: true } | { accept: false; code: string } | null {
  if (!isObject(body)) return null;
  const code = text(body.ResultCode);
  if (code === "0") return { accept: true };
  if (code && /^C2B000(1[1-6])$/.test(code)) return { accept: false, code };
  return null;
}

/** Builders for Daraja-format payloads, used by the sandbox connector. */
export function buildStkCallbackBody(input: {
  merchantRequestId: string;
  checkoutRequestId: string;
  resultCode: number;
  resultDesc: string;
  shillings?: number;
  receipt?: string;
  phoneNumber?: string;
  at?: Date;
}) {
  const stkCallback: Record<string, unknown> = {
    MerchantRequestID: input.merchantRequestId,
    CheckoutRequestID: input.checkoutRequestId,
    ResultCode: input.resultCode,
    ResultDesc: input.resultDesc,
  };
  if (input.resultCode === 0) {
    stkCallback.CallbackMetadata = {
      Item: [
        { Name: "Amount", Value: input.shillings },
        { Name: "MpesaReceiptNumber", Value: input.receipt },
        { Name: "Balance" },
        { Name: "TransactionDate", Value: Number(nairobiTimestamp(input.at)) },
        { Name: "PhoneNumber", Value: Number(input.phoneNumber) },
      ],
    };
  }
  return { Body: { stkCallback } };
}

export function buildC2bBody(input: { transId: string; shillings: number; shortcode: string; billRef: string; phoneNumber: string; at?: Date }) {
  return {
    TransactionType: "Pay Bill",
    TransID: input.transId,
    TransTime: nairobiTimestamp(input.at),
    TransAmount: input.shillings.toFixed(2),
    BusinessShortCode: input.shortcode,
    BillRefNumber: input.billRef,
    InvoiceNumber: "",
    OrgAccountBalance: "",
    ThirdPartyTransID: "",
    MSISDN: input.phoneNumber,
    FirstName: "Sandbox",
    MiddleName: "",
    LastName: "",
  };
}

/** "453845.00" or "-660.00" (shillings, two decimals at most) as cents; null when it is not such a number. */
function signedShillingsToMinor(value: string): bigint | null {
  const match = /^(-?)(\d{1,15})(?:\.(\d{1,2}))?$/.exec(value.trim());
  if (!match) return null;
  const minor = BigInt(match[2]!) * 100n + BigInt((match[3] ?? "0").padEnd(2, "0"));
  return match[1] ? -minor : minor;
}

/**
 * The AccountBalance result parameter: accounts separated by "&", each
 * "Name|Currency|CurrentBalance|AvailableBalance|ReservedBalance|UnclearedBalance" in shillings
 * (e.g. "Working Account|KES|453845.00|453845.00|0.00|0.00&Utility Account|KES|65602.00|..."). Unreadable parts are skipped.
 */
export function parseAccountBalanceValue(value: string): ProviderAccountBalance[] {
  const accounts: ProviderAccountBalance[] = [];
  for (const part of value.split("&")) {
    const [account, currency, ...figures] = part.split("|").map((x) => x.trim());
    const [current, available, reserved, uncleared] = figures.map(signedShillingsToMinor);
    if (!account || !currency || current == null || available == null) continue;
    accounts.push({ account: account.slice(0, 100), currency: currency.slice(0, 3), current, available, reserved: reserved ?? 0n, uncleared: uncleared ?? 0n });
  }
  return accounts;
}

/** An Account Balance result (on its ResultURL): the accounts, or the failure's code and description. */
export function parseAccountBalanceBody(body: unknown): AccountBalanceResult {
  const result = isObject(body) ? body.Result : undefined;
  if (!isObject(result)) throw new ValidationError("Result", "is required");
  const resultCode = text(result.ResultCode);
  if (resultCode === null) throw new ValidationError("ResultCode", "is required");
  if (resultCode !== "0") return { state: "failed", code: resultCode, message: (text(result.ResultDesc) ?? "").slice(0, 300) };
  const parameters = isObject(result.ResultParameters) ? result.ResultParameters.ResultParameter : undefined;
  const list = Array.isArray(parameters) ? parameters : isObject(parameters) ? [parameters] : [];
  const param = (key: string): unknown => list.find((p): p is Record<string, unknown> => isObject(p) && p.Key === key)?.Value;
  const balance = text(param("AccountBalance"));
  if (balance === null) throw new ValidationError("AccountBalance", "is required in a successful result");
  return { state: "received", accounts: parseAccountBalanceValue(balance), completedAt: text(param("BOCompletedTime")) };
}

/** A queue timeout of an Account Balance request: it was never answered. */
export function accountBalanceTimeout(): AccountBalanceResult {
  return { state: "failed", code: "queue_timeout", message: "M-Pesa's queue timed out before the balance was read" };
}
