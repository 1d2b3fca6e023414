import type { Principal } from "../../auth.ts";
import { createAttemptFlow } from "./attempts.ts";
import { createCardFlow } from "./card.ts";
import { createCollectionFlow } from "./collections.ts";
import { createFlowContext, type TransactionServiceDeps } from "./context.ts";
import { withTimeZone } from "../../filters.ts";
import { exportTransactionsCsv } from "./export.ts";
import { createHostedFlow } from "./hosted.ts";
import { createInitialize } from "./initialize.ts";
import { createOutcomes } from "./outcomes.ts";
import { createPushFlow } from "./push.ts";
import { createReads } from "./reads.ts";
import { createReconcileJobs } from "./reconcile.ts";
import { createSavedChargeFlow } from "./saved-charges.ts";
import type { TransactionFilters } from "./store.ts";

/**
 * The payments core, composed from its flows. Every write to `transactions` goes through one pipeline:
 * validate -> resolve the channel and its connector by capability -> create the row (store.ts) -> call
 * the connector -> transition (status.ts). The row exists before any provider is asked, so no
 * provider answer can arrive for a payment the gateway has no record of.
 *
 *   initialize.ts    initialize: a payment the payer completes on a checkout page
 *   card.ts          payWithCard: the card charge on the gateway's checkout, with its claim
 *   attempts.ts      the checkout page's attempts (card, STK): claim, push limits, retries, expiry
 *   push.ts          the one STK push flow, for the API and the page
 *   collections.ts   the API's STK push (a payment and its attempt), C2B recordProviderPayment
 *   saved-charges.ts charges of saved payment methods without the payer (POST /v1/charges)
 *   outcomes.ts      where every provider verdict lands: the attempt, then the payment
 *   hosted.ts        hosted checkout (Paystack-style): open at the provider, verify, reconcile
 *   reconcile.ts     the reconcile job (asks the provider about an overdue pending payment)
 *   reads.ts         getByReference, the lists, the checkout view, the last settling event
 *   store.ts         every statement on the `transactions` table (rows.ts: row <-> model)
 *   attempt-store.ts every statement on `transaction_attempts`
 *   status.ts        the payment's part in the one status machine; snapshot.ts its event snapshot
 */
export function createTransactionService(deps: TransactionServiceDeps) {
  const ctx = createFlowContext(deps);
  const outcomes = createOutcomes(ctx);
  const push = createPushFlow(ctx, outcomes);
  const hosted = createHostedFlow(ctx, outcomes);
  const collections = createCollectionFlow(ctx, push, outcomes);
  const attempts = createAttemptFlow(ctx, outcomes, push);
  deps.jobs.register(attempts.expiryJob);
  const card = createCardFlow(ctx, attempts, outcomes);
  const reads = createReads(ctx, attempts);
  const { reconcileJob, attemptQueryJob } = createReconcileJobs(ctx, { hosted, outcomes });
  deps.jobs.register(reconcileJob);
  deps.jobs.register(attemptQueryJob);

  /** Payments with the attempt that paid each (their receipts), in two statements: the ones that exist, by id. */
  async function paidWithMany(transactionIds: number[]) {
    const ids = [...new Set(transactionIds)];
    const [transactions, succeeded] = await Promise.all([ctx.store.findByIds(ids), ctx.attempts.listSucceeded(ids)]);
    const lastSucceeded = new Map(succeeded.map((a) => [a.transactionId, a]));
    return new Map(transactions.map((transaction) => [transaction.id, { transaction, attempt: lastSucceeded.get(transaction.id) ?? null }]));
  }

  return {
    checkoutUrl: ctx.checkoutUrl,
    initialize: createInitialize(ctx, hosted),
    startStkCollection: collections.startStkCollection,
    /** Charges a customer's saved payment method without the payer, once per Idempotency-Key (saved-charges.ts). */
    ...createSavedChargeFlow(ctx, collections),
    /** A push's callback, from the API or the page alike, found on its attempt in one lookup (outcomes.ts). */
    applyCollectionCallback: outcomes.applyCollectionCallback,
    hostedCheckoutUrl: hosted.hostedCheckoutUrl,
    verifyHostedPaymentByReference: hosted.verifyHostedPaymentByReference,
    recordProviderPayment: collections.recordProviderPayment,
    findSimulatedC2b: collections.findSimulatedC2b,
    getByReference: reads.getByReference,
    getWithChannel: reads.getWithChannel,
    /** A channel's payment by our reference, with its channel (a provider's notice names it); null when unknown. */
    paymentOnChannel: (reference: string, channelId: number) => ctx.store.findWithChannelByReference(reference, channelId),
    listPage: reads.listPage,
    listConnection: reads.listConnection,
    count: reads.count,
    /** The CSV's days (date_from, date_to, its date column) are the merchant's (filters.ts withTimeZone). */
    exportCsv: async (principal: Principal, filters: TransactionFilters) => exportTransactionsCsv(ctx.readStore, principal, await withTimeZone(deps.prisma, principal, filters)),
    payWithCard: card.payWithCard,
    payWithMpesa: attempts.payWithMpesa,
    /** Card and/or M-Pesa for a payment not yet made (a payment link's page). */
    payerMethods: attempts.payerMethods,
    listAttempts: attempts.list,
    scheduleCheckoutExpiry: attempts.scheduleCheckoutExpiry,
    expireCheckouts: attempts.expireCheckouts,
    checkoutStatus: reads.checkoutStatus,
    checkoutView: reads.checkoutView,
    lastSettlingEvent: reads.lastSettlingEvent,
    /** A payment with the attempt that paid it (its method, the card's last 4 or the phone, the page's language): its receipt. */
    paidWith: async (transactionId: number) => (await paidWithMany([transactionId])).get(transactionId) ?? null,
    paidWithMany,
    transition: ctx.transition,
    transitionMany: ctx.transitionMany,
    /** Asks the provider about one pending payment now, as its reconcile job does (a day's reconciliation); the row after. */
    async reconcileNow(transactionId: number) {
      await reconcileJob.run({ transactionId }, { id: 0n, kind: reconcileJob.kind, attempt: 1, createdAt: new Date() });
      return ctx.store.findById(transactionId);
    },
  };
}

export type TransactionService = ReturnType<typeof createTransactionService>;

// What other modules, tests and benchmarks import from here, wherever it now lives.
export { PAYMENT_IN_PROGRESS } from "./card.ts";
export { CARD_CHARGE_LEASE_MS, type CheckoutSettings } from "./context.ts";
export { CHECKOUT_EXPIRY_JOB, type AttemptView } from "./attempts.ts";
export { ATTEMPT_QUERY_JOB } from "./reconcile.ts";
export { type ProviderPayment, type StkCollectionInput } from "./collections.ts";
export {
  momoConnectorOf,
  newReference,
  RECONCILE_JOB,
  type CollectionTiming,
  type HostedTiming,
  type TransactionServiceDeps,
} from "./context.ts";
export { type SavedChargeInput, type SavedChargeResult } from "./saved-charges.ts";
export { MAX_METADATA_BYTES, callbackUrlSchema, payerReturnUrl, type InitializeInput, type InitializeOptions } from "./initialize.ts";
export { newestFirst, parseTransactionSearch, transactionWhere, type TransactionFilters, type TransactionSearch } from "./store.ts";
