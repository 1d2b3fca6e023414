import type { CollectionOutcome, HostedPaymentStatus, PayoutResult, SavedCard } from "../types.ts";
import { paystackFailure, paystackMessage, type PaystackResponse } from "./client.ts";

/** Paystack's wire format: its constants, and its objects (transactions, transfers) read as provider-neutral outcomes. */

/** Paystack settles M-Pesa transfers to this bank code (mobile_money recipients in KES). */
export const MPESA_BANK_CODE = "MPESA";
/** The one currency Paystack payouts go out in: they go to M-Pesa numbers. */
export const PAYOUT_CURRENCY = "KES";
/** Paystack's lists take perPage up to 100. */
export const LIST_PAGE_SIZE = 100;

export const text = (value: unknown) => (typeof value === "string" ? value : null);
export const dateOf = (value: unknown) => {
  const at = typeof value === "string" ? new Date(value) : null;
  return at && !Number.isNaN(at.getTime()) ? at : null;
};
/** An amount in subunits as Paystack writes it (a JSON number, or digits); null when it is not one. */
export const bigintOf = (value: unknown) =>
  typeof value === "number" && Number.isSafeInteger(value) ? BigInt(value) : typeof value === "string" && /^\d{1,15}$/.test(value) ? BigInt(value) : null;
/** A Paystack numeric id as text; null when it is not one. */
export const idOf = (value: unknown) => (typeof value === "number" && Number.isSafeInteger(value) ? String(value) : typeof value === "string" && /^\d{1,20}$/.test(value) ? value : null);

/** Kenyan MSISDN 2547XXXXXXXX as Paystack's M-Pesa recipients take it: the local 07XXXXXXXX form. */
export const localKenyanNumber = (msisdn: string) => (msisdn.startsWith("254") ? `0${msisdn.slice(3)}` : msisdn);

/** A month or year Paystack writes as text ("12", "2030"); null when it is not a whole number. */
const wholeNumber = (value: unknown) => {
  const n = typeof value === "number" ? value : typeof value === "string" && /^\d{1,4}$/.test(value.trim()) ? Number(value.trim()) : NaN;
  return Number.isSafeInteger(n) ? n : null;
};

/**
 * A paid card's `authorization` as a card Paystack can charge again; null without its code and signature.
 * exp_month and exp_year arrive as strings, card_type may carry a trailing space ("visa ").
 */
export function readAuthorization(authorization: Record<string, any> | null | undefined): SavedCard | null {
  const token = text(authorization?.authorization_code);
  const signature = text(authorization?.signature);
  if (!token || !signature) return null;
  const brand = (text(authorization?.brand) ?? text(authorization?.card_type) ?? "card").trim().toLowerCase() || "card";
  return {
    token,
    signature,
    brand,
    last4: (text(authorization?.last4) ?? "").slice(-4),
    expMonth: wholeNumber(authorization?.exp_month),
    expYear: wholeNumber(authorization?.exp_year),
    bank: text(authorization?.bank)?.trim() || null,
    reusable: authorization?.reusable === true,
  };
}

/** A transaction's verify data as a provider-neutral status. `abandoned` only means "not paid yet" until the gateway gives up. */
export function readTransactionStatus(data: Record<string, any> | null | undefined): HostedPaymentStatus {
  const status = text(data?.status);
  const message = paystackMessage(data?.gateway_response, "") || status || "";
  let outcome: CollectionOutcome;
  if (status === "success") outcome = { state: "completed", providerReference: data?.id != null ? String(data.id) : null, message: message || "Approved" };
  else if (status === "failed") outcome = { state: "failed", code: "declined", message: message || "The payment failed at Paystack" };
  else if (status === "reversed") outcome = { state: "failed", code: "reversed", message: "The payment was reversed at Paystack" };
  else outcome = { state: "pending" }; // abandoned, ongoing, pending, processing, queued
  return { outcome, amount: bigintOf(data?.amount), currency: text(data?.currency), paymentMethod: text(data?.channel) };
}

/** A transfer's verify (or webhook) data as a payout result; null while Paystack has not settled it. */
export function readTransferResult(data: Record<string, any> | null | undefined): PayoutResult | null {
  const status = text(data?.status);
  const providerReference = text(data?.transfer_code);
  const amount = bigintOf(data?.amount);
  if (status === "success") return { providerRequestId: null, outcome: { state: "completed", providerReference, message: "Transfer successful" }, amount };
  if (status === "failed" || status === "reversed" || status === "rejected" || status === "abandoned") {
    const reason = paystackMessage(data?.reason ?? data?.gateway_response, "");
    return {
      providerRequestId: null,
      outcome: { state: "failed", code: status === "reversed" ? "reversed" : "transfer_failed", message: `The transfer ${status === "reversed" ? "was reversed" : "failed"} at Paystack${reason ? ` (${reason})` : ""}` },
      amount,
    };
  }
  return null; // pending, otp, processing, received, queued
}

/** GET /transaction/verify/:reference's answer (HTTP status and parsed body) as a payment status, or the mapped failure. */
export function readVerifyResponse(response: PaystackResponse, secretKey: string): HostedPaymentStatus {
  if (response.status === 200 && response.body?.status === true) return readTransactionStatus(response.body.data);
  // A reference Paystack does not know (its initialization never got there) has simply not been paid.
  if (response.status === 400 || response.status === 404) return { outcome: { state: "pending" }, amount: null, currency: null, paymentMethod: null };
  throw paystackFailure("payment verification", response, secretKey);
}
