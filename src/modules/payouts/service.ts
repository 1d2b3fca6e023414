import { randomUUID } from "node:crypto";
import { z } from "zod";
import { scopeOf, type Principal } from "../../auth.ts";
import { randomReference } from "../../references.ts";
import type { PrismaClient, Reader } from "../../db/database.ts";
import type { PaymentChannel, Payout } from "../../db/generated/prisma/client.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { StatusDateFilters } from "../../filters.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import type { Logger } from "../../logger.ts";
import { amountSchema, parseCurrency } from "../../money.ts";
import { resolvePaging, toPage, type Page } from "../../paging.ts";
import { msisdnSchema, toMsisdn } from "../../phone.ts";
import type { Connectors } from "../../providers/index.ts";
import type { Connector, PayoutConnector, PayoutResult } from "../../providers/types.ts";
import { optionalTextSchema, parseInput } from "../../validation.ts";
import type { ChannelService } from "../channels/service.ts";
import type { EventPublisher } from "../events/publisher.ts";
import { toPublishedEvent, type StatusCounter } from "../events/status-machine.ts";
import type { Sql } from "../../db/sql.ts";
import { createMoneyOut, idOrReference } from "../money-out/lifecycle.ts";
import * as store from "./store.ts";
import { PAYOUT_STATUS, type PayoutQuery } from "./store.ts";

export interface PayoutInput {
  amount: unknown;
  phoneNumber?: string | null;
  currency?: string | null;
  paymentChannelId?: number | null;
  reference?: string | null;
  description?: string | null;
  commandId?: string | null;
}

export interface PayoutCallbackUrls {
  result: string;
  timeout: string;
  /** Where a status query's answer for this payout is posted (it carries the query's own ids, not the payout's). */
  statusResult(reference: string): string;
}

export interface PayoutServiceDeps {
  prisma: PrismaClient;
  sql: Sql;
  /** The reader for the lists (a replica when there is one); the primary when unset. */
  read?: Reader;
  channels: ChannelService;
  connectors: Connectors;
  publisher: EventPublisher;
  jobs: JobRunner;
  /** Counts committed status changes when set (/metrics). */
  metrics?: StatusCounter;
  logger: Logger;
  /** A payout with no result this long after it was sent is asked about, then with doubling waits. */
  resultOverdueMs: number;
  callbackUrls(channel: PaymentChannel): PayoutCallbackUrls;
}

export const PAYOUT_QUERY_JOB = "payout.query";
export const payoutCommands = ["BusinessPayment", "SalaryPayment", "PromotionPayment"] as const;

export { payoutSnapshot, type PayoutSnapshot } from "./store.ts";

/** A payout's input, in the order its fields are reported when several are wrong; the currency is the channel's to check. */
const payoutInput = z.object({
  amount: amountSchema,
  phoneNumber: msisdnSchema,
  reference: optionalTextSchema(100),
  description: optionalTextSchema(100),
  commandId: z
    .enum(payoutCommands, `must be one of ${payoutCommands.join(", ")}`)
    .nullish()
    .transform((command) => command ?? "BusinessPayment"),
  paymentChannelId: z.number().int().nullish(),
  currency: z.string().nullish(),
});

/**
 * Payouts over their own table, in the payments core's shape: validate -> channel and connector by
 * capability -> row (with its provider request id and its status-query job) -> provider -> transition,
 * the shared life of money sent out (money-out/lifecycle.ts). A payout whose outcome is unknown (a timeout,
 * a crash, a queue timeout) stays pending and is settled by asking the provider: it is never sent twice.
 */
export function createPayoutService(deps: PayoutServiceDeps) {
  const { prisma, channels, connectors, logger } = deps;
  const reader = deps.read?.prisma ?? prisma;
  const scope = scopeOf;

  const payoutsOf = (channel: PaymentChannel): PayoutConnector | undefined => connectors.for(channel)?.payouts;

  const moneyOut = createMoneyOut(deps, {
    table: PAYOUT_STATUS,
    queryJob: PAYOUT_QUERY_JOB,
    callScope: (payout) => ({ merchantId: payout.merchantId, payoutId: payout.id }),
    findScoped: store.findScoped,
  });

  /** The named channel, or the default one, or the newest active one that can pay out; a 400 naming the field otherwise. */
  async function payoutChannel(principal: Principal, channelId: number | null | undefined): Promise<{ channel: PaymentChannel; connector: Connector; payouts: PayoutConnector; config: unknown }> {
    const capable = (channel: PaymentChannel) => {
      const connector = connectors.for(channel);
      const payouts = connector?.payouts;
      const config = payouts ? channels.readChannelConfig(channel) : undefined;
      return connector && payouts && payouts.canPayOut(config) ? { channel, connector, payouts, config } : null;
    };
    if (channelId != null) {
      const channel = await channels.resolvePaymentChannel(principal, channelId);
      const found = capable(channel);
      if (!found) {
        const needs = connectors.for(channel)?.payouts?.payOutNeeds;
        throw new ValidationError("payment_channel_id", `payment channel ${channel.id} (${channel.provider}) cannot pay out${needs ? `: its config needs ${needs}` : ""}`);
      }
      return found;
    }
    const active = await prisma.paymentChannel.findMany({ where: { ...scope(principal), isActive: true }, orderBy: [{ isDefault: "desc" }, { id: "desc" }] });
    for (const channel of active) {
      if (!channels.isUsableChannel(channel)) continue; // a live sandbox row that predates the rule
      const found = capable(channel);
      if (found) return found;
    }
    throw new ValidationError("payment_channel_id", "is required: the merchant has no active channel that can pay out");
  }

  /**
   * A result is applied only when it matches the payout field by field: it names the payout's request id (a status
   * answer also comes on the payout's own reference path, and must name it too), and a success carries the exact
   * amount; missing or unreadable does not match. Anything else is logged for support and left to the payout's
   * status query. `asked`: the answer to our own status request, handed over in-process by the connector
   * (Paystack's verify, the sandbox), which is about the payout we asked of whether or not it repeats its id.
   */
  async function applyResult(channel: PaymentChannel, result: PayoutResult, reference?: string, asked = false): Promise<boolean> {
    const payout = reference
      ? await store.findByChannelReference(prisma, channel.id, reference)
      : result.providerRequestId
        ? await store.findByProviderRequestId(prisma, channel.id, result.providerRequestId)
        : null;
    if (!payout) {
      logger.warn({ channelId: channel.id, reference, providerRequestId: result.providerRequestId }, "payout result for an unknown payout; not applied");
      return false;
    }
    const mismatched: string[] = [];
    if (result.providerRequestId === null ? !asked : result.providerRequestId !== payout.providerRequestId) mismatched.push("request_id");
    if (result.outcome.state === "completed" && (result.amount === null || result.amount !== payout.amount)) mismatched.push("amount");
    if (mismatched.length) {
      logger.warn(
        { reference: payout.reference, providerRequestId: result.providerRequestId, mismatched, expected: String(payout.amount), got: String(result.amount) },
        "payout result does not match the payout field by field; not applied, left for the status query",
      );
      return false;
    }
    const applied = await moneyOut.applyOutcome(payout, result.outcome);
    if (applied.applied) logger.info({ reference: payout.reference, status: applied.row.status }, "payout settled");
    return true;
  }

  /** Our status query's answer, handed over by the connector: settles the payout when it tells its outcome, else the job asks again later. */
  async function applyStatusResult(channel: PaymentChannel, payouts: PayoutConnector, body: unknown, reference: string): Promise<void> {
    const result = payouts.parseStatusResult(body);
    if (!result) {
      logger.info({ reference }, "payout status query did not settle the payout; asking again later");
      return;
    }
    await applyResult(channel, result, reference, true);
  }

  /** Asks the provider what became of a payout: Daraja answers later on the status URL, others at once. */
  async function askProvider(payout: Payout & { channel: PaymentChannel }, payouts: PayoutConnector): Promise<void> {
    const urls = deps.callbackUrls(payout.channel);
    await moneyOut.callFor(payout, () =>
      payouts.queryStatus({
        config: channels.readChannelConfig(payout.channel),
        reference: payout.reference,
        providerRequestId: payout.providerRequestId,
        resultUrl: urls.statusResult(payout.reference),
        timeoutUrl: urls.timeout,
        deliverResult: async (body) => void (await applyStatusResult(payout.channel, payouts, body, payout.reference)),
      }),
    );
  }

  /** Asks the provider what became of a payout with no result. */
  moneyOut.askUntilSettled({
    find: (payoutId) => store.findWithChannel(prisma, payoutId),
    via: (payout) => payoutsOf(payout.channel),
    ask: async (payout, payouts) => {
      await askProvider(payout, payouts);
      return (await store.statusOf(prisma, payout.id)) !== "pending";
    },
    firstWaitMs: () => deps.resultOverdueMs,
  });

  return {
    applyResult,
    applyStatusResult,

    /**
     * A provider notified us about a payout (a Paystack transfer webhook): its outcome is taken from the
     * provider's own answer to a status query, never from the notification. Throws when it cannot be asked.
     */
    async verifyPayout(channel: PaymentChannel, reference: string): Promise<void> {
      const payout = await store.findByChannelReference(prisma, channel.id, reference);
      const payouts = payoutsOf(channel);
      if (!payout || !payouts) {
        logger.warn({ channelId: channel.id }, "payout notification for an unknown payout; not applied");
        return;
      }
      if (payout.status === "pending") await askProvider(payout, payouts);
    },

    /** Daraja gave up queueing a payout: whether it was paid is unknown, so ask now rather than wait. */
    async resultTimedOut(channel: PaymentChannel, providerRequestId: string | null) {
      await moneyOut.askNow(providerRequestId ? await store.findByProviderRequestId(prisma, channel.id, providerRequestId) : null);
    },

    async createPayout(principal: Principal, input: PayoutInput): Promise<Payout> {
      const recovered = await moneyOut.recovered(principal);
      if (recovered) return recovered;
      const { amount, phoneNumber, reference: clientReference, description, commandId, ...wanted } = parseInput(payoutInput, input);
      const { channel, connector, payouts, config } = await payoutChannel(principal, wanted.paymentChannelId);
      const currencyInput = wanted.currency || (await prisma.merchant.findUniqueOrThrow({ where: { id: principal.merchantId }, select: { defaultCurrency: true } })).defaultCurrency;
      const currency = parseCurrency(currencyInput, connector.currencies, channel.provider);
      payouts.checkAmount(amount, currency);
      const urls = deps.callbackUrls(channel);

      return moneyOut.reserveAndSend(principal, {
        reserve: (tx) =>
          store.insertPayout(tx, {
            ...scope(principal),
            reference: randomReference("po_"),
            clientReference,
            amount,
            currency,
            phoneNumber,
            commandId,
            description,
            channelId: channel.id,
            providerRequestId: randomUUID(),
          }),
        firstAskInMs: deps.resultOverdueMs,
        async send(payout) {
          const accepted = await payouts.send({
            config,
            reference: payout.reference,
            providerRequestId: payout.providerRequestId,
            amount,
            currency,
            phoneNumber: toMsisdn(phoneNumber),
            commandId,
            remarks: description ?? clientReference ?? "Payout",
            resultUrl: urls.result,
            timeoutUrl: urls.timeout,
            deliverResult: async (body) => void (await applyResult(channel, payouts.parseResult(body))),
          });
          await store.recordConversationId(prisma, payout.id, accepted.providerConversationId || null);
        },
        async refused(payout, error) {
          await moneyOut.applyOutcome(payout, { state: "failed", code: error.code, message: error.message });
          throw error;
        },
      });
    },

    /** By id (digits) or reference, scoped to the caller's merchant and mode. */
    async getPayout(principal: Principal, key: string, query: PayoutQuery = {}): Promise<Payout> {
      const payout = await store.findScoped(prisma, principal, idOrReference(key), query);
      if (!payout) throw new NotFoundError("Payout");
      return payout;
    },

    /** One page, newest first, with totals (GET /v1/payouts). */
    async listPage(principal: Principal, input: StatusDateFilters & { page?: number | null; limit?: number | null }, query: PayoutQuery = {}): Promise<Page<Payout>> {
      const paging = resolvePaging(input);
      const { items, total } = await store.listPage(reader, principal, input, paging, query);
      return toPage(items, total, paging);
    },

    /** GraphQL's payouts connection: one slice for Pothos's cursor arguments, and the total. */
    connectionSlice: (principal: Principal, filters: StatusDateFilters, query: object) => store.connectionSlice(reader, principal, filters, query),
    count: (principal: Principal, filters: StatusDateFilters) => store.count(reader, principal, filters),

    /** The latest settling event of a payout, as subscribers receive it. */
    async lastEvent(payoutId: number) {
      const event = await prisma.event.findFirst({ where: { payoutId }, orderBy: { id: "desc" } });
      return event ? toPublishedEvent(event) : null;
    },
  };
}

export type PayoutService = ReturnType<typeof createPayoutService>;
