import type { Principal } from "../../auth.ts";
import type { PaymentChannel, Transaction, TransactionAttempt } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError } from "../../errors.ts";
import type { JobDefinition } from "../../jobs/runner.ts";
import { enqueue } from "../../jobs/store.ts";
import { normalizeMsisdn, toMsisdn } from "../../phone.ts";
import type { MomoConnector } from "../../providers/types.ts";
import type { PushBudgetName } from "../../rate-limit/pushes.ts";
import { PUSH_METHOD, type AttemptMethod, type AttemptStatus, type NewAttempt } from "./attempt-store.ts";
import { alreadySettled, CARD_CHARGE_LEASE_MS, connectorOf, DEFAULT_CHECKOUT_SETTINGS, type FlowContext } from "./context.ts";
import type { Outcomes } from "./outcomes.ts";
import type { PushFlow } from "./push.ts";
import { ATTEMPT_QUERY_JOB } from "./reconcile.ts";
import { findExpiredCheckouts } from "./store.ts";

/**
 * The payer's attempts on the hosted checkout (issue 25): each card charge or STK push is a row of
 * transaction_attempts with its outcome. One attempt is in flight at a time: an attempt claims the
 * transaction (transactions.charge_started_at, whose value is the attempt's created_at: its token) in the
 * same statement that inserts it. A card's claim lapses after the charge lease, an STK push's after the
 * push's lifetime. A failed attempt releases the claim and leaves the transaction pending until
 * CHECKOUT_MAX_ATTEMPTS failed attempts; the transaction's status changes only through the status machine.
 */

export const CHECKOUT_EXPIRY_JOB = "transaction.checkout_expiry";
const EXPIRY_SCHEDULE_KEY = { schedule: "checkout_expiry" } as const;
const EXPIRY_BATCH = 100;
export type { AttemptMethod, AttemptStatus };

/** An attempt as the payer's page and the status endpoint show it. */
export interface AttemptView {
  method: AttemptMethod;
  status: AttemptStatus;
  code: string | null;
  reason: string | null;
  detail: string | null;
}

export const attemptView = (a: Pick<TransactionAttempt, "method" | "status" | "code" | "reason" | "detail">): AttemptView => ({
  method: a.method as AttemptMethod,
  status: a.status as AttemptStatus,
  code: a.code,
  reason: a.reason,
  detail: a.detail,
});

/** 254708374149 -> 2547*****149: enough for the payer to recognise, not enough to read back. */
export const maskMsisdn = (msisdn: string) => `${msisdn.slice(0, 4)}${"*".repeat(Math.max(0, msisdn.length - 7))}${msisdn.slice(-3)}`;
export const maskCard = (number: string) => `**** ${number.slice(-4)}`;

type Claim = { claimed: true; attemptId: number | null } | { claimed: false; status: string };

const PHONE_BUSY_MESSAGE =
  "An M-Pesa prompt sent to this phone number is still waiting for an answer: approve or cancel it on the phone, or wait a few minutes for it to expire, then try again";

/** A push refused by the payer pages' limits (rate-limit/pushes.ts): the phone's own budget, or the link's or merchant's. */
function pushLimitError(budget: PushBudgetName, retryAfterSeconds: number): GatewayError {
  const wait = retryAfterSeconds >= 120 ? `${Math.ceil(retryAfterSeconds / 60)} minutes` : `${retryAfterSeconds} seconds`;
  return budget === "phone"
    ? new GatewayError("mpesa_prompt_limit", `Too many M-Pesa prompts were sent to this phone number; try again in ${wait}`, { retryAfterSeconds })
    : new GatewayError("rate_limited", `Too many M-Pesa payments were started here; try again in ${wait}`, { retryAfterSeconds });
}

/** The payment link a checkout payment was made through (its metadata, set by the link service), within its merchant. */
function linkBudgetOf(t: Transaction): string | null {
  const metadata = t.metadata as Record<string, unknown> | null;
  const slug = metadata && typeof metadata === "object" && !Array.isArray(metadata) ? metadata.payment_link : undefined;
  return typeof slug === "string" ? `${t.merchantId}:${slug}` : null;
}

export function createAttemptFlow(ctx: FlowContext, outcomes: Outcomes, push: PushFlow) {
  const { deps, store, attempts } = ctx;
  const { channels, connectors, logger, sql, prisma } = deps;
  const settings = deps.checkout ?? DEFAULT_CHECKOUT_SETTINGS;
  const cardLeaseMs = () => deps.cardChargeLeaseMs ?? CARD_CHARGE_LEASE_MS;
  const { maxAttemptsOf } = outcomes;

  async function claim(transactionId: number, at: Date, attempt: NewAttempt | null): Promise<Claim> {
    const row = await attempts.claim(transactionId, at, {
      cardLapsedBefore: new Date(at.getTime() - cardLeaseMs()),
      pushLapsedBefore: new Date(at.getTime() - deps.collection.lifetimeMs),
      attempt,
    });
    if (!row) throw new NotFoundError("Transaction");
    return row.claimed ? { claimed: true, attemptId: row.attemptId } : { claimed: false, status: row.status };
  }

  const refused = (c: { status: string }) => (c.status !== "pending" ? alreadySettled(c.status) : new GatewayError("conflict", "A payment for this transaction is in progress"));

  /** The channel an STK push for this payment goes through: its own when it takes mobile money, else the merchant's mpesa (or, in test mode, sandbox) channel. */
  async function mpesaChannelFor(t: Pick<Transaction, "paymentMethod" | "channelId" | "currency" | "amount" | "merchantId" | "mode">): Promise<{ channel: PaymentChannel; momo: MomoConnector } | null> {
    if (t.paymentMethod !== null) return null;
    const usable = (channel: PaymentChannel | null) => {
      const momo = channel && channel.isActive && channels.isUsableChannel(channel) ? connectorOf(connectors, channel)?.momo : undefined;
      if (!channel || !momo || momo.currency !== t.currency) return null;
      try {
        momo.checkAmount(t.amount, t.currency);
      } catch {
        return null; // e.g. cents M-Pesa cannot collect
      }
      return { channel, momo };
    };
    const ownChannel = t.channelId === null ? null : await channels.findById(t.channelId);
    // A payment opened at a hosted-checkout provider (Paystack) is paid on its page: a push beside it could pay twice.
    if (ownChannel && connectorOf(connectors, ownChannel)?.hosted) return null;
    const own = usable(ownChannel);
    if (own) return own;
    const others = await prisma.paymentChannel.findMany({ where: { merchantId: t.merchantId, mode: t.mode, isActive: true }, orderBy: [{ isDefault: "desc" }, { id: "asc" }] });
    for (const channel of others) {
      const found = usable(channel);
      if (found) return found;
    }
    return null;
  }

  /** How often the expiry sweep runs: a tenth of the expiry, between a second and five minutes. */
  const sweepEveryMs = () => Math.min(Math.max(Math.floor(settings.expiryMs / 10), 1000), 5 * 60_000);
  const queueSweep = (inMs: number) => enqueue(prisma, CHECKOUT_EXPIRY_JOB, { ...EXPIRY_SCHEDULE_KEY }, { key: EXPIRY_SCHEDULE_KEY, runAt: new Date(Date.now() + inMs) });

  /** Fails unpaid hosted-checkout payments older than the expiry as `abandoned`; one in flight (claimed) is left to its attempt. */
  async function expireCheckouts(): Promise<number> {
    const due = await findExpiredCheckouts(sql, new Date(Date.now() - settings.expiryMs), EXPIRY_BATCH);
    let expired = 0;
    for (const { id, channelId } of due) {
      // A provider-hosted payment (Paystack) is verified and abandoned by its own reconciliation instead.
      const channel = channelId === null ? null : await channels.findById(channelId);
      if (channel && connectorOf(connectors, channel)?.hosted) continue;
      const held = await claim(id, new Date(), null);
      if (!held.claimed) continue;
      const result = await ctx.transition({ transactionId: id, to: "failed", changes: { failureCode: "abandoned", failureReason: "The payer did not complete the payment in time" } });
      if (result.applied) expired++;
    }
    // A full batch that expired something: more may be waiting (a batch of skipped rows only must not spin).
    return due.length === EXPIRY_BATCH && expired > 0 ? -expired : expired;
  }

  const expiryJob: JobDefinition<Record<string, never>> = {
    kind: CHECKOUT_EXPIRY_JOB,
    concurrency: 1,
    // Never throws: the runner's retry would be a second copy beside the one queued here.
    async run() {
      let more = false;
      try {
        const n = await expireCheckouts();
        more = n < 0;
        if (n !== 0) logger.info({ expired: Math.abs(n) }, "checkout: unpaid payments failed as abandoned");
      } catch (error) {
        logger.warn({ err: error }, "checkout expiry sweep failed; trying again");
      }
      await queueSweep(more ? 1000 : sweepEveryMs());
    },
  };

  /**
   * How a payment of this amount through this channel (or the default) could be paid on the checkout page, before
   * it exists: a payment link's page offers the same choice. Card: the channel charges cards (or a hosted provider
   * does on its page); M-Pesa: as mpesaChannelFor would find a channel for it.
   */
  async function payerMethods(principal: Principal, payment: { paymentChannelId: number | null; currency: string; amount: bigint }): Promise<{ card: boolean; mpesa: boolean }> {
    const { channel } = await channels.resolvePaymentChannelAndCurrency(principal, payment.paymentChannelId);
    const connector = connectorOf(connectors, channel);
    const card = connector?.chargeCard !== undefined || connector?.hosted !== undefined;
    const mpesa = await mpesaChannelFor({ paymentMethod: null, channelId: channel.id, currency: payment.currency, amount: payment.amount, merchantId: principal.merchantId, mode: principal.mode });
    return { card, mpesa: mpesa !== null };
  }

  return {
    payerMethods,
    expiryJob,
    claim,
    refused,
    mpesaChannelFor,
    expireCheckouts,
    /** Queues the expiry sweep (at gateway start); at most one stays queued. */
    scheduleCheckoutExpiry: () => queueSweep(sweepEveryMs()),

    /**
     * The payer's STK push from the checkout page: validate -> claim with a new attempt -> push -> record the
     * provider's request id. The attempt holds the claim until its callback or query settles it, or the push's
     * lifetime passes. A push the provider refuses is a failed attempt.
     */
    async payWithMpesa(reference: string, phoneInput: unknown, consent?: { savePaymentMethod?: boolean | undefined; language?: string | undefined }): Promise<{ attempt: AttemptView }> {
      const t = await store.findForPayer(reference);
      if (!t) throw new NotFoundError("Transaction");
      if (t.status !== "pending") throw alreadySettled(t.status);
      // Kept on the payment: the push's outcome arrives later, and saves the phone only with the payer's consent.
      if (consent?.savePaymentMethod !== undefined && consent.savePaymentMethod !== t.savePaymentMethod) await store.setSavePaymentMethod(t.id, consent.savePaymentMethod);
      const phone = normalizeMsisdn(typeof phoneInput === "string" ? phoneInput : null, "phone");
      const target = await mpesaChannelFor(t);
      if (!target) throw new GatewayError("forbidden", "This transaction cannot be paid by M-Pesa");
      const { channel, momo } = target;
      const msisdn = toMsisdn(phone)!;
      const token = new Date();
      const newAttempt = { method: PUSH_METHOD, detail: maskMsisdn(msisdn), channelId: channel.id, phoneNumber: phone, language: consent?.language };
      // A simulator prompts no phone: only pushes that reach a real one are limited.
      const limits = momo.simulated ? undefined : deps.pushLimits;
      let held: Claim;
      if (!limits) held = await claim(t.id, token, newAttempt);
      else {
        const charge = await limits.charge({ phone, link: linkBudgetOf(t), merchant: `${t.merchantId}:${t.mode}` });
        if (!charge.allowed) throw pushLimitError(charge.budget, charge.retryAfterSeconds);
        const row = await attempts.claimPushUnlessPhoneBusy(t.id, token, {
          merchantId: t.merchantId,
          cardLapsedBefore: new Date(token.getTime() - cardLeaseMs()),
          pushLapsedBefore: new Date(token.getTime() - deps.collection.lifetimeMs),
          attempt: newAttempt,
        });
        // Nothing was sent: the budgets get their push back.
        if (row === "phone_busy" || !row?.claimed) await charge.refund();
        if (row === "phone_busy") throw new GatewayError("mpesa_prompt_pending", PHONE_BUSY_MESSAGE);
        if (!row) throw new NotFoundError("Transaction");
        held = row.claimed ? { claimed: true, attemptId: row.attemptId } : { claimed: false, status: row.status };
      }
      if (!held.claimed) throw refused(held);
      const attemptId = held.attemptId!;
      // The query job first: whatever happens at the provider from here, the attempt is settled.
      await enqueue(prisma, ATTEMPT_QUERY_JOB, { attemptId }, { runAt: new Date(Date.now() + deps.collection.reconcileAfterMs) });
      await push.send(t, { id: attemptId, transactionId: t.id, method: PUSH_METHOD, createdAt: token }, { channel, momo, phoneNumber: phone });
      const attempt = await attempts.findById(attemptId);
      return { attempt: attemptView(attempt!) };
    },

    /** A transaction's attempts, oldest first (GraphQL Transaction.attempts, the dashboard). */
    list: (transactionId: number) => attempts.list(transactionId),

    /** What the payer's page needs besides the row: the latest attempt and how many failed attempts are left. */
    async checkoutState(t: Transaction) {
      const tried = await attempts.listForPayer(t.id);
      const failed = tried.filter((a) => a.status === "failed").length;
      const latest = tried.at(-1);
      return {
        attemptsLeft: t.status === "pending" ? Math.max(0, maxAttemptsOf(t) - failed) : 0,
        attempt: latest ? attemptView(latest) : null,
      };
    },
  };
}

export type AttemptFlow = ReturnType<typeof createAttemptFlow>;
