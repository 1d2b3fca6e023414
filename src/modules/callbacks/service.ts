import type { PaymentChannel } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError } from "../../errors.ts";
import type { Logger } from "../../logger.ts";
import type { Connectors } from "../../providers/index.ts";
import { providerNames } from "../../providers/registry.ts";
import type { Connector, InboundCallback, InboundConnector, InboundVerdict } from "../../providers/types.ts";
import type { ChannelService } from "../channels/service.ts";
import type { MomoService } from "../momo/service.ts";
import type { PayoutService } from "../payouts/service.ts";
import type { ReconciliationService } from "../reconciliation/service.ts";
import type { RefundService } from "../refunds/service.ts";
import type { DisputeService } from "../disputes/service.ts";
import type { TransactionService } from "../transactions/service.ts";

export interface CallbackServiceDeps {
  channels: ChannelService;
  connectors: Connectors;
  transactions: TransactionService;
  payouts: PayoutService;
  refunds: Pick<RefundService, "verifyRefund" | "applyResult" | "resultTimedOut">;
  disputes: Pick<DisputeService, "onNotice">;
  momo: MomoService;
  /** Where an account balance answer for a reconciliation goes. */
  reconciliations?: Pick<ReconciliationService, "applyBalance">;
  logger: Logger;
}

/** What owns a payout's or refund's outcome: applies its result (matched on the provider request id, or on our reference for a status answer), or asks at once after a queue timeout. */
interface OutcomeOwner<Result> {
  applyResult(channel: PaymentChannel, result: Result, reference?: string): Promise<unknown>;
  resultTimedOut(channel: PaymentChannel, providerRequestId: string | null): Promise<void>;
}

/** A result, a queue timeout, or a status query's answer (null: it did not tell; the owner's job asks again later). */
type OutcomeCallback<Result> = { result: Result } | { providerRequestId: string | null } | { reference: string; result: Result | null };

/** One provider callback as it arrived at /callbacks/<provider>/<token><path>. */
export interface ReceivedCallback {
  /** The path's provider segment: a provider's registry name, or an alias its connector keeps (URLs already registered). */
  provider: string;
  /** The channel's callback token, hex-encoded as in the URLs handed out. */
  token: string;
  /** What follows the token, as sent (percent-encoded): "/stk", "/b2c/status/po_x", "" for the token itself. */
  path: string;
  rawBody: Buffer;
  contentType: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** Fastify's limit on one path parameter (maxParamLength): the per-provider routes this replaces answered a longer one with a 414. */
const MAX_PARAM_LENGTH = 100;

/** The connector path ("/b2c/status/:reference") a raw path matches, with its named segments decoded; null when none does. */
export function matchCallbackPath(paths: readonly string[], rawPath: string): { path: string; params: Record<string, string> } | null {
  const given = rawPath.split("/");
  for (const path of paths) {
    const pattern = path.split("/");
    if (pattern.length !== given.length) continue;
    const params: Record<string, string> = {};
    let matched = true;
    for (const [i, part] of pattern.entries()) {
      const segment = given[i]!;
      if (!part.startsWith(":")) {
        if (part !== segment) matched = false;
      } else if (segment === "") {
        matched = false;
      } else {
        try {
          params[part.slice(1)] = decodeURIComponent(segment);
        } catch {
          matched = false;
        }
        if (matched && params[part.slice(1)]!.length > MAX_PARAM_LENGTH) throw new GatewayError("uri_too_long");
      }
      if (!matched) break;
    }
    if (matched) return { path, params };
  }
  return null;
}

/**
 * Every provider's callbacks, through one pipeline: find the channel by its token and the path's provider
 * -> its connector authenticates and parses the callback into a provider-neutral outcome -> the service
 * that owns the object applies it (once: duplicates and races settle nothing twice) -> the connector's
 * acknowledgement, or its refusal, in the provider's reply shape. Nothing here knows a wire format.
 */
export function createCallbackService(deps: CallbackServiceDeps) {
  const { channels, connectors, transactions, payouts, refunds, disputes, momo, logger } = deps;

  /** A payout's or refund's outcome callback, handed to the service that owns the object. */
  async function settleBy<Result>(owner: OutcomeOwner<Result>, what: string, channel: PaymentChannel, callback: OutcomeCallback<Result>) {
    if ("providerRequestId" in callback) return void (await owner.resultTimedOut(channel, callback.providerRequestId));
    if (!("reference" in callback)) return void (await owner.applyResult(channel, callback.result));
    if (callback.result) await owner.applyResult(channel, callback.result, callback.reference);
    else logger.info({ reference: callback.reference }, `${what} status query did not settle the ${what}; asking again later`);
  }

  const all: Connector[] = providerNames.map((name) => connectors[name]);

  /** The connectors a path's provider segment names: its own, or those keeping it as an alias. */
  function connectorsAt(segment: string): Connector[] {
    return all.filter((connector) => connector.inbound && (connector.provider === segment || connector.inbound.aliases.includes(segment)));
  }

  /** Applies one outcome; the verdict is what the reply depends on (a C2B validation's). */
  async function apply(channel: PaymentChannel, callback: InboundCallback): Promise<InboundVerdict> {
    switch (callback.kind) {
      case "collection_result":
        await transactions.applyCollectionCallback(channel, callback.result);
        return undefined;
      case "c2b_validation":
        return momo.relayC2bValidation(channel, callback.body);
      case "c2b_confirmation":
        await momo.recordC2bConfirmation(channel, callback.payment, callback.body);
        return undefined;
      case "payout_result":
      case "payout_timeout":
      case "payout_status_result":
        await settleBy(payouts, "payout", channel, callback);
        return undefined;
      case "refund_result":
      case "refund_timeout":
      case "refund_status_result":
        await settleBy(refunds, "refund", channel, callback);
        return undefined;
      case "balance_result":
        await deps.reconciliations?.applyBalance(channel, callback.reference, callback.result);
        return undefined;
      case "notification": {
        const { notification } = callback;
        if (notification.kind === "collection") {
          await transactions.verifyHostedPaymentByReference(notification.reference, `webhook ${notification.event}`, channel.id);
        } else if (notification.kind === "payout") {
          await payouts.verifyPayout(channel, notification.reference);
        } else if (notification.kind === "refund") {
          await refunds.verifyRefund(channel, { paymentReference: notification.paymentReference, providerReference: notification.providerReference });
        } else if (notification.kind === "dispute") {
          await disputes.onNotice(channel, { providerReference: notification.providerReference, event: notification.event });
        }
        return undefined;
      }
    }
  }

  return {
    /** The most any connector answering at this provider segment reads: a larger body is refused unread. */
    maxBodyBytes(segment: string): number | null {
      const limits = connectorsAt(segment).map((connector) => connector.inbound!.maxBodyBytes);
      return limits.length ? Math.max(...limits) : null;
    },

    /**
     * One callback, answered as `{status, body}`. A path no connector serves is route_not_found and a wrong
     * token (or one of another provider's channel) a 404, before the body is read; neither applies anything.
     * Errors the connector does not answer in its own shape are thrown for the gateway's error envelope.
     */
    async receive(received: ReceivedCallback): Promise<{ status: number; body: unknown }> {
      const candidates = connectorsAt(received.provider);
      if (!candidates.some((connector) => matchCallbackPath(connector.inbound!.paths, received.path))) throw new GatewayError("route_not_found");
      const channel = await channels.findByCallbackSegment(received.token);
      const connector = channel ? connectors.for(channel) : undefined;
      const inbound: InboundConnector | undefined = connector && candidates.includes(connector) ? connector.inbound : undefined;
      const match = inbound ? matchCallbackPath(inbound.paths, received.path) : null;
      if (!channel || !inbound || !match) throw new NotFoundError("Callback");
      if (received.rawBody.length > inbound.maxBodyBytes) throw new GatewayError("payload_too_large");
      try {
        const callback = inbound.read({
          ...match,
          rawBody: received.rawBody,
          contentType: received.contentType,
          headers: received.headers,
          config: () => channels.readChannelConfig(channel),
        });
        const verdict = await apply(channel, callback);
        return { status: 200, body: inbound.acknowledge(callback, verdict) };
      } catch (error) {
        const refusal = error instanceof GatewayError ? inbound.refuse(error) : null;
        if (!refusal) throw error;
        // Unreadable (a C2B amount that is no amount, a missing id): nothing applied; support sees why here.
        logger.warn({ channelId: channel.id, provider: channel.provider, path: match.path, reason: (error as Error).message }, "provider callback refused as unreadable; not applied");
        return refusal;
      }
    },
  };
}

export type CallbackService = ReturnType<typeof createCallbackService>;
