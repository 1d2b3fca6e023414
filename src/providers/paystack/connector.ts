import { GatewayError, ValidationError } from "../../errors.ts";
import { connectorCurrencies } from "../registry.ts";
import type {
  CollectionOutcome,
  Connector,
  HostedCheckoutConnector,
  HostedPaymentStatus,
  PayoutConnector,
  PayoutResult,
  ProviderPaymentRecord,
  ProviderSettlementSummary,
  ReconciliationConnector,
} from "../types.ts";
import { paystackInbound } from "./inbound.ts";
import { createPaystackRefunds } from "./refunds.ts";

/** The channel config the registry validated (see connectorConfigSchemas.paystack). */
export interface PaystackConfig {
  public_key: string;
  secret_key: string;
}

export interface PaystackConnectorOptions {
  /** Replaces https://api.paystack.co for every channel (a proxy, or a loopback fake in tests). */
  baseUrl?: string | undefined;
  timeoutMs?: number;
  /** How long after a refund is sent the reconciler first asks about it (PAYSTACK_REFUND_CHECK_AFTER_MS). */
  refundCheckAfterMs?: number;
}

const API_BASE = "https://api.paystack.co";
/** Paystack settles M-Pesa transfers to this bank code (mobile_money recipients in KES). */
const MPESA_BANK_CODE = "MPESA";
const PAYOUT_CURRENCY = "KES";
/** Paystack's lists take perPage up to 100; a day is read page by page. */
const LIST_PAGE_SIZE = 100;
const MAX_LIST_PAGES = 500;

export interface PaystackResponse {
  status: number;
  body: Record<string, any> | null;
}

/** Paystack's message, cut short, with the secret key blanked in case a proxy ever echoes it. */
function scrub(message: unknown, secretKey: string): string {
  const text = typeof message === "string" ? message.slice(0, 200) : "";
  return secretKey ? text.split(secretKey).join("[redacted]") : text;
}

/**
 * A Paystack answer other than success as a gateway error: a refusal (bad key, duplicate reference,
 * currency not enabled) is a 502 saying what to fix; a 5xx or a rate limit is a 503 worth retrying.
 */
export function paystackFailure(operation: string, response: PaystackResponse, secretKey: string): GatewayError {
  const message = scrub(response.body?.message, secretKey);
  const code = typeof response.body?.code === "string" ? response.body.code : undefined;
  if (response.status === 401) {
    return new GatewayError("provider_error", `Paystack rejected the channel's secret key for the ${operation}; check the payment channel's credentials`);
  }
  if (response.status === 429) return new GatewayError("provider_unavailable", `Paystack is rate limiting this account; retry the ${operation} shortly`);
  if (response.status >= 500) return new GatewayError("provider_unavailable", `Paystack is unavailable (HTTP ${response.status}) for the ${operation}`);
  if (code === "duplicate_reference" || /duplicate/i.test(message)) {
    return new GatewayError("provider_error", `Paystack refused the ${operation}: its reference is already used (duplicate_reference)`);
  }
  return new GatewayError("provider_error", `Paystack refused the ${operation} (HTTP ${response.status}${message ? `: ${message}` : ""})`);
}

const text = (value: unknown) => (typeof value === "string" ? value : null);
const dateOf = (value: unknown) => {
  const at = typeof value === "string" ? new Date(value) : null;
  return at && !Number.isNaN(at.getTime()) ? at : null;
};
const bigintOf = (value: unknown) => (typeof value === "number" && Number.isSafeInteger(value) ? BigInt(value) : typeof value === "string" && /^\d{1,15}$/.test(value) ? BigInt(value) : null);

/** A transaction's verify data as a provider-neutral status. `abandoned` only means "not paid yet" until the gateway gives up. */
export function readTransactionStatus(data: Record<string, any> | null | undefined): HostedPaymentStatus {
  const status = text(data?.status);
  const message = scrub(data?.gateway_response, "") || status || "";
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
    const reason = scrub(data?.reason ?? data?.gateway_response, "");
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

/** Kenyan MSISDN 2547XXXXXXXX as Paystack's M-Pesa recipients take it: the local 07XXXXXXXX form. */
const localKenyanNumber = (msisdn: string) => (msisdn.startsWith("254") ? `0${msisdn.slice(3)}` : msisdn);

export function createPaystackConnector(options: PaystackConnectorOptions = {}): Connector {
  const base = options.baseUrl ?? API_BASE;
  const timeoutMs = options.timeoutMs ?? 15_000;
  const configOf = (config: unknown) => config as PaystackConfig;

  async function call(config: PaystackConfig, method: "GET" | "POST", path: string, operation: string, body?: unknown): Promise<PaystackResponse> {
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${config.secret_key}`, ...(body === undefined ? {} : { "content-type": "application/json" }), accept: "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      const timedOut = (error as Error).name === "TimeoutError";
      throw new GatewayError("provider_unavailable", timedOut ? `Paystack did not answer the ${operation} in time` : `Paystack could not be reached for the ${operation}`, { cause: error });
    }
    let parsed: Record<string, any> | null = null;
    try {
      const value = JSON.parse(await response.text()) as unknown;
      if (value && typeof value === "object" && !Array.isArray(value)) parsed = value as Record<string, any>;
    } catch {
      parsed = null;
    }
    return { status: response.status, body: parsed };
  }

  /** The `data` of a successful answer, or the mapped failure. */
  async function data(config: PaystackConfig, method: "GET" | "POST", path: string, operation: string, body?: unknown): Promise<Record<string, any>> {
    const response = await call(config, method, path, operation, body);
    if (response.status >= 200 && response.status < 300 && response.body?.status === true && response.body.data && typeof response.body.data === "object") {
      return response.body.data as Record<string, any>;
    }
    if (response.status >= 200 && response.status < 300) {
      throw new GatewayError("provider_unavailable", `Paystack's answer to the ${operation} could not be read`);
    }
    throw paystackFailure(operation, response, config.secret_key);
  }

  const hosted: HostedCheckoutConnector = {
    checkPayment({ amount }) {
      // Paystack takes amounts as JSON numbers in the currency's subunit, which is the gateway's minor unit.
      if (amount > BigInt(Number.MAX_SAFE_INTEGER)) throw new ValidationError("amount", "is larger than Paystack accepts");
    },

    async start(request) {
      const config = configOf(request.config);
      const started = await data(config, "POST", "/transaction/initialize", "payment initialization", {
        email: request.email,
        amount: Number(request.amount),
        currency: request.currency,
        reference: request.reference,
        callback_url: request.callbackUrl,
        metadata: request.metadata,
      });
      const accessCode = text(started.access_code);
      const checkoutUrl = text(started.authorization_url);
      if (!accessCode || !checkoutUrl) throw new GatewayError("provider_unavailable", "Paystack's answer to the payment initialization could not be read");
      return { accessCode, checkoutUrl };
    },

    async verify({ config, reference }) {
      const c = configOf(config);
      return readVerifyResponse(await call(c, "GET", `/transaction/verify/${encodeURIComponent(reference)}`, "payment verification"), c.secret_key);
    },

  };

  const payouts: PayoutConnector = {
    canPayOut: () => true,

    checkAmount(amount, currency) {
      if (currency !== PAYOUT_CURRENCY) throw new ValidationError("currency", `must be ${PAYOUT_CURRENCY}: Paystack payouts go to M-Pesa numbers`);
      // M-Pesa moves whole shillings.
      if (amount % 100n !== 0n) throw new ValidationError("amount", "must be whole shillings (a multiple of 100) for an M-Pesa transfer");
      if (amount > BigInt(Number.MAX_SAFE_INTEGER)) throw new ValidationError("amount", "is larger than Paystack accepts");
    },

    /**
     * A recipient, then the transfer keyed by the payout's reference: Paystack refuses a second transfer
     * with the same reference, so no retry can pay twice.
     */
    async send(request) {
      const config = configOf(request.config);
      const recipient = await data(config, "POST", "/transferrecipient", "payout recipient", {
        type: "mobile_money",
        name: request.phoneNumber,
        account_number: localKenyanNumber(request.phoneNumber),
        bank_code: MPESA_BANK_CODE,
        currency: PAYOUT_CURRENCY,
      });
      const recipientCode = text(recipient.recipient_code);
      if (!recipientCode) throw new GatewayError("provider_unavailable", "Paystack's answer to the payout recipient could not be read");
      let transfer: Record<string, any>;
      try {
        transfer = await data(config, "POST", "/transfer", "payout", {
          source: "balance",
          amount: Number(request.amount),
          currency: request.currency,
          recipient: recipientCode,
          reference: request.reference,
          reason: request.remarks.slice(0, 100),
        });
      } catch (error) {
        // A transfer with this reference exists already: it was sent, so this is not a refusal. Its outcome is asked for.
        if (error instanceof GatewayError && /duplicate_reference/.test(error.message)) return { providerConversationId: "" };
        throw error;
      }
      return { providerConversationId: text(transfer.transfer_code) ?? "" };
    },

    async queryStatus({ config, reference, deliverResult }) {
      const c = configOf(config);
      const response = await call(c, "GET", `/transfer/verify/${encodeURIComponent(reference)}`, "payout status query");
      if (response.status === 200 && response.body?.status === true) {
        await deliverResult?.(response.body.data);
        return;
      }
      // Not found: the transfer request never reached Paystack (yet); asked again later.
      if (response.status === 400 || response.status === 404) return;
      throw paystackFailure("payout status query", response, c.secret_key);
    },

    // Paystack's transfer webhooks only name the transfer: the gateway asks /transfer/verify (queryStatus) before applying anything.
    parseResult: () => {
      throw new GatewayError("validation_failed", "Paystack transfer outcomes are read through verification, not from a posted result");
    },
    parseStatusResult: (body) => readTransferResult((body as Record<string, any>) ?? null),
  };

  /** Every page of a list endpoint for [from, to) (page, perPage; meta.pageCount says when to stop), at most MAX_LIST_PAGES. */
  async function listAll(config: PaystackConfig, path: string, operation: string, from: Date, to: Date): Promise<Record<string, any>[]> {
    const rows: Record<string, any>[] = [];
    for (let page = 1; page <= MAX_LIST_PAGES; page++) {
      const query = new URLSearchParams({ from: from.toISOString(), to: new Date(to.getTime() - 1).toISOString(), perPage: String(LIST_PAGE_SIZE), page: String(page) });
      const response = await call(config, "GET", `${path}?${query}`, operation);
      if (response.status !== 200 || response.body?.status !== true || !Array.isArray(response.body.data)) throw paystackFailure(operation, response, config.secret_key);
      rows.push(...(response.body.data as Record<string, any>[]));
      const pageCount = Number(response.body.meta?.pageCount ?? 1);
      // meta.pageCount decides, not the page's length: Paystack may serve fewer per page than asked.
      if (response.body.data.length === 0 || !(page < pageCount)) return rows;
    }
    throw new GatewayError("provider_error", `Paystack's ${operation} has more than ${MAX_LIST_PAGES * LIST_PAGE_SIZE} records for one day`);
  }

  const reconciliation: ReconciliationConnector = {
    listsAll: true,
    async payments({ config, from, to }) {
      const rows = await listAll(configOf(config), "/transaction", "transaction list", from, to);
      return rows.map((row): ProviderPaymentRecord => {
        const status = readTransactionStatus(row);
        return {
          providerReference: row.id != null ? String(row.id) : null,
          reference: text(row.reference),
          amount: bigintOf(row.amount) ?? 0n,
          currency: text(row.currency) ?? "",
          status: status.outcome.state,
          createdAt: dateOf(row.created_at ?? row.createdAt),
          paidAt: dateOf(row.paid_at ?? row.paidAt),
        };
      });
    },

    async settlements({ config, from, to }) {
      const rows = await listAll(configOf(config), "/settlement", "settlement list", from, to);
      const summary: ProviderSettlementSummary = { count: rows.length, totals: {}, statuses: {} };
      for (const row of rows) {
        const currency = text(row.currency) ?? "";
        const totals = (summary.totals[currency] ??= { total: 0n, fees: 0n, settled: 0n });
        totals.total += bigintOf(row.total_amount) ?? 0n;
        totals.fees += bigintOf(row.total_fees) ?? 0n;
        totals.settled += bigintOf(row.effective_amount) ?? 0n;
        const status = text(row.status) ?? "unknown";
        summary.statuses[status] = (summary.statuses[status] ?? 0) + 1;
      }
      return summary;
    },
  };

  const refunds = createPaystackRefunds({ call, failure: paystackFailure, checkAfterMs: options.refundCheckAfterMs ?? 60_000, timeoutMs });

  return { provider: "paystack", currencies: connectorCurrencies.paystack, hosted, payouts, refunds, inbound: paystackInbound, reconciliation };
}
