import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { Customer, PaymentChannel, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, ValidationError } from "../../errors.ts";
import { inIdempotencyScope } from "../../idempotency/scope.ts";
import { amountSchema, parseCurrency } from "../../money.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { Connector, SavedCardConnector, SavedCardOutcome } from "../../providers/types.ts";
import { optionalTextSchema, parseInput } from "../../validation.ts";
import type { CollectionFlow, SavedMethodLink } from "./collections.ts";
import { asProviderError, connectorOf, newAccessCode, newReference, RECONCILE_JOB, type FlowContext, type PaymentMethodSaver } from "./context.ts";
import { metadataSchema } from "./initialize.ts";
import { afterCreate, insertInvoiceCharges, insertPendingTransaction, type NewInvoiceCharge, type TransitionRequest } from "./status.ts";

/**
 * Charges without the payer (POST /v1/charges, and the billing job next): a customer's saved payment method charged
 * for a merchant under an Idempotency-Key. The payment and its attempt are committed (with the key's recovery point)
 * before the provider is asked, under a reference fixed then: a retry of the key whose payment is still pending asks
 * the provider what became of that reference before anything is charged again, so one key is charged at most once,
 * across crashes. A saved card is charged with its token (Paystack's charge_authorization); an M-Pesa method is an
 * STK push to the saved phone (M-Pesa has no charge without the payer: the payer approves it on the phone).
 */

export interface SavedChargeInput {
  customer: number;
  paymentMethod: string;
  amount: unknown;
  currency: string;
  /** The merchant's own reference, kept as the client reference. */
  reference?: string | null;
  metadata?: unknown;
  description?: string | null;
}

/** A subscription invoice's charge: made once per invoice and attempt (the database's unique pair), instead of once per key. */
export interface InvoiceChargeInput extends SavedChargeInput {
  /** `unmade`: the caller found no payment for this attempt (its lookup is skipped; the unique pair still decides). */
  invoice: { id: number; attempt: number; unmade?: boolean };
}

/** A charge's answer: the payment, and where the payer must go when the bank wants them (2FA). */
export interface SavedChargeResult {
  transaction: Transaction;
  nextAction: { type: "redirect"; url: string } | null;
}

/** A charge's customer and method as a batch looked them up, or the error that refuses each (what prepare() would throw). */
interface LookedUp {
  customer: Customer | Error;
  method: Awaited<ReturnType<PaymentMethodSaver["chargeable"]>> | Error;
}

/** A looked-up value, or its error thrown. */
function settled<T>(value: T | Error): T {
  if (value instanceof Error) throw value;
  return value;
}

/** A card charge checked and looked up (prepare()), ready to be recorded and made. */
interface PreparedCard {
  kind: "card";
  row: Omit<NewInvoiceCharge, "invoiceId" | "invoiceAttempt" | "detail" | "followUpAt">;
  detail: string;
  methodReference: string;
  channel: PaymentChannel;
  connector: Connector;
  savedCards: SavedCardConnector;
  token: string;
}

const chargeInput = z.object({
  amount: amountSchema,
  currency: z.string({ error: "is required" }).min(1, "is required"),
  reference: optionalTextSchema(100),
  description: optionalTextSchema(500),
  metadata: metadataSchema,
});

/**
 * Who charges: a keyed request (POST /v1/charges), or the billing step that owns an invoice's charge. For the
 * invoice, a charge whose answer never came also throws (its job runs again and resumes it), and a settled one queues
 * no invoice.charge_settled job: the step records the outcome on the invoice itself next, and runs again until it has.
 */
type Caller = "key" | "invoice";

export function createSavedChargeFlow(ctx: FlowContext, collections: Pick<CollectionFlow, "startStkCollection">) {
  const { deps, store, attempts } = ctx;
  const { channels, connectors, customers, logger } = deps;

  /** The answer for a payment: a pending one that waits for the payer shows where they go. */
  const resultOf = (transaction: Transaction): SavedChargeResult => ({
    transaction,
    nextAction: transaction.status === "pending" && transaction.providerCheckoutUrl ? { type: "redirect", url: ctx.checkoutUrl(transaction.reference) } : null,
  });

  /** The status change that records a settled card charge's outcome on its attempt and payment. */
  function settling(t: Transaction, channel: PaymentChannel, attemptId: number, outcome: Exclude<SavedCardOutcome, { outcome: "pending" }>, caller: Caller): TransitionRequest {
    const invoiceRecordedByCaller = caller === "invoice";
    if (outcome.outcome === "succeeded") {
      const jobs = deps.jobsOnCardPaid?.(channel, { reference: t.reference, amount: t.amount, currency: t.currency, providerReference: outcome.providerReference }) ?? [];
      return {
        transactionId: t.id,
        to: "completed",
        changes: { paymentMethod: "card", providerReference: outcome.providerReference },
        settlesAttempt: { attemptId, status: "succeeded", providerReference: outcome.providerReference },
        ...(jobs.length ? { jobs } : {}),
        invoiceRecordedByCaller,
      };
    }
    return {
      transactionId: t.id,
      to: "failed",
      changes: { paymentMethod: "card", failureCode: outcome.code, failureReason: outcome.reason.slice(0, 500) },
      settlesAttempt: { attemptId, status: "failed", code: outcome.code, reason: outcome.reason },
      invoiceRecordedByCaller,
    };
  }

  /** A pending answer that names where the payer finishes: the payment shows that page. */
  async function awaitPayer(t: Transaction, outcome: Extract<SavedCardOutcome, { outcome: "pending" }>): Promise<Transaction> {
    if (!outcome.redirectUrl) return t;
    return store.setHostedPage(t.id, { accessCode: t.accessCode, checkoutUrl: outcome.redirectUrl });
  }

  /** Records a card charge's outcome on its attempt and payment (one statement, through the status machine). */
  async function settle(t: Transaction, channel: PaymentChannel, attemptId: number, outcome: SavedCardOutcome, caller: Caller): Promise<Transaction> {
    if (outcome.outcome === "pending") return awaitPayer(t, outcome);
    return (await ctx.transition(settling(t, channel, attemptId, outcome, caller))).transaction;
  }

  /**
   * A billing batch's outcomes: the completed ones in one statement and the failed ones in another (status.ts
   * transitionTransactions), each payment with its attempt, event and postings as settle() records one. Answers each
   * payment as it now is, or the error that kept its batch from being recorded (its invoice's job runs again).
   */
  async function settleMany(charges: { t: Transaction; channel: PaymentChannel; attemptId: number; outcome: SavedCardOutcome }[]): Promise<Map<number, Transaction | Error>> {
    const answers = new Map<number, Transaction | Error>();
    const groups = new Map<string, { t: Transaction; request: TransitionRequest }[]>();
    await Promise.all(
      charges.map(async ({ t, channel, attemptId, outcome }) => {
        if (outcome.outcome !== "pending") {
          const request = settling(t, channel, attemptId, outcome, "invoice");
          const group = groups.get(request.to) ?? [];
          group.push({ t, request });
          groups.set(request.to, group);
          return;
        }
        try {
          answers.set(t.id, await awaitPayer(t, outcome));
        } catch (error) {
          answers.set(t.id, error instanceof Error ? error : new Error(String(error)));
        }
      }),
    );
    await Promise.all(
      [...groups.values()].map(async (group) => {
        try {
          const results = await ctx.transitionMany(group.map(({ request }) => request));
          results.forEach((result) => answers.set(result.transaction.id, result.transaction));
        } catch (error) {
          for (const { t } of group) answers.set(t.id, error instanceof Error ? error : new Error(String(error)));
        }
      }),
    );
    return answers;
  }

  /**
   * Charges the card. An answer that never came (a timeout, a 5xx, a crash) leaves the payment and its attempt pending:
   * the reconcile job (queued with the payment) and any retry of the key ask the provider by reference. An invoice's
   * charge (`caller` "invoice") also throws it, so the job that owns the charge runs again and resumes it: asks
   * by reference, and charges it then if the provider never had it (the reconcile job only ever asks).
   */
  async function chargeCard(t: Transaction, channel: PaymentChannel, savedCards: SavedCardConnector, token: string, attemptId: number, caller: Caller): Promise<Transaction> {
    const outcome = await askToCharge(t, channel, savedCards, token, attemptId, caller);
    return outcome ? settle(t, channel, attemptId, outcome, caller) : t;
  }

  /** The provider's answer to the charge (a refusal outright is a failure: nothing was charged), or null: none came. */
  async function askToCharge(t: Transaction, channel: PaymentChannel, savedCards: SavedCardConnector, token: string, attemptId: number, caller: Caller): Promise<SavedCardOutcome | null> {
    try {
      return await withProviderCallScope({ merchantId: t.merchantId, transactionId: t.id, attemptId }, () =>
        savedCards.charge({ config: channels.readChannelConfig(channel), token, email: t.email ?? "", reference: t.reference, amount: t.amount, currency: t.currency }),
      );
    } catch (error) {
      const refusal = asProviderError(error);
      // The provider refused the charge outright (an authorization it no longer honours): nothing was charged.
      if (refusal.code === "provider_error") return { outcome: "failed", code: "provider_refused", reason: refusal.message };
      logger.warn({ reference: t.reference, err: refusal.message }, "saved card charge: no answer; left pending for the provider to be asked");
      if (caller === "invoice") throw refusal;
      return null;
    }
  }

  /** A retried key whose payment is still pending: the provider is asked by reference before any new charge. */
  async function resume(t: Transaction, caller: Caller): Promise<Transaction> {
    if (t.status !== "pending" || t.paymentMethod !== "card" || t.paymentMethodId === null || t.channelId === null || !deps.paymentMethods) return t;
    const channel = await channels.findById(t.channelId);
    const savedCards = channel ? connectorOf(connectors, channel)?.savedCards : undefined;
    const attempt = await attempts.findLatestPending(t.id);
    if (!channel || !savedCards || !attempt) return t;
    const known = await withProviderCallScope({ merchantId: t.merchantId, transactionId: t.id, attemptId: attempt.id }, () =>
      savedCards.status({ config: channels.readChannelConfig(channel), reference: t.reference }),
    );
    if (known.outcome !== "unknown") return settle(t, channel, attempt.id, known, caller);
    // The charge never reached the provider: it is made now, under the same reference, unless the method went meanwhile.
    const token = await deps.paymentMethods.tokenOf(t.paymentMethodId);
    if (!token) return settle(t, channel, attempt.id, { outcome: "failed", code: "payment_method_detached", reason: "The payment method was detached before it was charged" }, caller);
    return chargeCard(t, channel, savedCards, token, attempt.id, caller);
  }

  /** POST /v1/charges: charge this customer's saved method for the merchant, once per Idempotency-Key. */
  async function chargeSavedMethod(principal: Principal, input: SavedChargeInput): Promise<SavedChargeResult> {
    if (!inIdempotencyScope(principal)) throw new ValidationError("Idempotency-Key", "is required: a charge without the payer is made once per key");
    const recovered = await ctx.recoveredTransaction(principal);
    if (recovered) return resultOf(await resume(recovered, "key"));
    return charge(principal, input);
  }

  /**
   * The billing job's charges of invoices: each once per invoice and attempt. An attempt already made (a crash, another
   * instance) is resumed as a retried key is; one that loses the insert race answers the winner's payment. The card
   * charges of a batch are recorded together (one statement: payments, attempts, events), then made side by side.
   * Each invoice's answer is its result or the error that refused it.
   */
  async function chargeInvoices(requests: { principal: Principal; input: InvoiceChargeInput }[]): Promise<Map<number, SavedChargeResult | Error>> {
    const answers = new Map<number, SavedChargeResult | Error>();
    const fail = (id: number, error: unknown) => answers.set(id, error instanceof Error ? error : new Error(String(error)));
    const toMake: typeof requests = [];
    await Promise.all(
      requests.map(async (request) => {
        const { invoice } = request.input;
        try {
          const made = invoice.unmade ? null : await store.findByInvoiceAttempt(invoice.id, invoice.attempt);
          if (made) answers.set(invoice.id, resultOf(await resume(made, "invoice")));
          else toMake.push(request);
        } catch (error) {
          fail(invoice.id, error);
        }
      }),
    );
    const looked = await lookUpMany(toMake);
    const cards: (PreparedCard & { invoice: InvoiceChargeInput["invoice"] })[] = [];
    await Promise.all(
      toMake.map(async ({ principal, input }, i) => {
        try {
          const prepared = await prepare(principal, input, looked[i]);
          if (prepared.kind === "card") cards.push({ ...prepared, invoice: input.invoice });
          else answers.set(input.invoice.id, prepared.result);
        } catch (error) {
          fail(input.invoice.id, error);
        }
      }),
    );
    if (!cards.length) return answers;
    const askAt = new Date(Date.now() + deps.hosted.verifyAfterMs);
    const inserted = await insertInvoiceCharges(
      deps.sql,
      cards.map(({ row, detail, connector, invoice }) => ({
        ...row,
        invoiceId: invoice.id,
        invoiceAttempt: invoice.attempt,
        detail,
        followUpAt: connector.hosted ? askAt : null,
      })),
      RECONCILE_JOB,
    );
    const byReference = new Map(inserted.map((charge) => [charge.transaction.reference, charge]));
    const answered: { invoiceId: number; t: Transaction; channel: PaymentChannel; attemptId: number; outcome: SavedCardOutcome }[] = [];
    await Promise.all(
      cards.map(async (card) => {
        const id = card.invoice.id;
        try {
          const charge = byReference.get(card.row.reference);
          if (!charge) {
            // Another instance made this attempt's charge first: its payment is the answer.
            const winner = await store.findByInvoiceAttempt(id, card.invoice.attempt);
            answers.set(id, winner ? resultOf(winner) : new Error(`invoice ${id}: its charge was neither made nor found`));
            return;
          }
          afterCreate(ctx.stateMachine, { transaction: charge.transaction, event: charge.event, jobsQueued: charge.jobsQueued });
          logger.info({ reference: charge.transaction.reference, paymentMethod: card.methodReference }, "saved card charge sent");
          const t = charge.transaction;
          const outcome = await askToCharge(t, card.channel, card.savedCards, card.token, charge.attemptId, "invoice");
          // An invoice's charge with no answer threw (its job runs again and resumes it): this one has its answer.
          answered.push({ invoiceId: id, t, channel: card.channel, attemptId: charge.attemptId, outcome: outcome! });
        } catch (error) {
          answers.set(id, error instanceof Error ? error : new Error(String(error)));
        }
      }),
    );
    // The charges side by side, then their outcomes recorded together: one statement per status, not one per charge.
    const settled = await settleMany(answered);
    for (const { invoiceId, t } of answered) {
      const payment = settled.get(t.id)!;
      answers.set(invoiceId, payment instanceof Error ? payment : resultOf(payment));
    }
    return answers;
  }

  /** The customers and methods of many charges (a billing batch), in two queries: each charge's, or why not. */
  async function lookUpMany(requests: { principal: Principal; input: SavedChargeInput }[]): Promise<(LookedUp | undefined)[]> {
    if (!requests.length || !deps.paymentMethods) return requests.map(() => undefined);
    const found = await customers.getCustomers(requests.map(({ principal, input }) => ({ principal, id: input.customer })));
    const methods = await deps.paymentMethods.chargeableMany(requests.map(({ principal, input }) => ({ principal, reference: input.paymentMethod, customerId: input.customer })));
    return requests.map((_, i) => ({ customer: found[i]!, method: methods[i]! }));
  }

  /**
   * Everything a charge needs checked and looked up before anything is recorded: the customer, the method (and its
   * token), the channel and the amount. An M-Pesa method is pushed here (the one push flow records it); a card comes
   * back ready to record and charge.
   */
  async function prepare(
    principal: Principal,
    input: SavedChargeInput & Partial<Pick<InvoiceChargeInput, "invoice">>,
    looked?: LookedUp,
  ): Promise<{ kind: "mpesa"; result: SavedChargeResult } | PreparedCard> {
    if (!deps.paymentMethods) throw new GatewayError("forbidden", "Saved payment methods are not available here");
    const { amount, currency: wantedCurrency, reference: clientReference, description, metadata } = parseInput(chargeInput, input);
    const customer = looked ? settled(looked.customer) : await customers.getCustomer(principal, input.customer);
    const { method, token } = looked ? settled(looked.method) : await deps.paymentMethods.chargeable(principal, input.paymentMethod, customer.id);
    const channel = await channels.findById(method.channelId);
    const connector = channel ? connectorOf(connectors, channel) : undefined;
    if (!channel || !connector) throw new GatewayError("forbidden", "The payment method's channel cannot take payments");
    if (!channel.isActive) throw new GatewayError("channel_inactive", `Payment channel ${channel.id} is inactive`);
    if (!channels.isUsableChannel(channel)) throw new GatewayError("forbidden", "The payment method's channel is a sandbox channel, which takes test payments only");

    if (method.type === "mpesa") {
      // An STK push to the saved phone through the one push flow; it answers pending until the payer approves.
      if (!connector.momo || !method.phone) throw new GatewayError("forbidden", "The payment method's channel cannot push M-Pesa prompts");
      parseCurrency(wantedCurrency, [connector.momo.currency], channel.provider);
      const attach: SavedMethodLink = {
        customerId: customer.id, paymentMethodId: method.id, email: customer.email, metadata: metadata as Record<string, unknown> | null,
        ...(input.invoice ? { invoiceId: input.invoice.id, invoiceAttempt: input.invoice.attempt } : {}),
      };
      const { transaction } = await collections.startStkCollection(principal, {
        amount: input.amount, phoneNumber: `+${method.phone}`, reference: clientReference, description, paymentChannelId: channel.id, attach,
      });
      return { kind: "mpesa", result: resultOf(transaction) };
    }

    const savedCards = connector.savedCards;
    if (!savedCards || !token) throw new GatewayError("forbidden", `Payment channel ${channel.id} (${channel.provider}) cannot charge saved cards`);
    const currency = parseCurrency(wantedCurrency, connector.currencies, channel.provider);
    connector.hosted?.checkPayment({ amount, currency });
    return {
      kind: "card",
      row: {
        merchantId: principal.merchantId,
        mode: principal.mode,
        reference: newReference(),
        accessCode: newAccessCode(),
        amount,
        currency,
        description,
        email: customer.email,
        channelId: channel.id,
        customerId: customer.id,
        paymentMethodId: method.id,
        clientReference,
        metadata,
      },
      detail: `**** ${method.cardLast4 ?? ""}`.trim(),
      methodReference: method.reference,
      channel,
      connector,
      savedCards,
      token,
    };
  }

  /** A keyed charge (POST /v1/charges): the payment, its attempt, the key's recovery point and the follow-up job commit before the charge. */
  async function charge(principal: Principal, input: SavedChargeInput): Promise<SavedChargeResult> {
    const prepared = await prepare(principal, input);
    if (prepared.kind === "mpesa") return prepared.result;
    const { row: card, channel, connector, savedCards, token, detail } = prepared;
    const { metadata, ...fields } = card;
    const row: Prisma.TransactionUncheckedCreateInput = { ...fields, paymentMethod: "card", ...(metadata === null ? {} : { metadata: metadata as Prisma.InputJsonObject }) };
    const askAt = new Date(Date.now() + deps.hosted.verifyAfterMs);
    const created = await deps.prisma.$transaction(async (tx) => {
      const made = await insertPendingTransaction(tx, row, {
        announce: true,
        keyedBy: principal,
        jobs: (t) => (connector.hosted ? [{ kind: RECONCILE_JOB, payload: { transactionId: t.id }, runAt: askAt }] : []),
      });
      const attempt = await attempts.insertApiCharge(tx, { transactionId: made.transaction.id, channelId: channel.id, detail, createdAt: made.transaction.createdAt });
      return { ...made, attempt };
    });
    afterCreate(ctx.stateMachine, created);
    logger.info({ reference: created.transaction.reference, paymentMethod: prepared.methodReference }, "saved card charge sent");
    return resultOf(await chargeCard(created.transaction, channel, savedCards, token, created.attempt.id, "key"));
  }

  return { chargeSavedMethod, chargeInvoices };
}
