import { GatewayError } from "../../errors.ts";
import type { ProviderCallSink } from "../call-record.ts";
import { createProviderHttp, type ProviderHttpAnswer } from "../http.ts";
import { COMMON_SECRET_KEYS, createScrubber, type Scrubber } from "../scrub.ts";

/** The channel config the registry validated (see connectorConfigSchemas.paystack). */
export interface PaystackConfig {
  public_key: string;
  secret_key: string;
}

/** Paystack's answer: HTTP status and its JSON object (null when it sent none). */
export type PaystackResponse = ProviderHttpAnswer;

export interface PaystackClientOptions {
  /** Replaces https://api.paystack.co for every channel (a proxy, or a loopback fake in tests). */
  baseUrl?: string | undefined;
  timeoutMs?: number | undefined;
  recordCall?: ProviderCallSink | undefined;
}

const API_BASE = "https://api.paystack.co";
type PaystackMethod = "GET" | "POST" | "PUT";
export const DEFAULT_TIMEOUT_MS = 15_000;

/**
 * Paystack's secret fields (saved cards' authorization codes charge the card again; a dispute upload's signedUrl
 * lets anyone write the file while it lasts) and any secret key in text.
 */
const PAYSTACK_SECRET_KEYS = [...COMMON_SECRET_KEYS, "authorization_code", "signedUrl"];
const SECRET_KEY_PATTERN = /\bsk_(?:test|live)_[A-Za-z0-9]+/;

/** Scrubs Paystack exchanges of one channel: secret fields, authorization codes, and any secret key. */
export function paystackScrubber(secretKey: string): Scrubber {
  return createScrubber({ secretKeys: PAYSTACK_SECRET_KEYS, secretValues: secretKey ? [secretKey] : [], secretPatterns: [SECRET_KEY_PATTERN] });
}

/** Paystack's message, cut short, with the secret key blanked in case a proxy ever echoes it. */
export function paystackMessage(message: unknown, secretKey: string): string {
  const text = typeof message === "string" ? message.slice(0, 200) : "";
  return secretKey ? text.split(secretKey).join("[redacted]") : text;
}

/**
 * A Paystack answer other than success as a gateway error: a refusal (bad key, duplicate reference,
 * currency not enabled) is a 502 saying what to fix; a 5xx or a rate limit is a 503 worth retrying.
 */
export function paystackFailure(operation: string, response: PaystackResponse, secretKey: string): GatewayError {
  const message = paystackMessage(response.body?.message, secretKey);
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

/** The `data` of a successful answer, or the mapped failure; a success whose data cannot be read is unknown (provider_unavailable). */
export function paystackData(response: PaystackResponse, operation: string, secretKey: string): Record<string, any> {
  if (response.status >= 200 && response.status < 300 && response.body?.status === true && response.body.data && typeof response.body.data === "object") {
    return response.body.data as Record<string, any>;
  }
  if (response.status >= 200 && response.status < 300) throw new GatewayError("provider_unavailable", `Paystack's answer to the ${operation} could not be read`);
  throw paystackFailure(operation, response, secretKey);
}

/** Paystack's HTTP: the channel's secret key as the bearer, JSON both ways, through the one provider HTTP helper. */
export function createPaystackClient(options: PaystackClientOptions = {}) {
  const base = options.baseUrl ?? API_BASE;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const send = createProviderHttp({ connector: "paystack", label: "Paystack", timeoutMs, recordCall: options.recordCall });

  async function call(config: PaystackConfig, method: PaystackMethod, path: string, operation: string, body?: unknown): Promise<PaystackResponse> {
    return send({
      operation,
      method,
      url: `${base}${path}`,
      headers: { authorization: `Bearer ${config.secret_key}`, accept: "application/json" },
      ...(body === undefined ? {} : { body }),
      scrub: paystackScrubber(config.secret_key),
    });
  }

  return {
    /** How long one call may take. */
    timeoutMs,
    call,
    /** The `data` of a successful answer, or the mapped failure. */
    async data(config: PaystackConfig, method: PaystackMethod, path: string, operation: string, body?: unknown): Promise<Record<string, any>> {
      return paystackData(await call(config, method, path, operation, body), operation, config.secret_key);
    },
    /** PUTs a file to a URL Paystack signed (its storage, not its API): no bearer, so the secret key never leaves for that host. */
    async putFile(config: PaystackConfig, signedUrl: string, operation: string, file: { bytes: Buffer; contentType: string }): Promise<PaystackResponse> {
      return send({ operation, method: "PUT", url: signedUrl, file, scrub: paystackScrubber(config.secret_key) });
    },
  };
}

export type PaystackClient = ReturnType<typeof createPaystackClient>;
