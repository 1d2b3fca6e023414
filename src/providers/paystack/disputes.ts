import { GatewayError, ValidationError } from "../../errors.ts";
import type { DisputeConnector, DisputeReason, DisputeState, ProviderDispute } from "../types.ts";
import { paystackFailure, type PaystackClient, type PaystackConfig } from "./client.ts";
import { bigintOf, dateOf, idOf, LIST_PAGE_SIZE, text } from "./wire.ts";

/**
 * Paystack's chargebacks: its dispute object read as a provider-neutral dispute, and the merchant's answers
 * (evidence and `resolve`). Field names as Paystack's samples write them (providers.md, Disputes): `dueAt` and
 * `resolvedAt` in camelCase everywhere, `createdAt` in REST but `created_at` in webhooks.
 */

/** Where an open dispute stands, by Paystack's status. */
const OPEN_STATES: Record<string, DisputeState> = {
  "awaiting-merchant-feedback": "needs_response",
  "awaiting-bank-feedback": "under_review",
  pending: "under_review",
};

/** A message from the bank or Paystack is kept up to this many characters. */
const MESSAGE_LIMIT = 2000;

const objectOf = (value: unknown): Record<string, any> => (value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, any>) : {});
const isoOf = (value: unknown) => dateOf(value)?.toISOString() ?? null;

function stateOf(data: Record<string, any>, transaction: Record<string, any>): DisputeState {
  const status = text(data.status) ?? "";
  if (status !== "resolved" && status !== "archived") return OPEN_STATES[status] ?? "under_review";
  // The payer got the money back (auto-accepted at the deadline shows this): lost, whatever else it says.
  if (text(transaction.status) === "reversed") return "lost";
  const resolution = text(data.resolution);
  // `declined`: the merchant contested and the bank sided with the merchant.
  if (resolution === "declined") return "won";
  if (resolution === "merchant-accepted" || resolution === "auto-accepted") return "lost";
  // Closed without a verdict the gateway can read (Paystack's samples show archived with no resolution): no money
  // decision on a guess; it stays under review and is asked about again.
  return "under_review";
}

function reasonOf(data: Record<string, any>): DisputeReason {
  const said = [data.category, data.reason, data.note].map(text).filter(Boolean).join(" ").toLowerCase();
  if (said.includes("fraud")) return "fraudulent";
  if (/not received|non-receipt|non receipt/.test(said)) return "product_not_received";
  if (said.includes("duplicate")) return "duplicate";
  return "general";
}

function messagesOf(value: unknown): ProviderDispute["messages"] {
  if (!Array.isArray(value)) return [];
  const messages = value
    .filter((item) => item && typeof item === "object")
    .map((item: Record<string, any>) => ({
      sender: text(item.sender) ?? "",
      body: (text(item.body) ?? "").slice(0, MESSAGE_LIMIT),
      createdAt: isoOf(item.createdAt ?? item.created_at),
    }));
  // Oldest first when every message is dated; otherwise as Paystack listed them.
  return messages.every((m) => m.createdAt) ? messages.sort((a, b) => a.createdAt!.localeCompare(b.createdAt!)) : messages;
}

/** A dispute as Paystack's REST answers or webhooks carry it, provider-neutral. */
export function readPaystackDispute(data: Record<string, any>): ProviderDispute {
  const providerReference = idOf(data.id);
  if (!providerReference) throw new GatewayError("provider_unavailable", "Paystack's dispute could not be read (no id)");
  const transaction = objectOf(data.transaction);
  return {
    providerReference,
    paymentReference: text(transaction.reference) ?? text(data.transaction_reference),
    // What the payer claims back; Paystack leaves refund_amount null on some disputes, then it is the whole payment.
    amount: bigintOf(data.refund_amount) ?? bigintOf(transaction.amount),
    currency: text(data.currency) ?? text(transaction.currency),
    reason: reasonOf(data),
    state: stateOf(data, transaction),
    dueBy: dateOf(data.dueAt ?? data.due_at),
    resolvedAt: dateOf(data.resolvedAt ?? data.resolved_at),
    messages: messagesOf(data.messages),
    // Paystack publishes no chargeback fee for Kenya: a lost dispute costs the disputed amount only.
    fee: 0n,
  };
}

/** Paystack takes amounts as JSON numbers in the currency's subunit. */
function subunits(amount: bigint): number {
  if (amount < 0n || amount > BigInt(Number.MAX_SAFE_INTEGER)) throw new ValidationError("amount", "is not an amount Paystack accepts");
  return Number(amount);
}

const disputePath = (providerReference: string) => `/dispute/${encodeURIComponent(providerReference)}`;

export function createPaystackDisputes(client: PaystackClient): DisputeConnector {
  const configOf = (config: unknown) => config as PaystackConfig;

  return {
    async fetch(request) {
      const data = await client.data(configOf(request.config), "GET", disputePath(request.providerReference), "dispute lookup");
      const dispute = readPaystackDispute(data);
      if (dispute.providerReference !== request.providerReference) {
        throw new GatewayError("provider_unavailable", `Paystack answered about dispute ${dispute.providerReference} when asked about ${request.providerReference}`);
      }
      return dispute;
    },

    /**
     * The list filtered by Paystack's transaction id (`GET /dispute?transaction=`), not `/dispute/transaction/:id`:
     * an empty list says plainly "no dispute", where the single-object route's answer for none is undocumented.
     * Paystack lists newest first: the newest dispute on the payment is the one answered.
     */
    async ofPayment({ config: raw, payment }) {
      const config = configOf(raw);
      // Paystack files disputes under its transaction id; a payment it never completed has none.
      if (!payment.providerReference) return null;
      const query = new URLSearchParams({ transaction: payment.providerReference, perPage: String(LIST_PAGE_SIZE), page: "1" });
      const response = await client.call(config, "GET", `/dispute?${query}`, "dispute search");
      // Paystack documents a 404 for some lists with nothing in them.
      if (response.status === 404) return null;
      if (!(response.status === 200 && response.body?.status === true && Array.isArray(response.body.data))) {
        if (response.status === 200) throw new GatewayError("provider_unavailable", "Paystack's answer to the dispute search could not be read");
        throw paystackFailure("dispute search", response, config.secret_key);
      }
      // Whatever the filter did, only this payment's disputes count.
      const ours = (response.body.data as unknown[]).map(objectOf).find((item) => idOf(objectOf(item.transaction).id ?? item.transaction) === payment.providerReference);
      return ours ? readPaystackDispute(ours) : null;
    },

    /** A signed URL from Paystack, then the bytes PUT to it; `resolve` later names the file by the fileName Paystack gave. */
    async uploadFile({ config: raw, providerReference, fileName, contentType, bytes }) {
      const config = configOf(raw);
      const query = new URLSearchParams({ upload_filename: fileName });
      const data = await client.data(config, "GET", `${disputePath(providerReference)}/upload_url?${query}`, "dispute file upload URL");
      const signedUrl = text(data.signedUrl);
      const providerFileName = text(data.fileName);
      if (!signedUrl || !/^https?:\/\//i.test(signedUrl) || !providerFileName) {
        throw new GatewayError("provider_unavailable", "Paystack's answer to the dispute file upload URL could not be read");
      }
      const stored = await client.putFile(config, signedUrl, "dispute file upload", { bytes, contentType });
      if (stored.status < 200 || stored.status >= 300) throw paystackFailure("dispute file upload", stored, config.secret_key);
      return { providerFileName };
    },

    async contest(request) {
      const config = configOf(request.config);
      const { evidence } = request;
      const created = await client.data(config, "POST", `${disputePath(request.providerReference)}/evidence`, "dispute evidence", {
        customer_email: evidence.customerEmail,
        customer_name: evidence.customerName,
        customer_phone: evidence.customerPhone,
        service_details: evidence.serviceDetails,
        // Optional at Paystack: left out (undefined is not serialized) when the merchant gave none.
        delivery_address: evidence.deliveryAddress || undefined,
        delivery_date: evidence.deliveryDate || undefined,
      });
      if (!idOf(created.id)) throw new GatewayError("provider_unavailable", "Paystack's answer to the dispute evidence named no evidence id");
      await client.data(config, "PUT", `${disputePath(request.providerReference)}/resolve`, "dispute contest", {
        resolution: "declined",
        message: request.message || "The merchant contests this dispute",
        refund_amount: subunits(request.amount),
        // Paystack requires the field and takes one file; with none uploaded it is sent empty (its samples name one
        // file, and none of them leaves the field out).
        uploaded_filename: request.files[0] ?? "",
        evidence: created.id,
      });
    },

    async accept(request) {
      await client.data(configOf(request.config), "PUT", `${disputePath(request.providerReference)}/resolve`, "dispute acceptance", {
        resolution: "merchant-accepted",
        message: request.message || "The merchant accepts this dispute",
        refund_amount: subunits(request.amount),
        uploaded_filename: "",
      });
    },
  };
}
