import type { PaymentChannel, Transaction, TransactionAttempt } from "../../db/generated/prisma/client.ts";
import { GatewayError, isUniqueViolation, NotFoundError } from "../../errors.ts";
import type { JobDefinition } from "../../jobs/runner.ts";
import { enqueue } from "../../jobs/store.ts";
import { normalizeMsisdn, toMsisdn } from "../../phone.ts";
import type { CollectionCallback, CollectionOutcome, MomoConnector } from "../../providers/types.ts";
import { alreadySettled, asProviderError, CARD_CHARGE_LEASE_MS, connectorOf, DEFAULT_CHECKOUT_SETTINGS, type FlowContext } from "./context.ts";
import type { PushBudgetName } from "../../rate-limit/pushes.ts";
import { collectionMismatch } from "./collections.ts";
import { claimForAttempt, claimForPushUnlessPhoneBusy, findExpiredCheckouts, releaseClaim } from "./store.ts";

/**
 * The payer's attempts on the hosted checkout (issue 25): each card charge or STK push is a row of
 * transaction_attempts with its outcome. One attempt is in flight at a time: an attempt claims the
 * transaction (transactions.charge_started_at, whose value is the attempt's created_at: its token) in the
 * same statement that inserts it. A card's claim lapses after the charge lease, an STK push's after the
 * push's lifetime. A failed attempt releases the claim and leaves the transaction pending until
 * CHECKOUT_MAX_ATTEMPTS failed attempts; the transaction's status changes only through the status machine.
 */

export const ATTEMPT_QUERY_JOB = "transaction.attempt_query";
export const CHECKOUT_EXPIRY_JOB = "transaction.checkout_expiry";
const EXPIRY_SCHEDULE_KEY = { schedule: "checkout_expiry" } as const;
const EXPIRY_BATCH = 100;
const MAX_QUERY_BACKOFF_MS = 60_000;
const MPESA_CURRENCY = "KES";

export type AttemptMethod = "card" | "mpesa";
export type AttemptStatus = "pending" | "succeeded" | "failed";

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

/** An outcome is written once: a pending attempt settles; a provider's success also overrides the gateway's own expiry of a push. */
const SETTLE_ATTEMPT = `UPDATE transaction_attempts SET status = $2, code = $3, reason = $4, provider_reference = COALESCE($5, provider_reference), settled_at = now()
  WHERE id = $1 AND (status = 'pending' OR ($2 = 'succeeded' AND status = 'failed'))
  RETURNING id`;

const FAILED_ATTEMPTS = `SELECT count(*)::int AS n FROM transaction_attempts WHERE transaction_id = $1 AND status = 'failed'`;
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

export function createAttemptFlow(ctx: FlowContext) {
  const { deps, store } = ctx;
  const { channels, connectors, logger, sql, prisma } = deps;
  const settings = deps.checkout ?? DEFAULT_CHECKOUT_SETTINGS;
  const cardLeaseMs = () => deps.cardChargeLeaseMs ?? CARD_CHARGE_LEASE_MS;

  /** Transactions from initialize (no payment method until paid) take retries; an STK push's or C2B's is one attempt, as before. */
  const maxAttemptsOf = (t: Pick<Transaction, "paymentMethod">) => (t.paymentMethod === null ? settings.maxAttempts : 1);

  async function claim(transactionId: number, at: Date, attempt: { method: AttemptMethod; detail: string | null; channelId?: number; phoneNumber?: string } | null): Promise<Claim> {
    const row = await claimForAttempt(sql, transactionId, at, {
      cardLapsedBefore: new Date(at.getTime() - cardLeaseMs()),
      pushLapsedBefore: new Date(at.getTime() - deps.collection.lifetimeMs),
      attempt,
    });
    if (!row) throw new NotFoundError("Transaction");
    return row.claimed ? { claimed: true, attemptId: row.attemptId } : { claimed: false, status: row.status };
  }

  const refused = (c: { status: string }) => (c.status !== "pending" ? alreadySettled(c.status) : new GatewayError("conflict", "A payment for this transaction is in progress"));

  async function settle(attemptId: number, status: Exclude<AttemptStatus, "pending">, fields: { code?: string | null; reason?: string | null; providerReference?: string | null } = {}) {
    const rows = await sql.query<{ id: number }>(SETTLE_ATTEMPT, [attemptId, status, fields.code ?? null, fields.reason?.slice(0, 500) ?? null, fields.providerReference ?? null]);
    return rows.length > 0;
  }

  const release = (transactionId: number, token: Date) => releaseClaim(sql, transactionId, token);

  /**
   * After a failed attempt: at the limit the transaction fails with this attempt's code and reason (its event
   * carries the attempt); below it the claim is released and the payer may try again.
   */
  async function afterFailedAttempt(t: Transaction, token: Date, paymentMethod: string, code: string, reason: string) {
    const [{ n } = { n: 0 }] = await sql.query<{ n: number }>(FAILED_ATTEMPTS, [t.id]);
    if (n >= maxAttemptsOf(t)) {
      return ctx.transition({ transactionId: t.id, to: "failed", changes: { paymentMethod, failureCode: code, failureReason: reason.slice(0, 500) } });
    }
    await release(t.id, token);
    return null;
  }

  /** The channel an STK push for this payment goes through: its own when it takes mobile money, else the merchant's mpesa (or, in test mode, sandbox) channel. */
  async function mpesaChannelFor(t: Transaction): Promise<{ channel: PaymentChannel; momo: MomoConnector } | null> {
    if (t.currency !== MPESA_CURRENCY || t.paymentMethod !== null) return null;
    const usable = (channel: PaymentChannel | null) => {
      const momo = channel && channel.isActive && channels.isUsableChannel(channel) ? connectorOf(connectors, channel)?.momo : undefined;
      if (!channel || !momo) return null;
      try {
        momo.checkAmount(t.amount, MPESA_CURRENCY);
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

  /** An STK push's outcome (callback or query), applied to its attempt and, through the status machine, its transaction. */
  async function applyMpesaOutcome(attempt: TransactionAttempt, outcome: Exclude<CollectionOutcome, { state: "pending" }>, source: string): Promise<void> {
    const t = await store.findById(attempt.transactionId);
    if (!t) return;
    if (outcome.state === "completed") {
      if (!(await settle(attempt.id, "succeeded", { providerReference: outcome.providerReference }))) return;
      try {
        const result = await ctx.transition({
          transactionId: t.id,
          to: "completed",
          changes: { paymentMethod: "momo_stk", ...(outcome.providerReference ? { providerReference: outcome.providerReference } : {}) },
        });
        if (result.applied) logger.info({ reference: t.reference, attempt: attempt.id, source }, "checkout M-Pesa attempt completed the payment");
        else logger.error({ reference: t.reference, attempt: attempt.id, status: result.transaction.status, providerReference: outcome.providerReference }, "M-Pesa payment succeeded after the transaction was settled; recorded on its attempt only");
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        logger.error({ reference: t.reference, providerReference: outcome.providerReference }, "M-Pesa receipt already recorded for another transaction; not applied");
      }
      return;
    }
    if (!(await settle(attempt.id, "failed", { code: outcome.code, reason: outcome.message }))) return;
    logger.info({ reference: t.reference, attempt: attempt.id, code: outcome.code, source }, "checkout M-Pesa attempt failed");
    await afterFailedAttempt(t, attempt.createdAt, "momo_stk", outcome.code, outcome.message || "The M-Pesa payment did not go through");
  }

  /**
   * A collection callback for an STK push sent from the checkout page: true when it named one of its attempts
   * (applied, or refused for not matching what was asked), false when it is someone else's.
   */
  async function applyAttemptCallback(channel: PaymentChannel, callback: CollectionCallback): Promise<boolean> {
    const attempt = await prisma.transactionAttempt.findUnique({ where: { channelId_checkoutRequestId: { channelId: channel.id, checkoutRequestId: callback.providerRequestId } } });
    if (!attempt) return false;
    if (callback.outcome.state === "completed") {
      const t = await store.findById(attempt.transactionId);
      const mismatched = t ? collectionMismatch(callback, { amount: t.amount, phoneNumber: attempt.phoneNumber }) : ["transaction"];
      if (mismatched.length) {
        // Left for the attempt's status query, which asks the provider itself.
        logger.warn(
          { reference: t?.reference, attempt: attempt.id, providerRequestId: callback.providerRequestId, mismatched, callbackAmount: String(callback.amount) },
          "M-Pesa callback does not match its attempt field by field; not applied, left for the status query",
        );
        return true;
      }
    }
    await applyMpesaOutcome(attempt, callback.outcome, "callback");
    return true;
  }

  /** Asks about a push whose callback is overdue; fails the attempt (1019) once the push has outlived its lifetime. */
  const queryJob: JobDefinition<{ attemptId: number }> = {
    kind: ATTEMPT_QUERY_JOB,
    concurrency: 5,
    async run({ attemptId }, job) {
      const attempt = await prisma.transactionAttempt.findUnique({ where: { id: attemptId } });
      if (!attempt || attempt.status !== "pending" || attempt.channelId === null) return;
      const channel = await channels.findById(attempt.channelId);
      const momo = channel ? connectorOf(connectors, channel)?.momo : undefined;
      let outcome: CollectionOutcome = { state: "pending" };
      if (channel && momo && attempt.checkoutRequestId) {
        try {
          outcome = await momo.stkQuery({ config: channels.readChannelConfig(channel), checkoutRequestId: attempt.checkoutRequestId });
        } catch (error) {
          logger.warn({ attempt: attempt.id, err: (error as Error).message }, "M-Pesa attempt status query failed; will retry");
        }
      }
      if (outcome.state !== "pending") return void (await applyMpesaOutcome(attempt, outcome, "query"));
      if (Date.now() - attempt.createdAt.getTime() >= deps.collection.lifetimeMs) {
        return void (await applyMpesaOutcome(attempt, { state: "failed", code: "1019", message: "The STK push expired with no answer from the customer" }, "expiry"));
      }
      return { retryInMs: Math.min(deps.collection.queryBackoffMs * 2 ** (job.attempt - 1), MAX_QUERY_BACKOFF_MS) };
    },
  };

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

  return {
    queryJob,
    expiryJob,
    maxAttemptsOf,
    claim,
    refused,
    settle,
    release,
    afterFailedAttempt,
    mpesaChannelFor,
    applyAttemptCallback,
    expireCheckouts,
    /** Queues the expiry sweep (at gateway start); at most one stays queued. */
    scheduleCheckoutExpiry: () => queueSweep(sweepEveryMs()),

    /**
     * The payer's STK push from the checkout page: validate -> claim with a new attempt -> push -> record the
     * provider's request id. The attempt holds the claim until its callback or query settles it, or the push's
     * lifetime passes. A push the provider refuses is a failed attempt.
     */
    async payWithMpesa(reference: string, phoneInput: unknown): Promise<{ attempt: AttemptView }> {
      const t = await store.findForPayer(reference);
      if (!t) throw new NotFoundError("Transaction");
      if (t.status !== "pending") throw alreadySettled(t.status);
      const phone = normalizeMsisdn(typeof phoneInput === "string" ? phoneInput : null, "phone");
      const target = await mpesaChannelFor(t);
      if (!target) throw new GatewayError("forbidden", "This transaction cannot be paid by M-Pesa");
      const { channel, momo } = target;
      const msisdn = toMsisdn(phone)!;
      const token = new Date();
      const newAttempt = { method: "mpesa" as const, detail: maskMsisdn(msisdn), channelId: channel.id, phoneNumber: phone };
      // A simulator prompts no phone: only pushes that reach a real one are limited.
      const limits = momo.simulated ? undefined : deps.pushLimits;
      let held: Claim;
      if (!limits) held = await claim(t.id, token, newAttempt);
      else {
        const charge = await limits.charge({ phone, link: linkBudgetOf(t), merchant: `${t.merchantId}:${t.mode}` });
        if (!charge.allowed) throw pushLimitError(charge.budget, charge.retryAfterSeconds);
        const row = await claimForPushUnlessPhoneBusy(prisma, t.id, token, {
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
      let accepted;
      try {
        logger.info({ reference, attempt: attemptId }, "checkout STK push sent");
        accepted = await momo.stkPush({
          config: channels.readChannelConfig(channel),
          amount: t.amount,
          currency: MPESA_CURRENCY,
          phoneNumber: msisdn,
          accountReference: t.clientReference ?? t.reference,
          description: t.description ?? "Payment",
          callbackUrl: deps.stkCallbackUrl(channel, momo),
          deliverCallback: async (body) => applyAttemptCallback(channel, momo.parseStkCallback(body)),
        });
      } catch (error) {
        const refusal = asProviderError(error);
        if (await settle(attemptId, "failed", { code: refusal.code, reason: refusal.message })) {
          await afterFailedAttempt(t, token, "momo_stk", refusal.code, refusal.message);
        }
        throw refusal;
      }
      const attempt = await prisma.transactionAttempt.update({ where: { id: attemptId }, data: { checkoutRequestId: accepted.checkoutRequestId } });
      return { attempt: attemptView(attempt) };
    },

    /** A transaction's attempts, oldest first (GraphQL Transaction.attempts, the dashboard). */
    list(transactionId: number) {
      return prisma.transactionAttempt.findMany({ where: { transactionId }, orderBy: { id: "asc" } });
    },

    /** What the payer's page needs besides the row: the latest attempt and how many failed attempts are left. */
    async checkoutState(t: Transaction) {
      const attempts = await prisma.transactionAttempt.findMany({ where: { transactionId: t.id }, orderBy: { id: "asc" }, select: { method: true, status: true, code: true, reason: true, detail: true } });
      const failed = attempts.filter((a) => a.status === "failed").length;
      const latest = attempts.at(-1);
      return {
        attemptsLeft: t.status === "pending" ? Math.max(0, maxAttemptsOf(t) - failed) : 0,
        attempt: latest ? attemptView(latest) : null,
      };
    },
  };
}

export type AttemptFlow = ReturnType<typeof createAttemptFlow>;
