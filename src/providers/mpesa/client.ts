import { constants, createHash, createPublicKey, publicEncrypt, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { GatewayError } from "../../errors.ts";
import type { ProviderCallSink } from "../call-record.ts";
import { createProviderHttp, type ProviderHttpAnswer } from "../http.ts";
import { COMMON_SECRET_KEYS, createScrubber, type Scrubber } from "../scrub.ts";
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
  /** False when payers never pay the shortcode from their phone's menu (STK push only): no C2B URLs are needed. Default true. */
  c2b?: boolean;
}

export interface DarajaClientOptions {
  tokenStore: TokenStore;
  /** Replaces the environment's base URL for every channel (a proxy, or a loopback fake in tests). */
  baseUrlOverride?: string | undefined;
  requestTimeoutMs?: number | undefined;
  /** A certificate (or public key) PEM replacing Safaricom's for SecurityCredential encryption (tests). */
  certPath?: string | undefined;
  recordCall?: ProviderCallSink | undefined;
}

/** Daraja's answer: HTTP status and its JSON object (null when it sent none). */
export type DarajaResponse = ProviderHttpAnswer;

const BASES = { sandbox: "https://sandbox.safaricom.co.ke", production: "https://api.safaricom.co.ke" } as const;
/** Refresh this long before Daraja's expiry so a token never dies mid-request. */
const REFRESH_MARGIN_MS = 60_000;
const INVALID_TOKEN = "404.001.03";

/** Safaricom's public certificates, per environment: a B2C initiator password is encrypted with them. */
const CERTIFICATES = {
  sandbox: new URL("./certs/sandbox.cer", import.meta.url),
  production: new URL("./certs/production.cer", import.meta.url),
} as const;

/** Daraja's secret fields: the STK Password, the B2C SecurityCredential and the app's credentials. */
const DARAJA_SECRET_KEYS = [...COMMON_SECRET_KEYS, "securitycredential", "consumer_secret", "passkey", "initiator_password", "security_credential"];

/** Scrubs Daraja exchanges of one channel: its secret fields, and its credentials and token wherever they appear. */
export function darajaScrubber(config: Partial<MpesaConfig>, token?: string): Scrubber {
  const secretValues = [config.consumer_secret, config.passkey, config.initiator_password, config.security_credential, token].filter((v): v is string => Boolean(v));
  return createScrubber({ secretKeys: DARAJA_SECRET_KEYS, secretValues });
}

/** Daraja's error text, cut short and with anything secret blanked (it should hold none, but it is echoed to clients). */
function shortMessage(message: unknown, scrub: Scrubber): string {
  return typeof message === "string" ? scrub(message.slice(0, 200)) : "";
}

/** A synchronous Daraja refusal as a gateway error: 502 with a clear message, 503 when Daraja is down. */
function darajaFailure(operation: string, response: DarajaResponse, scrub: Scrubber): GatewayError {
  const code = typeof response.body?.errorCode === "string" ? response.body.errorCode : undefined;
  const message = shortMessage(response.body?.errorMessage ?? response.body?.ResponseDescription, scrub);
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

/**
 * Daraja's auth and HTTP: the app's OAuth token (cached, shared across instances by the token store,
 * refreshed once when Daraja calls it invalid), the B2C SecurityCredential, and POSTs through the one
 * provider HTTP helper. Operations are named in words ("STK push"): Daraja's refusals quote them.
 */
export function createDarajaClient(options: DarajaClientOptions) {
  const send = createProviderHttp({ connector: "mpesa", label: "M-Pesa", timeoutMs: options.requestTimeoutMs ?? 15_000, recordCall: options.recordCall });
  const refreshing = new Map<string, Promise<string>>();

  const baseOf = (config: MpesaConfig) => options.baseUrlOverride ?? BASES[config.environment];
  /** One entry per app and base (the secret too, so changed credentials are re-checked); stored hashed. */
  const cacheKey = (config: MpesaConfig) =>
    createHash("sha256").update(`${baseOf(config)}\n${config.consumer_key}\n${config.consumer_secret}`).digest("hex");

  async function fetchToken(config: MpesaConfig): Promise<string> {
    const basic = Buffer.from(`${config.consumer_key}:${config.consumer_secret}`).toString("base64");
    const response = await send({
      operation: "authentication",
      method: "GET",
      url: `${baseOf(config)}/oauth/v1/generate?grant_type=client_credentials`,
      headers: { authorization: `Basic ${basic}` },
      scrub: darajaScrubber(config, basic),
    });
    const token = response.body?.access_token;
    if (response.status !== 200 || typeof token !== "string" || !token) {
      if (response.status >= 500) throw darajaFailure("authentication", response, darajaScrubber(config));
      // Daraja's own words (e.g. 400.008.01 "Invalid Authentication passed") tell the merchant which app it refused.
      const code = typeof response.body?.errorCode === "string" ? `${response.body.errorCode}: ` : "";
      const said = shortMessage(response.body?.errorMessage, darajaScrubber(config, basic));
      throw new GatewayError(
        "provider_error",
        `M-Pesa rejected the channel's consumer key or consumer secret${said ? ` (${code}${said})` : ""}; check the payment channel's credentials`,
      );
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
  async function post(config: MpesaConfig, path: string, body: Record<string, unknown>, operation: string): Promise<DarajaResponse> {
    const attempt = (token: string) =>
      send({ operation, method: "POST", url: `${baseOf(config)}${path}`, headers: { authorization: `Bearer ${token}` }, body, scrub: darajaScrubber(config, token) });
    const token = await accessToken(config);
    const response = await attempt(token);
    if (response.body?.errorCode !== INVALID_TOKEN) return response;
    return attempt(await accessToken(config, token));
  }

  /** Daraja's acceptance (ResponseCode 0) of a request, or the mapped failure. */
  function accepted(operation: string, config: MpesaConfig, response: DarajaResponse): Record<string, unknown> {
    if (response.status === 200 && response.body && String(response.body.ResponseCode) === "0") return response.body;
    // A success status whose body says neither yes nor no is an unknown outcome, never a refusal.
    if (response.status >= 200 && response.status < 300 && response.body?.ResponseCode === undefined && response.body?.errorCode === undefined) {
      throw new GatewayError("provider_unavailable", `M-Pesa's answer to the ${operation} could not be read (HTTP ${response.status})`);
    }
    throw darajaFailure(operation, response, darajaScrubber(config));
  }

  const publicKeys = new Map<string, KeyObject>();
  function publicKeyFor(config: MpesaConfig): KeyObject {
    const source = options.certPath ?? CERTIFICATES[config.environment];
    const key = String(source);
    let publicKey = publicKeys.get(key);
    if (!publicKey) {
      publicKey = createPublicKey(readFileSync(source, "utf8"));
      publicKeys.set(key, publicKey);
    }
    return publicKey;
  }

  return {
    post,
    accepted,
    /** The app's token (cached while Daraja's lasts): proof that Daraja accepts the consumer key and secret. */
    accessToken: (config: MpesaConfig) => accessToken(config),
    /** POSTs and returns Daraja's acceptance, or throws the mapped failure. */
    async request(config: MpesaConfig, path: string, body: Record<string, unknown>, operation: string): Promise<Record<string, unknown>> {
      return accepted(operation, config, await post(config, path, body, operation));
    },
    /** BusinessShortCode, Password and Timestamp, as every Lipa na M-Pesa request carries them. */
    lipaCredentials(config: MpesaConfig) {
      const timestamp = wire.nairobiTimestamp();
      return { BusinessShortCode: config.shortcode, Password: wire.stkPassword(config.shortcode, config.passkey, timestamp), Timestamp: timestamp };
    },
    /** As the Daraja portal makes it: the initiator password, RSA PKCS#1 v1.5 with Safaricom's certificate, base64. */
    securityCredential(config: MpesaConfig): string {
      if (config.security_credential) return config.security_credential;
      const password = Buffer.from(config.initiator_password ?? "", "utf8");
      return publicEncrypt({ key: publicKeyFor(config), padding: constants.RSA_PKCS1_PADDING }, password).toString("base64");
    },
  };
}

export type DarajaClient = ReturnType<typeof createDarajaClient>;
