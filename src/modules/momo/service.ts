import { randomBytes } from "node:crypto";
import type { Principal } from "../../auth.ts";
import type { MomoConfig } from "../../config.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { PaymentChannel, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import type { Logger } from "../../logger.ts";
import { parseAmount } from "../../money.ts";
import type { Connectors } from "../../providers/index.ts";
import type { MomoConnector, StkCallback, StkOutcome } from "../../providers/types.ts";
import type { ChannelService } from "../channels/service.ts";
import { newReference, type TransactionService } from "../transactions/service.ts";
import { optionalText } from "../../validation.ts";

/**
 * Mobile money (M-Pesa): STK push collections, their callbacks and reconciliation, and C2B.
 * Every status change goes through transactions.transition (the state machine), so a callback, a
 * duplicate of it and a reconciliation query racing each other settle a transaction exactly once.
 */
export interface MomoServiceDeps {
  prisma: PrismaClient;
  channels: ChannelService;
  transactions: TransactionService;
  connectors: Connectors;
  publicBaseUrl: string;
  config: MomoConfig;
  logger: Logger;
}

export interface StkPushInput {
  amount: unknown;
  phoneNumber?: string | null;
  paymentChannelId?: number | null;
  reference?: string | null;
  description?: string | null;
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

type Decision = { accept: true } | { accept: false; code: string };

const CURRENCY = "KES";
const RECONCILE_BATCH = 20;
/** How long one instance holds a claimed row; longer than a query can take. */
const RECONCILE_LEASE_MS = 60_000;
const MAX_BACKOFF_MS = 60_000;
const MERCHANT_FORWARD_TIMEOUT_MS = 10_000;

export function parsePhone(value: string | null | undefined, field = "phone_number"): string {
  if (!value) throw new ValidationError(field, "is required");
  const phone = value.trim();
  if (!/^254\d{9}$/.test(phone)) throw new ValidationError(field, "must be in the format 254XXXXXXXXX (12 digits)");
  return phone;
}

function parseUrl(value: string | null | undefined, field: string): string {
  if (!value) throw new ValidationError(field, "is required");
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new ValidationError(field, "must be an http or https URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new ValidationError(field, "must be an http or https URL");
  return url.toString();
}

/**
 * The callback path carries the channel's token hex-encoded: base64url text could by chance spell a
 * word Daraja refuses in URLs ("exe", "sql", ...); hex cannot.
 */
const encodeToken = (token: string) => Buffer.from(token, "utf8").toString("hex");
function decodeToken(segment: string): string | null {
  if (!/^(?:[0-9a-f]{2}){1,128}$/.test(segment)) return null;
  const token = Buffer.from(segment, "hex").toString("latin1");
  return /^[A-Za-z0-9_-]+$/.test(token) ? token : null;
}

export function createMomoService(deps: MomoServiceDeps) {
  const { prisma, channels, transactions, connectors, config, logger } = deps;

  function momoOf(channel: PaymentChannel): MomoConnector {
    const momo = connectors[channel.provider as keyof Connectors]?.momo;
    if (!momo) throw new ValidationError("payment_channel_id", `payment channel ${channel.id} (${channel.provider}) does not take mobile money`);
    return momo;
  }

  function callbackUrls(channel: PaymentChannel, momo: MomoConnector) {
    const base = `${deps.publicBaseUrl}/callbacks/daraja/${encodeToken(channel.callbackToken)}`;
    const urls = { stk: `${base}/stk`, validation: `${base}/c2b/validation`, confirmation: `${base}/c2b/confirmation` };
    const bad = momo.forbiddenUrlWords.find((word) => urls.stk.toLowerCase().includes(word));
    if (bad) {
      throw new GatewayError("validation_failed", `PUBLIC_BASE_URL contains "${bad}", which M-Pesa refuses in callback URLs; serve the gateway from another host name`);
    }
    return urls;
  }

  async function channelByToken(segment: string): Promise<PaymentChannel> {
    const token = decodeToken(segment);
    const channel = token ? await prisma.paymentChannel.findUnique({ where: { callbackToken: token } }) : null;
    if (!channel) throw new NotFoundError("Callback");
    return channel;
  }

  /** Records a provider's verdict on one push; false when the verdict was not applied. */
  async function settleStk(transaction: Transaction, outcome: StkOutcome, source: string): Promise<boolean> {
    if (outcome.state === "pending") return false;
    const changes = {};
    const result =
      outcome.state === "completed"
        ? await transactions.transition({
            transactionId: transaction.id,
            to: "completed",
            changes: { ...changes, ...(outcome.receipt ? { providerReference: outcome.receipt } : {}) },
          })
        : await transactions.transition({
            transactionId: transaction.id,
            to: "failed",
            changes: { ...changes, failureCode: outcome.resultCode, failureReason: outcome.resultDesc.slice(0, 500) || null },
          });
    await prisma.momoStkReconciliation.deleteMany({ where: { transactionId: transaction.id } });
    if (result.applied) logger.info({ reference: transaction.reference, status: result.transaction.status, source }, "STK push settled");
    return result.applied;
  }

  /** A callback is applied only when it matches what was asked for: same push, amount and phone. */
  async function applyStkCallback(channel: PaymentChannel, callback: StkCallback): Promise<boolean> {
    const transaction = await prisma.transaction.findFirst({ where: { channelId: channel.id, checkoutRequestId: callback.checkoutRequestId } });
    if (!transaction) {
      logger.warn({ channelId: channel.id, checkoutRequestId: callback.checkoutRequestId }, "STK callback for an unknown CheckoutRequestID; not applied");
      return false;
    }
    if (callback.resultCode === "0") {
      const amountOk = callback.amount === null || callback.amount === transaction.amount;
      const phoneOk = callback.phoneNumber === null || !/^\d+$/.test(callback.phoneNumber) || callback.phoneNumber === transaction.phoneNumber;
      if (!amountOk || !phoneOk) {
        logger.warn(
          { reference: transaction.reference, expectedAmount: String(transaction.amount), callbackAmount: String(callback.amount), phoneMatches: phoneOk },
          "STK callback does not match the transaction (amount or phone); not applied",
        );
        return true;
      }
      await settleStk(transaction, { state: "completed", resultCode: "0", resultDesc: callback.resultDesc, receipt: callback.receipt }, "callback");
    } else {
      await settleStk(transaction, { state: "failed", resultCode: callback.resultCode, resultDesc: callback.resultDesc }, "callback");
    }
    return true;
  }

  async function postJson(url: string, body: unknown, timeoutMs: number): Promise<unknown> {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return text ? (JSON.parse(text) as unknown) : null;
  }

  /** Forwards are best effort and must not delay Daraja's acknowledgement; close() waits for them. */
  const forwards = new Set<Promise<void>>();
  function forwardConfirmation(url: string, body: unknown, reference: string) {
    const sending = postJson(url, body, MERCHANT_FORWARD_TIMEOUT_MS)
      .then(() => undefined)
      .catch((error: unknown) => logger.warn({ reference, err: (error as Error).message }, "forwarding the C2B confirmation to the merchant failed"))
      .finally(() => forwards.delete(sending));
    forwards.add(sending);
  }

  /** Records a C2B payment once per TransID (the unique channel + provider reference), then completes it. */
  async function recordC2bPayment(channel: PaymentChannel, momo: MomoConnector, body: unknown): Promise<{ transaction: Transaction; applied: boolean }> {
    const payment = momo.parseC2bPayment(body);
    const where = { channelId: channel.id, providerReference: payment.transId };
    let transaction = await prisma.transaction.findFirst({ where });
    if (!transaction) {
      try {
        transaction = await prisma.transaction.create({
          data: {
            merchantId: channel.merchantId,
            mode: channel.mode,
            reference: newReference(),
            accessCode: randomBytes(12).toString("hex"),
            amount: payment.amount,
            currency: CURRENCY,
            paymentMethod: "momo_c2b",
            phoneNumber: payment.phoneNumber,
            clientReference: payment.billRef.slice(0, 100) || null,
            providerReference: payment.transId,
            channelId: channel.id,
          },
        });
      } catch (error) {
        // A concurrent delivery of the same confirmation inserted it first.
        if ((error as { code?: string }).code !== "P2002") throw error;
        transaction = await prisma.transaction.findFirstOrThrow({ where });
      }
    }
    // A row left pending by an interrupted earlier delivery is completed now.
    const result = await transactions.transition({ transactionId: transaction.id, to: "completed" });
    return { transaction: result.transaction, applied: result.applied };
  }

  async function handleConfirmation(channel: PaymentChannel, momo: MomoConnector, body: unknown) {
    const { transaction, applied } = await recordC2bPayment(channel, momo, body);
    if (applied) {
      const registration = await prisma.momoC2bRegistration.findUnique({ where: { channelId: channel.id } });
      if (registration) forwardConfirmation(registration.confirmationUrl, body, transaction.reference);
    }
    return transaction;
  }

  let running: Promise<unknown> | null = null;

  const service = {
    callbackUrls: (channel: PaymentChannel) => callbackUrls(channel, momoOf(channel)),

    /** validate -> resolve channel -> ask the provider -> record; a refused push leaves no row behind. */
    async startStkPush(principal: Principal, input: StkPushInput) {
      const amount = parseAmount(input.amount);
      const phoneNumber = parsePhone(input.phoneNumber);
      const clientReference = optionalText(input.reference, "reference", 100);
      const description = optionalText(input.description, "description", 500);
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const momo = momoOf(channel);
      const connector = connectors[channel.provider as keyof Connectors];
      if (!connector.currencies.includes(CURRENCY)) throw new ValidationError("payment_channel_id", `payment channel ${channel.id} cannot collect ${CURRENCY}`);
      const reference = newReference();
      const accepted = await momo.stkPush({
        config: channels.readChannelConfig(channel),
        amount,
        currency: CURRENCY,
        phoneNumber,
        accountReference: clientReference ?? reference,
        description: description ?? "Payment",
        callbackUrl: callbackUrls(channel, momo).stk,
        deliverCallback: async (body) => applyStkCallback(channel, momo.parseStkCallback(body)),
      });
      const transaction = await prisma.transaction.create({
        data: {
          merchantId: principal.merchantId,
          mode: principal.mode,
          reference,
          accessCode: randomBytes(12).toString("hex"),
          amount,
          currency: CURRENCY,
          description,
          phoneNumber,
          paymentMethod: "momo_stk",
          clientReference,
          checkoutRequestId: accepted.checkoutRequestId,
          channelId: channel.id,
          stkReconciliation: { create: { reconcileAt: new Date(Date.now() + config.stkCallbackOverdueMs) } },
        },
      });
      return { transaction, customerMessage: accepted.customerMessage };
    },

    /** Daraja's STK callback: a wrong token is a 404 and nothing is applied; everything else is acknowledged. */
    async handleStkCallback(tokenSegment: string, body: unknown): Promise<unknown> {
      const channel = await channelByToken(tokenSegment);
      const momo = momoOf(channel);
      await applyStkCallback(channel, momo.parseStkCallback(body));
      return momo.stkCallbackAck();
    },

    async registerC2bUrls(principal: Principal, input: C2bUrlsInput) {
      const confirmationUrl = parseUrl(input.confirmationUrl, "confirmation_url");
      const validationUrl = parseUrl(input.validationUrl, "validation_url");
      const responseType = input.responseType ?? "Completed";
      if (responseType !== "Completed" && responseType !== "Cancelled") throw new ValidationError("response_type", "must be Completed or Cancelled");
      const type: "Completed" | "Cancelled" = responseType;
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const momo = momoOf(channel);
      const own = callbackUrls(channel, momo);
      // Daraja calls the gateway; the gateway relays to the merchant's URLs stored here.
      await momo.registerC2bUrls({ config: channels.readChannelConfig(channel), confirmationUrl: own.confirmation, validationUrl: own.validation, responseType: type });
      const data = { confirmationUrl, validationUrl, responseType: type };
      await prisma.momoC2bRegistration.upsert({ where: { channelId: channel.id }, create: { channelId: channel.id, ...data }, update: data });
      return data;
    },

    /** Relays the merchant's verdict; when it does not answer in time, the registered ResponseType decides. */
    async handleC2bValidation(tokenSegment: string, body: unknown): Promise<unknown> {
      const channel = await channelByToken(tokenSegment);
      const momo = momoOf(channel);
      momo.parseC2bPayment(body);
      const registration = await prisma.momoC2bRegistration.findUnique({ where: { channelId: channel.id } });
      const fallback: Decision = registration?.responseType === "Cancelled" ? { accept: false, code: "C2B00016" } : { accept: true };
      if (!registration) return momo.c2bValidationReply(fallback);
      let decision: Decision | null = null;
      try {
        decision = momo.readC2bValidationDecision(await postJson(registration.validationUrl, body, config.c2bValidationTimeoutMs));
      } catch (error) {
        logger.warn({ channelId: channel.id, err: (error as Error).message }, "merchant C2B validation URL failed; using the registered ResponseType");
      }
      return momo.c2bValidationReply(decision ?? fallback);
    },

    async handleC2bConfirmation(tokenSegment: string, body: unknown): Promise<unknown> {
      const channel = await channelByToken(tokenSegment);
      const momo = momoOf(channel);
      await handleConfirmation(channel, momo, body);
      return momo.c2bConfirmationAck();
    },

    /** Sandbox channels only (the sandbox provider, or an mpesa channel in Daraja's sandbox environment). */
    async simulateC2b(principal: Principal, input: SimulateC2bInput) {
      const amount = parseAmount(input.amount);
      const phoneNumber = parsePhone(input.phoneNumber);
      const reference = optionalText(input.reference, "reference", 100);
      if (!reference) throw new ValidationError("reference", "is required");
      const channel = await channels.resolvePaymentChannel(principal, input.paymentChannelId);
      const momo = momoOf(channel);
      const channelConfig = channels.readChannelConfig(channel);
      if (!momo.canSimulateC2b(channelConfig)) throw new GatewayError("forbidden", "C2B simulation is available on sandbox channels only");
      const startedAt = new Date(Date.now() - 1000);
      await momo.simulateC2b({
        config: channelConfig,
        amount,
        currency: CURRENCY,
        phoneNumber,
        billRef: reference,
        deliverConfirmation: async (body) => {
          await handleConfirmation(channel, momo, body);
        },
      });
      // Daraja confirms asynchronously: wait briefly for its confirmation before answering.
      const where = { channelId: channel.id, paymentMethod: "momo_c2b", clientReference: reference, amount, createdAt: { gte: startedAt } };
      let found: Transaction | null = null;
      for (let i = 0; i < 30 && !found?.completedAt; i++) {
        found = await prisma.transaction.findFirst({ where, orderBy: { id: "desc" } });
        if (!found?.completedAt) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return { amount, phoneNumber, reference, status: found?.status ?? "pending", transaction: found };
    },

    /**
     * One reconciliation pass: claims overdue pending pushes (SKIP LOCKED, so each is worked by one
     * instance), queries the provider, settles what it answers, expires what outlived the push, and
     * schedules the rest with exponential backoff.
     */
    async reconcileOnce() {
      const now = new Date();
      const claimed = await prisma.$queryRaw<{ id: number; attempts: number }[]>`
        UPDATE momo_stk_reconciliations SET reconcile_at = ${new Date(now.getTime() + RECONCILE_LEASE_MS)}
        WHERE transaction_id IN (
          SELECT transaction_id FROM momo_stk_reconciliations
          WHERE reconcile_at <= ${now}
          ORDER BY reconcile_at LIMIT ${RECONCILE_BATCH}
          FOR UPDATE SKIP LOCKED
        )
        RETURNING transaction_id AS id, attempts`;
      const summary = { claimed: claimed.length, settled: 0, expired: 0, pending: 0 };
      for (const { id, attempts } of claimed) {
        const transaction = await prisma.transaction.findUnique({ where: { id }, include: { channel: true } });
        if (!transaction || transaction.status !== "pending" || !transaction.channel || !transaction.checkoutRequestId) {
          await prisma.momoStkReconciliation.deleteMany({ where: { transactionId: id } });
          continue;
        }
        let outcome: StkOutcome = { state: "pending" };
        try {
          const momo = momoOf(transaction.channel);
          outcome = await momo.stkQuery({ config: channels.readChannelConfig(transaction.channel), checkoutRequestId: transaction.checkoutRequestId });
        } catch (error) {
          logger.warn({ reference: transaction.reference, err: (error as Error).message }, "STK query failed; will retry");
        }
        if (outcome.state !== "pending") {
          if (await settleStk(transaction, outcome, "reconciliation")) summary.settled++;
          continue;
        }
        if (now.getTime() - transaction.createdAt.getTime() >= config.stkLifetimeMs) {
          const expired = await settleStk(
            transaction,
            { state: "failed", resultCode: "1019", resultDesc: "The STK push expired with no answer from the customer" },
            "expiry",
          );
          if (expired) summary.expired++;
          continue;
        }
        summary.pending++;
        const backoff = Math.min(config.stkQueryBackoffMs * 2 ** attempts, MAX_BACKOFF_MS);
        await prisma.momoStkReconciliation.updateMany({
          where: { transactionId: id },
          data: { reconcileAt: new Date(Date.now() + backoff), attempts: { increment: 1 } },
        });
      }
      return summary;
    },

    /** Runs reconcileOnce on a timer (unref'd, never overlapping); the returned function stops it. */
    startReconciler(): () => Promise<void> {
      const timer = setInterval(() => {
        if (running) return;
        running = service
          .reconcileOnce()
          .catch((error: unknown) => logger.error({ err: error }, "STK reconciliation pass failed"))
          .finally(() => {
            running = null;
          });
      }, config.reconcileIntervalMs);
      timer.unref();
      return async () => {
        clearInterval(timer);
        for (const connector of Object.values(connectors)) connector.momo?.close?.();
        await running;
        await Promise.all([...forwards]);
      };
    },
  };
  return service;
}

export type MomoService = ReturnType<typeof createMomoService>;
