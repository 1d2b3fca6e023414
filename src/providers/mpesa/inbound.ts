import { GatewayError, ValidationError } from "../../errors.ts";
import { unsafeTextIn } from "../../validation.ts";
import { readJsonBody } from "../inbound-json.ts";
import type { ChannelCallbackUrls, InboundCallback, InboundConnector, MomoConnector, PayoutConnector } from "../types.ts";
import * as wire from "./wire.ts";

/** The paths Daraja posts to below a channel's token (one per callback URL the gateway hands it). */
const PATHS = {
  stk: "/stk",
  c2bValidation: "/c2b/validation",
  c2bConfirmation: "/c2b/confirmation",
  b2cResult: "/b2c/result",
  b2cTimeout: "/b2c/timeout",
  b2cStatus: "/b2c/status/:reference",
  /** A refund's Result (its Reversal or its B2C payment), queue timeout, and status answers. */
  refundResult: "/refund/result",
  refundTimeout: "/refund/timeout",
  refundStatus: "/refund/status/:reference",
  /** An Account Balance answer, and its queue timeout, for one reconciliation (its id). */
  balanceResult: "/balance/result/:reference",
  balanceTimeout: "/balance/timeout/:reference",
} as const;

/** What every JSON request to the gateway may carry (the server's body limit): Daraja's callbacks are far smaller. */
const MAX_BODY_BYTES = 1024 * 1024;

export interface DarajaInboundOptions {
  /** The segment of the URLs handed out: never "mpesa", a word Daraja refuses in callback URLs. */
  segment: string;
  aliases: readonly string[];
  /** Words the provider refuses anywhere in a callback URL; the URLs are refused here rather than by Daraja later. */
  forbiddenUrlWords: readonly string[];
  /** The payload parsers of the connector that owns these callbacks (the sandbox simulates Daraja with its own). */
  momo: Pick<MomoConnector, "parseStkCallback" | "parseC2bPayment" | "c2bValidationReply">;
  payouts: Pick<PayoutConnector, "parseResult" | "parseStatusResult">;
}

/**
 * Daraja's callbacks (STK results, C2B validation and confirmation, B2C results, queue timeouts and
 * Transaction Status answers, and the same three for refunds: Reversal or refund B2C Results on /refund/*). They are not signed: the unguessable channel token in the path is the
 * authentication, checked by the core before anything here runs. Daraja reads only {ResultCode,
 * ResultDesc}, so a refusal is answered in that shape too, never in the REST envelope.
 */
export function createDarajaInbound(options: DarajaInboundOptions): InboundConnector {
  const { momo, payouts } = options;

  /** Daraja refuses these words anywhere in a callback URL: refused here, before Daraja would. */
  function refuseForbiddenWords(url: string): void {
    const bad = options.forbiddenUrlWords.find((word) => url.toLowerCase().includes(word));
    if (bad) {
      throw new GatewayError("validation_failed", `PUBLIC_BASE_URL contains "${bad}", which M-Pesa refuses in callback URLs; serve the gateway from another host name`);
    }
  }

  function parse(path: string, params: Record<string, string>, body: unknown): InboundCallback {
    switch (path) {
      case PATHS.stk:
        return { kind: "collection_result", result: momo.parseStkCallback(body) };
      case PATHS.c2bValidation:
        return { kind: "c2b_validation", payment: momo.parseC2bPayment(body), body };
      case PATHS.c2bConfirmation:
        return { kind: "c2b_confirmation", payment: momo.parseC2bPayment(body), body };
      case PATHS.b2cResult:
        return { kind: "payout_result", result: payouts.parseResult(body) };
      case PATHS.b2cTimeout:
        return { kind: "payout_timeout", providerRequestId: wire.parseB2cTimeoutBody(body) };
      case PATHS.b2cStatus:
        return { kind: "payout_status_result", reference: params.reference ?? "", result: payouts.parseStatusResult(body) };
      case PATHS.refundResult:
        return { kind: "refund_result", result: wire.parseRefundResultBody(body) };
      case PATHS.refundTimeout:
        return { kind: "refund_timeout", providerRequestId: wire.parseB2cTimeoutBody(body) };
      case PATHS.refundStatus:
        return { kind: "refund_status_result", reference: params.reference ?? "", result: wire.parseRefundStatusBody(body) };
      case PATHS.balanceResult:
        return { kind: "balance_result", reference: params.reference ?? "", result: wire.parseAccountBalanceBody(body) };
      case PATHS.balanceTimeout:
        return { kind: "balance_result", reference: params.reference ?? "", result: wire.accountBalanceTimeout() };
      default:
        throw new GatewayError("route_not_found");
    }
  }

  return {
    aliases: options.aliases,
    paths: Object.values(PATHS),
    maxBodyBytes: MAX_BODY_BYTES,

    read({ path, params, rawBody, contentType }) {
      const body = readJsonBody(rawBody, contentType);
      // Text no callback can carry (control characters, lone surrogates, absurd lengths) is refused before
      // anything is parsed or applied: a C2B body is kept whole for its forward to the merchant.
      const unsafe = unsafeTextIn(params, "") ?? unsafeTextIn(body, "");
      if (unsafe) throw unsafe;
      return parse(path, params, body);
    },

    acknowledge(callback, verdict) {
      switch (callback.kind) {
        case "collection_result":
          return wire.stkCallbackAck();
        case "c2b_validation":
          return momo.c2bValidationReply(verdict ?? { accept: true });
        case "c2b_confirmation":
          return wire.c2bConfirmationAck();
        default:
          return wire.b2cResultAck();
      }
    },

    refuse(error) {
      return error instanceof ValidationError ? { status: 400, body: { ResultCode: 1, ResultDesc: `Rejected: ${error.message}` } } : null;
    },

    callbackUrls(at): ChannelCallbackUrls {
      const url = (path: string) => at(options.segment, path);
      const urls = {
        collection: url(PATHS.stk),
        c2bValidation: url(PATHS.c2bValidation),
        c2bConfirmation: url(PATHS.c2bConfirmation),
        payoutResult: url(PATHS.b2cResult),
        payoutTimeout: url(PATHS.b2cTimeout),
        payoutStatusResult: (reference: string) => url(PATHS.b2cStatus.replace(":reference", reference)),
      };
      refuseForbiddenWords(urls.collection);
      return urls;
    },

    refundCallbackUrls(at, reference) {
      const url = (path: string) => at(options.segment, path);
      const urls = { result: url(PATHS.refundResult), timeout: url(PATHS.refundTimeout), statusResult: url(PATHS.refundStatus.replace(":reference", reference)) };
      refuseForbiddenWords(urls.result);
      return urls;
    },

    balanceCallbackUrls(at, reference) {
      const url = (path: string) => at(options.segment, path.replace(":reference", encodeURIComponent(reference)));
      const urls = { result: url(PATHS.balanceResult), timeout: url(PATHS.balanceTimeout) };
      refuseForbiddenWords(urls.result);
      return urls;
    },
  };
}
