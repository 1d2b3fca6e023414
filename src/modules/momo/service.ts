import type { Principal } from "../../auth.ts";
import type { MomoConfig } from "../../config.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Mode, PaymentChannel, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, ValidationError } from "../../errors.ts";
import type { JobDefinition, JobRunner } from "../../jobs/runner.ts";
import type { Logger } from "../../logger.ts";
import { parseAmount } from "../../money.ts";
import { normalizeMsisdn, toMsisdn } from "../../phone.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { Connectors } from "../../providers/index.ts";
import { providerNames } from "../../providers/registry.ts";
import type { C2bDecision, C2bPayment, MomoConnector } from "../../providers/types.ts";
import type { MerchantUrls } from "../../security/outbound.ts";
import { optionalText } from "../../validation.ts";
import type { CallbackUrls } from "../channels/callback-urls.ts";
import type { ChannelService } from "../channels/service.ts";
import { momoConnectorOf, type TransactionService } from "../transactions/service.ts";

/**
 * Mobile money's C2B rules, provider-neutral: the merchant's registration, the validation relay, recording
 * confirmations, and simulation. The provider's side (registering URLs with it, simulating, its payloads and
 * reply codes) is its connector's (providers/mpesa/c2b.ts for Daraja). Its callbacks arrive through the
 * generic callback route (modules/callbacks), which hands their outcomes here. Payments themselves are
 * recorded by the payments core (services.transactions), so a callback, a duplicate of it and a
 * reconciliation query racing each other settle a transaction exactly once.
 */
export interface MomoServiceDeps {
  prisma: PrismaClient;
  channels: ChannelService;
  transactions: TransactionService;
  connectors: Connectors;
  jobs: JobRunner;
  /** The URL guard and outbound-HTTP rule shared with webhooks: every call to a merchant's URL goes through it. */
  merchantUrls: MerchantUrls;
  /** The gateway's own callback URLs per channel (its connector lays them out): C2B registration hands them to the provider. */
  callbackUrls: CallbackUrls;
  config: MomoConfig;
  logger: Logger;
}

export interface C2bUrlsInput {
  paymentChannelId?: number | null;
  confirmationUrl?: string | null;
  validationUrl?: string | null;
  responseType?: string | null;
}

export interface SimulateC2bInput {
  paymentChannelId?: number | null;
  amount: unknown;
  phoneNumber?: string | null;
  reference?: string | null;
}

const MERCHANT_FORWARD_TIMEOUT_MS = 10_000;
export const C2B_FORWARD_JOB = "momo.c2b_forward";

/** A merchant URL as given: present, then through the URL guard (https in live mode, no private addresses). */
async function merchantUrl(urls: MerchantUrls, mode: Mode, value: string | null | undefined, field: string): Promise<string> {
  const url = value?.trim();
  if (!url) throw new ValidationError(field, "is required");
  return urls.check(mode, url, field);
}

export function createMomoService(deps: MomoServiceDeps) {
  const { prisma, channels, transactions, connectors, merchantUrls, config, logger } = deps;

  const momoOf = (channel: PaymentChannel): MomoConnector => momoConnectorOf(connectors, channel);

  /**
   * Confirmations are forwarded to the merchant in the provider's own format, retried by the job runner. Any 2xx
   * is delivered, whatever its body (Daraja itself reads no more); anything else, a redirect included, is retried.
   */
  deps.jobs.register<{ url: string; body: unknown; reference: string; mode?: Mode }>({
    kind: C2B_FORWARD_JOB,
    maxAttempts: 8,
    async run({ url, body, mode }) {
      // Jobs queued before `mode` was recorded get the strict (live) rule.
      const result = await merchantUrls.postJson(mode ?? "live", url, body, MERCHANT_FORWARD_TIMEOUT_MS);
      if (!result.ok) throw new Error(result.error ?? "not delivered");
    },
    async onGiveUp({ reference }, _job, error) {
      logger.warn({ reference, err: error }, "forwarding the C2B confirmation to the merchant failed for good");
    },
  });

  /** Records the payment once per TransID; the forward to the merchant is queued with the first recording only. */
  async function recordConfirmation(channel: PaymentChannel, momo: MomoConnector, payment: C2bPayment, body: unknown): Promise<Transaction> {
    const registration = await prisma.momoC2bRegistration.findUnique({ where: { channelId: channel.id } });
    const { transaction } = await transactions.recordProviderPayment(
      channel,
      {
        providerReference: payment.transId,
        amount: payment.amount,
        currency: momo.currency,
        phoneNumber: payment.phoneNumber,
        clientReference: payment.billRef,
        paymentMethod: "momo_c2b",
      },
      registration ? [{ kind: C2B_FORWARD_JOB, payload: { url: registration.confirmationUrl, body: body as object, reference: payment.transId, mode: channel.mode } }] : [],
    );
    return transaction;
  }

  /** Relays the merchant's verdict synchronously; when it does not answer in time, the registered ResponseType decides. */
  async function validateC2b(channel: PaymentChannel, momo: MomoConnector, body: unknown): Promise<C2bDecision> {
    const registration = await prisma.momoC2bRegistration.findUnique({ where: { channelId: channel.id } });
    const fallback: C2bDecision = registration?.responseType === "Cancelled" ? { accept: false, code: momo.c2bDefaultRejectCode } : { accept: true };
    if (!registration) return fallback;
    const answer = await merchantUrls.postJson(channel.mode, registration.validationUrl, body, config.c2bValidationTimeoutMs);
    let decision: C2bDecision | null = null;
    if (answer.ok) {
      try {
        decision = momo.readC2bValidationDecision(JSON.parse(answer.body));
      } catch {
        decision = null;
      }
    }
    if (!decision) logger.warn({ channelId: channel.id, err: answer.error ?? "not a validation answer" }, "merchant C2B validation URL failed; using the registered ResponseType");
    return decision ?? fallback;
  }

  return {
    /**
     * A C2B validation request: the merchant's verdict, relayed synchronously (the connector answers it in the
     * provider's reply shape); when the merchant does not answer in time, the registered ResponseType decides.
     */
    async relayC2bValidation(channel: PaymentChannel, body: unknown): Promise<C2bDecision> {
      return validateC2b(channel, momoOf(channel), body);
    },

    /** A C2B payment made: recorded once per TransID, and forwarded to the merchant's confirmation URL. */
    async recordC2bConfirmation(channel: PaymentChannel, payment: C2bPayment, body: unknown): Promise<void> {
      await recordConfirmation(channel, momoOf(channel), payment, body);
    },

    async registerC2bUrls(principal: Principal, input: C2bUrlsInput) {
      const confirmationUrl = await merchantUrl(merchantUrls, principal.mode, input.confirmationUrl, "confirmation_url");
      const validationUrl = await merchantUrl(merchantUrls, principal.mode, input.validationUrl, "validation_url");
      const responseType = input.responseType ?? "Completed";
      if (responseType !== "Completed" && responseType !== "Cancelled") throw new ValidationError("response_type", "must be Completed or Cancelled");
      const type: "Completed" | "Cancelled" = responseType;
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const momo = momoOf(channel);
      const { c2bConfirmation, c2bValidation } = deps.callbackUrls.of(channel);
      if (!c2bConfirmation || !c2bValidation) throw new ValidationError("payment_channel_id", `payment channel ${channel.id} (${channel.provider}) takes no C2B payments`);
      // The provider calls the gateway; the gateway relays to the merchant's URLs stored here.
      await withProviderCallScope({ merchantId: channel.merchantId }, () =>
        momo.registerC2bUrls({ config: channels.readChannelConfig(channel), confirmationUrl: c2bConfirmation, validationUrl: c2bValidation, responseType: type }),
      );
      const data = { confirmationUrl, validationUrl, responseType: type };
      await prisma.momoC2bRegistration.upsert({ where: { channelId: channel.id }, create: { channelId: channel.id, ...data }, update: data });
      return data;
    },

    /**
     * Whether payers pay this channel from their phone's menu (C2B: its connector reads the channel's config) and,
     * if so, whether its URLs are registered with the provider (a registration is only stored once it accepted them).
     */
    async c2bStatus(channel: PaymentChannel): Promise<{ takesC2b: boolean; registered: boolean }> {
      const momo = connectors.for(channel)?.momo;
      const takesC2b = Boolean(momo?.takesC2b(channels.readChannelConfig(channel)));
      if (!takesC2b) return { takesC2b, registered: false };
      const registration = await prisma.momoC2bRegistration.findUnique({ where: { channelId: channel.id }, select: { channelId: true } });
      return { takesC2b, registered: registration !== null };
    },

    /** Sandbox channels only (the connector says which: the sandbox provider, an mpesa channel in Daraja's sandbox). */
    async simulateC2b(principal: Principal, input: SimulateC2bInput) {
      const amount = parseAmount(input.amount);
      const phoneNumber = toMsisdn(normalizeMsisdn(input.phoneNumber));
      const reference = optionalText(input.reference, "reference", 100);
      if (!reference) throw new ValidationError("reference", "is required");
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const momo = momoOf(channel);
      const channelConfig = channels.readChannelConfig(channel);
      if (!momo.canSimulateC2b(channelConfig)) throw new GatewayError("forbidden", "C2B simulation is available on sandbox channels only");
      const startedAt = new Date(Date.now() - 1000);
      // On record for the merchant: the payment it makes is not known yet.
      const simulated = await withProviderCallScope({ merchantId: channel.merchantId }, () =>
        momo.simulateC2b({
          config: channelConfig,
          amount,
          currency: momo.currency,
          phoneNumber,
          billRef: reference,
          // The simulator plays the provider: it is answered in the provider's reply format, as a real validation request is.
          deliverValidation: async (body) => {
            momo.parseC2bPayment(body);
            return momo.c2bValidationReply(await validateC2b(channel, momo, body));
          },
          deliverConfirmation: async (body) => {
            await recordConfirmation(channel, momo, momo.parseC2bPayment(body), body);
          },
        }),
      );
      // The merchant's validation URL refused it: the provider sends no confirmation and records nothing.
      if (simulated?.rejected) return { amount, phoneNumber, reference, status: "failed" as const, transaction: null };
      // The provider confirms asynchronously: wait briefly for its confirmation before answering.
      let found: Transaction | null = null;
      for (let i = 0; i < 30 && !found?.completedAt; i++) {
        found = await transactions.findSimulatedC2b(channel, { clientReference: reference, amount, since: startedAt });
        if (!found?.completedAt) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return { amount, phoneNumber, reference, status: found?.status ?? "pending", transaction: found };
    },

    /** Stops the connectors' own timers (the sandbox's simulated customers and payees). */
    close() {
      for (const connector of providerNames.map((name) => connectors[name])) {
        connector.momo?.close?.();
        connector.payouts?.close?.();
      }
    },
  };
}

export type MomoService = ReturnType<typeof createMomoService>;
