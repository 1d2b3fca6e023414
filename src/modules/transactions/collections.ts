import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { PaymentChannel, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { answerWithin, retryWhileUnavailable } from "../../db/outage.ts";
import { GatewayError, isUniqueViolation, ValidationError } from "../../errors.ts";
import { inIdempotencyScope } from "../../idempotency/scope.ts";
import type { JobRequest } from "../../jobs/store.ts";
import { amountSchema } from "../../money.ts";
import { msisdnSchema, toMsisdn } from "../../phone.ts";
import { optionalTextSchema, parseInput } from "../../validation.ts";
import type { MomoConnector } from "../../providers/types.ts";
import { UNSENT_CLAIM } from "./attempt-store.ts";
import { maskMsisdn } from "./attempts.ts";
import { metadataSchema } from "./initialize.ts";
import { connectorOf, momoConnectorOf, newAccessCode, newReference, RECONCILE_JOB, type FlowContext } from "./context.ts";
import type { AttemptRef, Outcomes } from "./outcomes.ts";
import type { PushFlow } from "./push.ts";
import { afterCreate, insertPendingTransaction } from "./status.ts";

/**
 * Mobile-money collections: an STK push from the API (a payment and its one attempt, sent through the one push
 * flow, push.ts; its verdicts land in outcomes.ts), and a payment the provider reports on its own (M-Pesa C2B: a
 * payment and its attempt, born succeeded, since the report is the provider's verdict).
 */

export interface StkCollectionInput {
  amount: unknown;
  phoneNumber?: string | null;
  paymentChannelId?: number | null;
  reference?: string | null;
  description?: string | null;
  /** The merchant's own JSON object, checked as initialize's (metadataSchema). */
  metadata?: unknown;
  /** Who the payment is for, written with the row (a saved M-Pesa method's charge: its customer, method and invoice). */
  attach?: SavedMethodLink;
}

/** What a saved method's charge records on its payment from the start: so its first event already names them. */
export interface SavedMethodLink {
  customerId: number;
  paymentMethodId: number;
  email: string;
  metadata: Record<string, unknown> | null;
  invoiceId?: number;
  invoiceAttempt?: number;
}

/** The STK push's input, in the order its fields are reported when several are wrong. */
const stkCollectionInput = z.object({
  amount: amountSchema,
  phoneNumber: msisdnSchema,
  reference: optionalTextSchema(100),
  description: optionalTextSchema(500),
  paymentChannelId: z.number().int().nullish(),
  metadata: metadataSchema,
});

/** A payment the provider reports on its own (an M-Pesa C2B confirmation), recorded once per receipt. */
export interface ProviderPayment {
  providerReference: string;
  amount: bigint;
  currency: string;
  /** Digits, as providers write them; null when the provider masks it. */
  phoneNumber: string | null;
  clientReference: string | null;
  paymentMethod: string;
}

/** How long a keyed push's request waits for its take and its push through a database outage before answering 503. */
const PUSH_TAKE_WAIT_MS = 10_000;

/** What a retry of a push interrupted by a crash is told: the push is not sent again, it is reconciled. */
const RECOVERED_PUSH_MESSAGE = "Request already accepted for processing";

export function createCollectionFlow(ctx: FlowContext, push: PushFlow, outcomes: Pick<Outcomes, "pushTargetOf">) {
  const { deps, store, transition, attempts } = ctx;
  const { channels, connectors } = deps;

  /**
   * A keyed push's retry, once its first try committed the payment: the push is sent now when that try never sent it
   * (its commit's answer was lost in a failover, or it crashed right after); otherwise the payment is answered as it stands.
   */
  async function resumeStkCollection(t: Transaction) {
    const standing = { transaction: t, customerMessage: RECOVERED_PUSH_MESSAGE };
    const attempt = t.status === "pending" ? await attempts.findLatestPending(t.id) : null;
    if (attempt?.sendClaim !== UNSENT_CLAIM) return standing;
    const target = await outcomes.pushTargetOf(attempt);
    const phoneNumber = attempt.phoneNumber ?? t.phoneNumber;
    if (!target || !phoneNumber) return standing;
    deps.logger.info({ reference: t.reference, attempt: attempt.id }, "keyed retry takes on the push its first try committed but never sent");
    return sendIfTaken(t, attempt, { ...target, phoneNumber });
  }

  /**
   * A keyed push is sent by the one request that takes it on (attempts.takeSending with this request's own token,
   * asked again through a database outage: a lost answer is asked, never guessed). The request waits up to
   * PUSH_TAKE_WAIT_MS for the take and the push, then answers 503 while both go on: a push taken is then sent
   * anyway, and the key's retry finds it taken and answers the payment.
   */
  async function sendIfTaken(t: Transaction, attempt: AttemptRef, target: { channel: PaymentChannel; momo: MomoConnector; phoneNumber: string }) {
    const claim = randomUUID();
    const sending = (async () => {
      if (!(await retryWhileUnavailable(() => attempts.takeSending(attempt.id, claim), deps.collection.lifetimeMs))) return null;
      return push.send(t, attempt, target, { showOnPayment: true });
    })();
    const sent = await answerWithin(sending, PUSH_TAKE_WAIT_MS, (error) => {
      // The push's own 503 (its request id still being recorded, push.ts) is not an end: that write goes on and logs its own.
      if (error instanceof GatewayError && error.code === "service_unavailable") return;
      deps.logger.warn({ reference: t.reference, attempt: attempt.id, err: (error as Error).message }, "a keyed STK push went on after its request was answered, and failed");
    });
    return sent ? { transaction: sent.transaction, customerMessage: sent.accepted.customerMessage } : { transaction: t, customerMessage: RECOVERED_PUSH_MESSAGE };
  }

  return {
    /**
     * An STK push: the row (with its transaction.pending event and its reconciliation job) commits
     * first, then the provider is asked. A refused push fails the row, so nothing is ever in flight
     * at a provider without a record here, and a crash in between is settled by reconciliation.
     */
    async startStkCollection(principal: Principal, input: StkCollectionInput) {
      const recovered = await ctx.recoveredTransaction(principal);
      if (recovered) return resumeStkCollection(recovered);
      const keyed = inIdempotencyScope(principal);
      const { amount, phoneNumber, reference: clientReference, description, paymentChannelId, metadata: ownMetadata } = parseInput(stkCollectionInput, input);
      const { metadata: attachedMetadata, ...attached } = input.attach ?? { metadata: ownMetadata };
      const channel = await channels.resolvePaymentChannel(principal, paymentChannelId);
      const momo = momoConnectorOf(connectors, channel);
      if (!connectorOf(connectors, channel)!.currencies.includes(momo.currency)) {
        throw new ValidationError("payment_channel_id", `payment channel ${channel.id} cannot collect ${momo.currency}`);
      }
      // The provider's own bounds are checked before anything is recorded: a 400 leaves no row behind.
      momo.checkAmount(amount, momo.currency);

      // The payment, its attempt, its transaction.pending event and its reconciliation job commit together, before the provider is asked.
      const created = await deps.prisma.$transaction(async (tx) => {
        const made = await insertPendingTransaction(
          tx,
          {
            merchantId: principal.merchantId,
            mode: principal.mode,
            reference: newReference(),
            accessCode: newAccessCode(),
            amount,
            currency: momo.currency,
            description,
            phoneNumber,
            paymentMethod: "momo_stk",
            clientReference,
            channelId: channel.id,
            ...attached,
            ...(attachedMetadata ? { metadata: attachedMetadata as Prisma.InputJsonObject } : {}),
          },
          {
            announce: true,
            keyedBy: principal,
            jobs: (t) => [{ kind: RECONCILE_JOB, payload: { transactionId: t.id }, runAt: new Date(Date.now() + deps.collection.reconcileAfterMs) }],
          },
        );
        const t = made.transaction;
        const attempt = await attempts.insertApiPush(tx, { transactionId: t.id, channelId: channel.id, phoneNumber, detail: maskMsisdn(toMsisdn(phoneNumber)!), createdAt: t.createdAt, sendClaim: keyed ? UNSENT_CLAIM : null });
        return { ...made, attempt };
      });
      afterCreate(ctx.stateMachine, created);
      if (keyed) return sendIfTaken(created.transaction, created.attempt, { channel, momo, phoneNumber });
      // The payment shows the push's request id too (REST, webhooks): published before the attempt existed.
      const { accepted, transaction } = await push.send(created.transaction, created.attempt, { channel, momo, phoneNumber }, { showOnPayment: true });
      return { transaction, customerMessage: accepted.customerMessage };
    },

    /**
     * A payment the provider announces itself (M-Pesa C2B), recorded once per receipt (the unique channel + provider
     * reference) with its attempt, born succeeded, in one database transaction; then completed. `jobs` follow only
     * the first recording.
     */
    async recordProviderPayment(channel: PaymentChannel, payment: ProviderPayment, jobs: JobRequest[] = []) {
      const receipt = { channelId: channel.id, providerReference: payment.providerReference };
      let transaction = await store.findByProviderReceipt(receipt);
      if (!transaction) {
        const e164 = payment.phoneNumber && /^\d{8,15}$/.test(payment.phoneNumber) ? `+${payment.phoneNumber}` : null;
        try {
          transaction = await deps.prisma.$transaction(async (tx) => {
            const { transaction: t } = await insertPendingTransaction(
              tx,
              {
                merchantId: channel.merchantId,
                mode: channel.mode,
                reference: newReference(),
                accessCode: newAccessCode(),
                amount: payment.amount,
                currency: payment.currency,
                paymentMethod: payment.paymentMethod,
                phoneNumber: e164 ?? payment.phoneNumber,
                clientReference: payment.clientReference?.slice(0, 100) || null,
                providerReference: payment.providerReference,
                channelId: channel.id,
              },
              { announce: false },
            );
            await attempts.insertReportedPayment(tx, {
              transactionId: t.id,
              channelId: channel.id,
              phoneNumber: e164,
              detail: e164 && maskMsisdn(toMsisdn(e164)),
              providerReference: payment.providerReference,
              createdAt: t.createdAt,
            });
            return t;
          });
        } catch (error) {
          // A concurrent delivery of the same confirmation inserted it (and its attempt) first; this one rolled back.
          if (!isUniqueViolation(error)) throw error;
          transaction = await store.findByProviderReceipt(receipt);
          if (!transaction) throw error;
        }
      }
      // A row left pending by an interrupted earlier delivery is completed now.
      const result = await transition({ transactionId: transaction.id, to: "completed", jobs });
      return { transaction: result.transaction, applied: result.applied };
    },

    /** The outcome of a simulated C2B payment once its confirmation is recorded: the newest matching one, or null. */
    findSimulatedC2b(channel: PaymentChannel, match: { clientReference: string; amount: bigint; since: Date }): Promise<Transaction | null> {
      return store.findLatestC2b(channel.id, match);
    },

  };
}

export type CollectionFlow = ReturnType<typeof createCollectionFlow>;
