import { constants, createHash, createPublicKey, publicEncrypt, randomBytes, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { GatewayError } from "../../errors.ts";
import { connectorCurrencies } from "../registry.ts";
import type { CollectionOutcome, Connector, MomoConnector, PayoutConnector, ReconciliationConnector } from "../types.ts";
import { createDarajaInbound } from "./inbound.ts";
import { createMpesaRefunds } from "./refunds.ts";
import type { TokenStore } from "./token-store.ts";
import * as wire from "./wire.ts";

/** The channel config the registry validated (see connectorConfigSchemas.mpesa). */
export interface MpesaConfig {
  consumer_key: string;
  consumer_secret: string;
  shortcode: string;
  passkey: string;
  environment: "sandbox" | "production";
  transaction_type: "paybill" | "till";
  till_number?: string;
  /** B2C payouts: the API operator, and either the portal's SecurityCredential or the initiator's password. */
  initiator_name?: string;
  security_credential?: string;
  initiator_password?: string;
  /** The B2C shortcode when it differs from the collection shortcode. */
  b2c_shortcode?: string;
}

export interface MpesaConnectorOptions {
  tokenStore: TokenStore;
  /** Replaces the environment's base URL for every channel (a proxy, or a loopback fake in tests). */
  baseUrlOverride?: string | undefined;
  requestTimeoutMs?: number;
  /** A certificate (or public key) PEM replacing Safaricom's for SecurityCredential encryption (tests). */
  certPath?: string | undefined;
  /** How long after a reversal or refund B2C request its result is overdue and Transaction Status is asked (REVERSAL_RESULT_OVERDUE_MS). */
  reversalResultOverdueMs?: number | undefined;
}

const BASES = { sandbox: "https://sandbox.safaricom.co.ke", production: "https://api.safaricom.co.ke" } as const;
/** Refresh this long before Daraja's expiry so a token never dies mid-request. */
const REFRESH_MARGIN_MS = 60_000;
const INVALID_TOKEN = "404.001.03";

/** Safaricom's public certificates, per environment: a B2C initiator password is encrypted with them. */
const CERTIFICATES = {
  sandbox: new URL("./certs/sandbox.cer", import.meta.url),
  production: new URL("./certs/production.cer", import.meta.url),
} as const;

interface DarajaResponse {
  status: number;
  body: Record<string, unknown> | null;
}

/** Daraja's error text, cut short and with anything secret blanked (it should hold none, but it is echoed to clients). */
function scrub(message: unknown, secrets: string[]): string {
  let text = typeof message === "string" ? message.slice(0, 200) : "";
  for (const secret of secrets) if (secret) text = text.split(secret).join("[redacted]");
  return text;
}

/** A synchronous Daraja refusal as a gateway error: 502 with a clear message, 503 when Daraja is down. */
function darajaFailure(operation: string, response: DarajaResponse, secrets: string[]): GatewayError {
  const code = typeof response.body?.errorCode === "string" ? response.body.errorCode : undefined;
  const message = scrub(response.body?.errorMessage ?? response.body?.ResponseDescription, secrets);
  switch (code) {
    case "500.003.02":
      return new GatewayError("provider_error", `M-Pesa is busy (500.003.02, too many requests); retry the ${operation} in a few seconds`);
    case "500.003.03":
      return new GatewayError("provider_error", `M-Pesa refused the ${operation}: the app's request quota is used up (500.003.03)`);
    case INVALID_TOKEN:
      return new GatewayError("provider_error", `M-Pesa refused the access token for the ${operation} (404.001.03)`);
    case "500.001.1001":
      return new GatewayError(
        "provider_error",
        `M-Pesa refused the ${operation} (500.001.1001: ${message}); ${
          /^(payout|reversal|refund)/.test(operation) ? "check the channel's initiator_name, its initiator_password or security_credential, and b2c_shortcode" : "check the channel's shortcode, passkey and transaction type"
        }`,
      );
    case undefined:
      if (response.status >= 500) return new GatewayError("provider_unavailable", `M-Pesa is unavailable (HTTP ${response.status}) for the ${operation}`);
      return new GatewayError("provider_error", `M-Pesa refused the ${operation} (HTTP ${response.status}${message ? `: ${message}` : ""})`);
    default:
      return new GatewayError("provider_error", `M-Pesa refused the ${operation} (${code}: ${message})`);
  }
}

export function createMpesaConnector(options: MpesaConnectorOptions): Connector {
  const timeoutMs = options.requestTimeoutMs ?? 15_000;
  const refreshing = new Map<string, Promise<string>>();

  const baseOf = (config: MpesaConfig) => options.baseUrlOverride ?? BASES[config.environment];
  const secretsOf = (config: MpesaConfig, token?: string) => [
    config.consumer_secret,
    config.passkey,
    config.initiator_password ?? "",
    config.security_credential ?? "",
    token ?? "",
  ];
  /** One entry per app and base (the secret too, so changed credentials are re-checked); stored hashed. */
  const cacheKey = (config: MpesaConfig) =>
    createHash("sha256").update(`${baseOf(config)}\n${config.consumer_key}\n${config.consumer_secret}`).digest("hex");

  async function send(url: string, init: RequestInit, operation: string): Promise<DarajaResponse> {
    let response: Response;
    try {
      response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    } catch (error) {
      throw new GatewayError("provider_unavailable", `M-Pesa could not be reached for the ${operation}`, { cause: error });
    }
    let raw: string;
    try {
      raw = await response.text();
    } catch (error) {
      // The request got there and its answer was cut off: what Daraja did is unknown, not refused.
      throw new GatewayError("provider_unavailable", `M-Pesa's answer to the ${operation} was cut off`, { cause: error });
    }
    let body: Record<string, unknown> | null = null;
    try {
      const parsed = JSON.parse(raw) as unknown;
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
    } catch {
      body = null;
    }
    return { status: response.status, body };
  }

  async function fetchToken(config: MpesaConfig): Promise<string> {
    const basic = Buffer.from(`${config.consumer_key}:${config.consumer_secret}`).toString("base64");
    const response = await send(
      `${baseOf(config)}/oauth/v1/generate?grant_type=client_credentials`,
      { method: "GET", headers: { authorization: `Basic ${basic}` } },
      "authentication",
    );
    const token = response.body?.access_token;
    if (response.status !== 200 || typeof token !== "string" || !token) {
      if (response.status >= 500) throw darajaFailure("authentication", response, secretsOf(config));
      throw new GatewayError("provider_error", "M-Pesa rejected the channel's consumer key or consumer secret; check the payment channel's credentials");
    }
    const seconds = Number(response.body?.expires_in ?? 3599);
    const expiresAt = Date.now() + (Number.isFinite(seconds) && seconds > 0 ? seconds : 3599) * 1000 - REFRESH_MARGIN_MS;
    await options.tokenStore.set(cacheKey(config), { token, expiresAt });
    return token;
  }

  /** The cached token, or a new one; concurrent callers in this process share one fetch. */
  async function accessToken(config: MpesaConfig, rejected?: string): Promise<string> {
    const key = cacheKey(config);
    if (rejected) await options.tokenStore.invalidate(key, rejected);
    const cached = await options.tokenStore.get(key);
    if (cached && cached.token !== rejected) return cached.token;
    let pending = refreshing.get(key);
    if (!pending) {
      pending = fetchToken(config).finally(() => refreshing.delete(key));
      refreshing.set(key, pending);
    }
    return pending;
  }

  /** POSTs with the app's token; an "Invalid Access Token" answer refreshes it and retries once. */
  async function call(config: MpesaConfig, path: string, body: Record<string, unknown>, operation: string): Promise<DarajaResponse> {
    const post = (token: string) =>
      send(`${baseOf(config)}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }, operation);
    const token = await accessToken(config);
    const response = await post(token);
    if (response.body?.errorCode !== INVALID_TOKEN) return response;
    return post(await accessToken(config, token));
  }

  function accepted(operation: string, config: MpesaConfig, response: DarajaResponse): Record<string, unknown> {
    if (response.status === 200 && response.body && String(response.body.ResponseCode) === "0") return response.body;
    // A success status whose body says neither yes nor no is an unknown outcome, never a refusal.
    if (response.status >= 200 && response.status < 300 && response.body?.ResponseCode === undefined && response.body?.errorCode === undefined) {
      throw new GatewayError("provider_unavailable", `M-Pesa's answer to the ${operation} could not be read (HTTP ${response.status})`);
    }
    throw darajaFailure(operation, response, secretsOf(config));
  }

  function credentials(config: MpesaConfig) {
    const timestamp = wire.nairobiTimestamp();
    return { BusinessShortCode: config.shortcode, Password: wire.stkPassword(config.shortcode, config.passkey, timestamp), Timestamp: timestamp };
  }

  const momo: MomoConnector = {
    async stkPush(request) {
      const config = request.config as MpesaConfig;
      const till = config.transaction_type === "till";
      const body = {
        ...credentials(config),
        TransactionType: till ? "CustomerBuyGoodsOnline" : "CustomerPayBillOnline",
        Amount: wire.toWholeShillings(request.amount, request.currency),
        PartyA: request.phoneNumber,
        PartyB: till ? config.till_number : config.shortcode,
        PhoneNumber: request.phoneNumber,
        CallBackURL: request.callbackUrl,
        AccountReference: request.accountReference.slice(0, 12),
        TransactionDesc: request.description.slice(0, 13),
      };
      const reply = accepted("STK push", config, await call(config, "/mpesa/stkpush/v1/processrequest", body, "STK push"));
      return {
        checkoutRequestId: String(reply.CheckoutRequestID),
        merchantRequestId: String(reply.MerchantRequestID ?? ""),
        customerMessage: typeof reply.CustomerMessage === "string" ? reply.CustomerMessage : "Success. Request accepted for processing",
      };
    },

    async stkQuery({ config: raw, checkoutRequestId }): Promise<CollectionOutcome> {
      const config = raw as MpesaConfig;
      const response = await call(config, "/mpesa/stkpushquery/v1/query", { ...credentials(config), CheckoutRequestID: checkoutRequestId }, "STK query");
      const body = response.body;
      // While the customer has not answered, Daraja replies with this error instead of a result.
      if (body?.errorCode === "500.001.1001" && /being processed/i.test(String(body.errorMessage ?? ""))) return { state: "pending" };
      const reply = accepted("STK query", config, response);
      if (reply.ResultCode === undefined || reply.ResultCode === null) return { state: "pending" };
      const resultCode = String(reply.ResultCode);
      const message = typeof reply.ResultDesc === "string" ? reply.ResultDesc : "";
      return resultCode === "0" ? { state: "completed", providerReference: null, message } : { state: "failed", code: resultCode, message };
    },

    ...wire.MPESA_MOMO_CONSTANTS,
    checkAmount: (amount, currency) => void wire.toWholeShillings(amount, currency),
    parseStkCallback: wire.parseStkCallbackBody,

    async registerC2bUrls(request) {
      const config = request.config as MpesaConfig;
      const body = {
        ShortCode: config.shortcode,
        ResponseType: request.responseType,
        ConfirmationURL: request.confirmationUrl,
        ValidationURL: request.validationUrl,
      };
      accepted("C2B URL registration", config, await call(config, "/mpesa/c2b/v1/registerurl", body, "C2B URL registration"));
    },

    canSimulateC2b: (config) => (config as MpesaConfig).environment === "sandbox",

    async simulateC2b(request) {
      const config = request.config as MpesaConfig;
      const body = {
        ShortCode: config.transaction_type === "till" ? config.till_number : config.shortcode,
        CommandID: config.transaction_type === "till" ? "CustomerBuyGoodsOnline" : "CustomerPayBillOnline",
        Amount: wire.toWholeShillings(request.amount, request.currency),
        Msisdn: request.phoneNumber,
        BillRefNumber: request.billRef,
      };
      accepted("C2B simulation", config, await call(config, "/mpesa/c2b/v1/simulate", body, "C2B simulation"));
    },

    parseC2bPayment: wire.parseC2bBody,
    c2bValidationReply: wire.c2bValidationReply,
    readC2bValidationDecision: wire.readC2bValidationDecision,
  };

  const publicKeys = new Map<string, KeyObject>();
  function publicKeyFor(config: MpesaConfig): KeyObject {
    const source = options.certPath ?? CERTIFICATES[config.environment];
    const cacheKey = String(source);
    let key = publicKeys.get(cacheKey);
    if (!key) {
      key = createPublicKey(readFileSync(source, "utf8"));
      publicKeys.set(cacheKey, key);
    }
    return key;
  }

  /** As the Daraja portal makes it: the initiator password, RSA PKCS#1 v1.5 with Safaricom's certificate, base64. */
  function securityCredential(config: MpesaConfig): string {
    if (config.security_credential) return config.security_credential;
    const password = Buffer.from(config.initiator_password ?? "", "utf8");
    return publicEncrypt({ key: publicKeyFor(config), padding: constants.RSA_PKCS1_PADDING }, password).toString("base64");
  }

  /**
   * Daraja's Transaction Status query about one request of ours (a payout, a reversal, a refund's B2C
   * payment), named by its conversation id; the answer is posted later to resultUrl.
   */
  async function transactionStatus(
    config: MpesaConfig,
    query: { originalConversationId: string; partyA: string; resultUrl: string; timeoutUrl: string; remarks: string; operation: string },
  ): Promise<void> {
    const body = {
      Initiator: config.initiator_name,
      SecurityCredential: securityCredential(config),
      CommandID: "TransactionStatusQuery",
      OriginalConversationID: query.originalConversationId,
      PartyA: query.partyA,
      IdentifierType: "4",
      ResultURL: query.resultUrl,
      QueueTimeOutURL: query.timeoutUrl,
      Remarks: query.remarks,
      Occasion: "",
    };
    accepted(query.operation, config, await call(config, "/mpesa/transactionstatus/v1/query", body, query.operation));
  }

  const payouts: PayoutConnector = {
    payOutNeeds: "initiator_name and security_credential or initiator_password",
    canPayOut: (raw) => {
      const config = raw as MpesaConfig;
      return Boolean(config.initiator_name && (config.security_credential || config.initiator_password));
    },

    checkAmount: (amount, currency) => void wire.toB2cShillings(amount, currency),

    async send(request) {
      const config = request.config as MpesaConfig;
      const remarks = request.remarks.trim().slice(0, 100);
      const body = {
        OriginatorConversationID: request.providerRequestId,
        InitiatorName: config.initiator_name,
        SecurityCredential: securityCredential(config),
        CommandID: request.commandId,
        Amount: wire.toB2cShillings(request.amount, request.currency),
        PartyA: config.b2c_shortcode ?? config.shortcode,
        PartyB: request.phoneNumber,
        Remarks: remarks.length >= 2 ? remarks : "Payout",
        QueueTimeOutURL: request.timeoutUrl,
        ResultURL: request.resultUrl,
        Occassion: "",
      };
      const reply = accepted("payout", config, await call(config, "/mpesa/b2c/v3/paymentrequest", body, "payout"));
      return { providerConversationId: String(reply.ConversationID ?? "") };
    },

    async queryStatus(request) {
      const config = request.config as MpesaConfig;
      await transactionStatus(config, {
        originalConversationId: request.providerRequestId,
        partyA: config.b2c_shortcode ?? config.shortcode,
        resultUrl: request.resultUrl,
        timeoutUrl: request.timeoutUrl,
        remarks: "Payout status",
        operation: "payout status query",
      });
    },

    parseResult: wire.parseB2cResultBody,
    parseStatusResult: wire.parseTransactionStatusBody,
  };

  // Handed out as /callbacks/daraja/...: Daraja refuses "mpesa" anywhere in a callback URL, so the registry
  // name is accepted in paths but never given to Safaricom.
  const inbound = createDarajaInbound({ segment: "daraja", aliases: ["daraja"], forbiddenUrlWords: wire.darajaForbiddenUrlWords, momo, payouts });

  const refunds = createMpesaRefunds({
    checkAfterMs: options.reversalResultOverdueMs ?? 60_000,
    payouts,
    async reverse(config, body) {
      const reply = accepted("reversal", config, await call(config, "/mpesa/reversal/v1/request", { ...body, SecurityCredential: securityCredential(config) }, "reversal"));
      return { conversationId: typeof reply.ConversationID === "string" && reply.ConversationID ? reply.ConversationID : null };
    },
    transactionStatus,
  });

  /**
   * Daraja lists no payments: the reconciliation asks about pending ones one by one (the STK query) and reads
   * the shortcode's balance (Account Balance, answered later on the ResultURL), which needs the B2C initiator.
   */
  const reconciliation: ReconciliationConnector = {
    balanceUnavailable: (raw) => (payouts.canPayOut(raw) ? undefined : "the channel has no initiator_name with security_credential or initiator_password"),
    async requestBalance({ config: raw, resultUrl, timeoutUrl }) {
      const config = raw as MpesaConfig;
      const body = {
        Initiator: config.initiator_name,
        SecurityCredential: securityCredential(config),
        CommandID: "AccountBalance",
        PartyA: config.shortcode,
        IdentifierType: "4",
        Remarks: "Reconciliation",
        QueueTimeOutURL: timeoutUrl,
        ResultURL: resultUrl,
      };
      accepted("account balance request", config, await call(config, "/mpesa/accountbalance/v1/query", body, "account balance request"));
    },
  };

  return { provider: "mpesa", currencies: connectorCurrencies.mpesa, momo, payouts, refunds, inbound, reconciliation };
}

/** For tests and diagnostics: a Daraja-looking id. */
export const newCheckoutRequestId = () => `ws_CO_${randomBytes(10).toString("hex")}`;
