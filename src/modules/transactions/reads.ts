import type { Principal } from "../../auth.ts";
import type { Transaction } from "../../db/generated/prisma/client.ts";
import { NotFoundError } from "../../errors.ts";
import type { Page } from "../../paging.ts";
import { isTestProvider } from "../../providers/registry.ts";
import type { CheckoutView } from "../../checkout/page.ts";
import type { AttemptFlow } from "./attempts.ts";
import type { FlowContext } from "./context.ts";
import { payerReturnUrl } from "./initialize.ts";
import { toPublishedEvent } from "./status.ts";
import type { TransactionFilters, TransactionQuery } from "./store.ts";

/** The reads: a merchant's transaction and lists, the payer's checkout view, a transaction's settling event. */
export function createReads(ctx: FlowContext, attempts: Pick<AttemptFlow, "checkoutState" | "mpesaChannelFor">) {
  const { deps, store, readStore } = ctx;
  const { connectors } = deps;

  return {
    /** The caller's transaction by id (digits) or reference, with its channel; a 404 when it has none such. */
    async getWithChannel(principal: Principal, idOrReference: string) {
      const key = idOrReference.trim();
      const transaction = await store.findWithChannelInScope(principal, /^\d{1,9}$/.test(key) ? { id: Number(key) } : { reference: key });
      if (!transaction) throw new NotFoundError("Transaction");
      return transaction;
    },

    /** `query` carries the relations a GraphQL selection needs, so one read serves it. */
    /** With `summary`, only the summary fields (rows.ts) are read, for a selection that reads no others. */
    async getByReference(principal: Principal, reference: string, query: TransactionQuery = {}, options: { summary?: boolean } = {}): Promise<Transaction> {
      const transaction = options.summary ? await store.findSummaryByReference(principal, reference) : await store.findByReference(principal, reference, query);
      if (!transaction) throw new NotFoundError("Transaction");
      return transaction;
    },

    /**
     * One page with totals; `query` carries the relations a GraphQL selection needs (no N+1). With `summary`
     * the items carry only the summary fields (rows.ts), for a selection that reads no others.
     */
    listPage(
      principal: Principal,
      input: TransactionFilters & { page?: number | null; limit?: number | null },
      query: TransactionQuery = {},
      options: { summary?: boolean } = {},
    ): Promise<Page<Transaction>> {
      return readStore.listPage(principal, input, query, options.summary ?? false);
    },

    /** The Relay connection's rows, newest (highest id) first; Pothos's `query` carries cursor, window and relations. */
    listConnection: readStore.listConnection,

    /** How many of the caller's transactions match the filters. */
    count: readStore.count,

    /** What the payer's checkout page shows; null when the reference is unknown. */
    async checkoutView(reference: string): Promise<CheckoutView | null> {
      const [t, row] = await Promise.all([store.findCheckoutView(reference), store.findForPayer(reference)]);
      if (!t || !row) return null;
      const connector = t.channel !== null ? connectors.for(t.channel) : undefined;
      const acceptsCards = connector?.chargeCard !== undefined;
      const pending = row.status === "pending";
      const [state, mpesa] = await Promise.all([attempts.checkoutState(row), pending ? attempts.mpesaChannelFor(row) : null]);
      return {
        id: row.id,
        merchantId: t.merchantId,
        methods: { card: acceptsCards, mpesa: mpesa !== null },
        attemptsLeft: state.attemptsLeft,
        attempt: state.attempt,
        reference: t.reference,
        amount: t.amount,
        currency: t.currency,
        status: t.status,
        description: t.description,
        mode: t.mode,
        failureCode: row.failureCode,
        failureReason: t.failureReason,
        returnUrl: t.callbackUrl ? payerReturnUrl(t.callbackUrl, t.reference) : null,
        sandbox: t.channel !== null && isTestProvider(t.channel.provider),
        merchantName: t.merchant.name,
        acceptsCards,
        // A card paid on this page can be saved only for a customer, through a channel that charges saved cards.
        saveCard: { offered: acceptsCards && row.customerId !== null && connector?.savedCards !== undefined, requested: row.savePaymentMethod },
        hosted: connector?.hosted !== undefined,
      };
    },

    /** What the payer's page polls while an attempt is pending (GET /payment/checkout/:reference/status); null when unknown. */
    async checkoutStatus(reference: string) {
      const t = await store.findForPayer(reference);
      if (!t) return null;
      const state = await attempts.checkoutState(t);
      return {
        status: t.status,
        failure_code: t.failureCode,
        failure_reason: t.failureReason,
        attempts_left: state.attemptsLeft,
        attempt: state.attempt,
        return_url: t.callbackUrl ? payerReturnUrl(t.callbackUrl, t.reference) : null,
      };
    },

    /** The latest settling event of a transaction (completed or failed), as subscribers receive it. */
    async lastSettlingEvent(transactionId: number) {
      const event = await deps.prisma.event.findFirst({
        where: { transactionId, type: { in: ["transaction.completed", "transaction.failed"] } },
        orderBy: { id: "desc" },
      });
      return event ? toPublishedEvent(event) : null;
    },
  };
}
