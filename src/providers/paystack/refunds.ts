import { GatewayError } from "../../errors.ts";
import type { RefundConnector, RefundOutcome, RefundRequest } from "../types.ts";
import { paystackData, paystackFailure, type PaystackClient, type PaystackConfig } from "./client.ts";
import { bigintOf, idOf, LIST_PAGE_SIZE, text } from "./wire.ts";

/**
 * Paystack refunds (method `paystack_refund`, full and partial): `POST /refund`, then `GET /refund/:id`.
 * Field names follow PaystackOSS/openapi (paths/refund.yaml, refund_{id}.yaml and their schemas): the
 * create body is `transaction`, `amount` (subunits), `currency`, `merchant_note`, `customer_note`; a refund
 * is `{id, transaction, amount, currency, status, merchant_note, ...}`; lists answer `{data: [...], meta}`.
 *
 * A refund whose create call went unanswered (a timeout, a 5xx, the process dying mid-call) has no
 * Paystack id yet. It is never sent again: the transaction's refunds are listed (`GET /refund?transaction=`)
 * and ours is the one whose merchant_note carries our reference, which every send writes first in that note.
 * Amount and time cannot tell two equal partial refunds apart, nor ours from one made in Paystack's
 * dashboard; the reference can. None carrying it, once no call of ours can still be in flight: never created.
 */
export interface PaystackRefundDeps {
  /** Its call timeout also says how long a create call of ours may still arrive (plus UNSENT_MARGIN_MS). */
  client: Pick<PaystackClient, "call" | "timeoutMs">;
  checkAfterMs: number;
}

export const PAYSTACK_REFUND_METHOD = "paystack_refund";
/** Beyond the call timeout, before "Paystack has no such refund" is believed: a request Paystack read fully may still be processing. */
export const UNSENT_MARGIN_MS = 5 * 60_000;
/** Paystack's notes are free text; ours stay within the gateway's own 255 (the reference first, so no cut can lose it). */
const NOTE_LIMIT = 255;
const LIST_MAX_PAGES = 20;

/** The merchant_note Paystack is sent: our reference, then the merchant's note. */
export function paystackMerchantNote(reference: string, note: string | null): string {
  return note ? `[${reference}] ${note}`.slice(0, NOTE_LIMIT) : `[${reference}]`;
}

/** What Paystack calls the payment: its transaction id once the gateway recorded it, else the reference it was initialized with. */
const transactionKey = (request: RefundRequest) => request.payment.providerReference ?? request.payment.reference;

/**
 * One Paystack refund object as an outcome: `pending`/`processing` pending, `processed` completed, `failed`
 * failed, `needs-attention` pending with a note (Paystack wants the customer's bank details to finish it).
 */
export function readRefundStatus(data: Record<string, any>): RefundOutcome {
  const providerReference = idOf(data.id);
  const status = text(data.status);
  if (status === "processed") return { state: "completed", providerReference };
  if (status === "failed") {
    const reason = text(data.reason)?.slice(0, 200);
    return { state: "failed", code: "refund_failed", message: `Paystack could not process the refund${reason ? ` (${reason})` : ""}` };
  }
  if (status === "needs-attention") {
    return {
      state: "pending",
      providerReference,
      note: "needs-attention: Paystack could not refund to the payment's source and needs the customer's bank account details; complete it in Paystack's dashboard (Refunds) or with POST /refund/retry_with_customer_details/:id",
    };
  }
  // pending, processing, and anything Paystack adds later: not settled.
  return { state: "pending", providerReference, note: null };
}

export function createPaystackRefunds(deps: PaystackRefundDeps): RefundConnector {
  const { call } = deps.client;
  const configOf = (config: unknown) => config as PaystackConfig;

  /** What Paystack said matches the refund the gateway made; anything else is not applied. */
  function checked(request: RefundRequest, data: Record<string, any>): RefundOutcome {
    const amount = bigintOf(data.amount);
    const currency = text(data.currency);
    if ((amount !== null && amount !== request.amount) || (currency !== null && currency !== request.currency)) {
      throw new GatewayError("provider_error", `Paystack's refund ${idOf(data.id) ?? "?"} is for ${currency ?? "?"} ${amount ?? "?"}, not the ${request.currency} ${request.amount} of ${request.reference}; not applied`);
    }
    return readRefundStatus(data);
  }

  /** Ours among the transaction's refunds at Paystack (by the reference in its merchant_note); null when Paystack has none. */
  async function findOurs(request: RefundRequest): Promise<Record<string, any> | null | "unknown"> {
    const config = configOf(request.config);
    const key = transactionKey(request);
    for (let page = 1; page <= LIST_MAX_PAGES; page++) {
      const query = new URLSearchParams({ transaction: key, perPage: String(LIST_PAGE_SIZE), page: String(page) });
      const response = await call(config, "GET", `/refund?${query}`, "refund lookup");
      // Paystack documents a 404 for a list with nothing in it.
      if (response.status === 404) return null;
      if (!(response.status === 200 && response.body?.status === true && Array.isArray(response.body.data))) {
        if (response.status === 200) throw new GatewayError("provider_unavailable", "Paystack's answer to the refund lookup could not be read");
        throw paystackFailure("refund lookup", response, config.secret_key);
      }
      const items = response.body.data as Record<string, any>[];
      const ours = items.find((item) => {
        // Whatever the filter did, only this payment's refunds count.
        const sameTransaction = idOf(item.transaction) === request.payment.providerReference || text(item.transaction_reference) === request.payment.reference;
        return sameTransaction && (text(item.merchant_note) ?? "").includes(`[${request.reference}]`);
      });
      if (ours) return ours;
      const pageCount = Number(response.body.meta?.pageCount ?? 1);
      if (items.length < LIST_PAGE_SIZE || !(page < pageCount)) return null;
    }
    return "unknown"; // More refunds than we page through: no conclusion.
  }

  return {
    checkAfterMs: deps.checkAfterMs,

    method: () => ({ method: PAYSTACK_REFUND_METHOD }),

    async send(request) {
      const config = configOf(request.config);
      const body: Record<string, unknown> = {
        transaction: transactionKey(request),
        amount: Number(request.amount),
        currency: request.currency,
        merchant_note: paystackMerchantNote(request.reference, request.merchantNote),
      };
      if (request.customerNote) body.customer_note = request.customerNote;
      const data = paystackData(await call(config, "POST", "/refund", "refund", body), "refund", config.secret_key);
      const providerReference = idOf(data.id);
      // Queued but its id unreadable: unknown, so the job finds it by our reference instead.
      if (!providerReference) throw new GatewayError("provider_unavailable", "Paystack's answer to the refund named no refund id");
      const outcome = readRefundStatus(data);
      // Just queued: an answer this early says nothing about a note a later answer may have recorded.
      return outcome.state === "pending" && outcome.note === null ? { state: "pending", providerReference } : outcome;
    },

    async queryStatus(request) {
      const config = configOf(request.config);
      if (request.providerReference) {
        const response = await call(config, "GET", `/refund/${encodeURIComponent(request.providerReference)}`, "refund status query");
        return checked(request, paystackData(response, "refund status query", config.secret_key));
      }
      // Sent, but its answer never recorded: ask what Paystack has before anything else; never send again.
      const ours = await findOurs(request);
      if (ours === "unknown") return { state: "pending" };
      if (ours) return checked(request, ours);
      if (Date.now() - request.createdAt.getTime() < deps.client.timeoutMs + UNSENT_MARGIN_MS) return { state: "pending" };
      return { state: "failed", code: "not_sent", message: "Paystack has no record of this refund: its request never reached Paystack, so nothing was refunded" };
    },
  };
}
