import { queryFromInfo } from "@pothos/plugin-prisma";
import type { GraphQLResolveInfo } from "graphql";
import { selectedFieldNames } from "../../graphql/selection.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { PHONE_INPUT_DESCRIPTION, toMsisdn } from "../../phone.ts";
import { TRANSACTION_SUMMARY_FIELDS } from "./rows.ts";

export const TransactionStatusEnum = builder.enumType("TransactionStatus", {
  description: "pending -> completed | failed; completed and failed are terminal.",
  values: ["pending", "completed", "failed"] as const,
});

export const Transaction = builder.prismaNode("Transaction", {
  id: { field: "id" },
  findUnique: (id, ctx) => ({ id: Number(id), merchantId: ctx.principal!.merchantId, mode: ctx.principal!.mode }),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    reference: t.exposeString("reference", { description: "Assigned by the gateway; the key for verify and status lookups." }),
    amount: t.expose("amount", { type: "BigInt", description: "In the currency's minor unit." }),
    amountRefunded: t.expose("amountRefunded", { type: "BigInt", description: "The sum of its completed refunds, in minor units." }),
    refunded: t.boolean({
      description: "True when all of it has been refunded (its status stays completed).",
      select: { amount: true, amountRefunded: true },
      resolve: (transaction) => transaction.amountRefunded > 0n && transaction.amountRefunded >= transaction.amount,
    }),
    disputed: t.boolean({
      description: "True once a payer disputed it (a chargeback); its status stays completed.",
      select: { disputeStatus: true },
      resolve: (transaction) => transaction.disputeStatus !== null,
    }),
    disputeStatus: t.exposeString("disputeStatus", { nullable: true, description: "Its latest dispute's status: needs_response, under_review, won or lost; null when never disputed." }),
    amountChargedBack: t.expose("amountChargedBack", { type: "BigInt", description: "What lost disputes took back, in minor units." }),
    fee: t.expose("fee", {
      type: "BigInt",
      nullable: true,
      description: "The provider's fee on it in minor units, from its channel's fee schedule as it was when it completed (a later change of the schedule never alters it); null until completed.",
    }),
    net: t.field({
      type: "BigInt",
      nullable: true,
      description: "What it brought the balance: amount - fee, in minor units (refunds and disputes are their own balance transactions); null until completed.",
      // No `select`: every read of a transaction (Prisma's whole rows, the summary rows of rows.ts) carries amount and fee,
      // and a field with one would cost the summary reads (verify, lists) a second statement.
      resolve: (transaction) => (transaction.fee == null ? null : transaction.amount - transaction.fee),
    }),
    refunds: t.relation("refunds", { description: "Its refunds, newest first.", query: { orderBy: [{ createdAt: "desc" }, { id: "desc" }] } }),
    currency: t.exposeString("currency"),
    status: t.expose("status", { type: TransactionStatusEnum }),
    paymentMethod: t.exposeString("paymentMethod", { nullable: true, description: "card, momo_stk or momo_c2b; null until a payment is attempted." }),
    description: t.exposeString("description", { nullable: true }),
    email: t.exposeString("email", { nullable: true }),
    phoneNumber: t.string({
      nullable: true,
      description: "254XXXXXXXXX, as mobile money writes it (stored as E.164).",
      resolve: (transaction) => toMsisdn(transaction.phoneNumber),
    }),
    clientReference: t.exposeString("clientReference", { nullable: true, description: "The merchant's own reference, when it sent one." }),
    checkoutRequestId: t.exposeString("checkoutRequestId", { nullable: true }),
    providerReference: t.exposeString("providerReference", {
      nullable: true,
      description: "The provider's receipt once paid: the M-Pesa receipt (MpesaReceiptNumber, or TransID for C2B), Paystack's transaction id, the sandbox's sbx_ id.",
    }),
    metadata: t.expose("metadata", { type: "JSON", nullable: true, description: "The JSON object sent with initialize, as sent; null when none was." }),
    failureCode: t.exposeString("failureCode", { nullable: true }),
    failureReason: t.exposeString("failureReason", { nullable: true }),
    authorizationUrl: t.string({
      description: "The hosted checkout page for the payer.",
      resolve: (transaction, _args, ctx) => ctx.services.transactions.checkoutUrl(transaction.reference),
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    completedAt: t.expose("completedAt", { type: "DateTime", nullable: true }),
    channel: t.relation("channel", { nullable: true }),
    customer: t.relation("customer", { nullable: true }),
    paymentDetail: t.field({
      type: PaymentDetail,
      nullable: true,
      description: "How it was paid, as the shop tells payments apart: the card's brand and last 4, or M-Pesa with its receipt; null until a payment is attempted.",
      select: {
        paymentMethod: true,
        providerReference: true,
        // The newest card attempt says which card (a declined card, then another, shows the last one tried).
        attempts: { where: { method: "card" }, orderBy: { id: "desc" }, take: 1, select: { cardBrand: true, detail: true } },
        savedMethod: { select: { cardBrand: true, cardLast4: true } },
      },
      resolve: (transaction) => paymentDetailOf(transaction),
    }),
    attempts: t.relation("attempts", {
      description: "Every provider call that may have moved the payer's money, oldest first: checkout card charges, STK pushes (from the checkout or the API) and C2B payments.",
      query: { orderBy: { id: "asc" } },
    }),
  }),
});

/** One try at paying on the hosted checkout: never a card number or a whole phone number. */
builder.prismaObject("TransactionAttempt", {
  fields: (t) => ({
    method: t.exposeString("method", { description: "card or mpesa." }),
    status: t.exposeString("status", { description: "pending, succeeded or failed; recorded once." }),
    code: t.exposeString("code", { nullable: true, description: "The provider's code when it failed: card_declined, insufficient_funds, 1032 (cancelled), 1037 (timeout) ..." }),
    reason: t.exposeString("reason", { nullable: true, description: "The provider's words for a failure, as the payer was shown them." }),
    detail: t.exposeString("detail", { nullable: true, description: "What the payer recognises it by: a masked phone (2547*****149) or a card's last four digits (**** 4242)." }),
    checkoutRequestId: t.exposeString("checkoutRequestId", { nullable: true, description: "The provider's id for an STK push." }),
    providerReference: t.exposeString("providerReference", { nullable: true, description: "The provider's receipt when it succeeded." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    settledAt: t.expose("settledAt", { type: "DateTime", nullable: true }),
  }),
});

/** What paymentDetail reads: the method, the receipt, the newest card attempt and the saved card charged. */
interface PaymentDetailSource {
  paymentMethod: string | null;
  providerReference: string | null;
  attempts: { cardBrand: string | null; detail: string | null }[];
  savedMethod: { cardBrand: string | null; cardLast4: string | null } | null;
}

interface PaymentDetailView {
  method: "card" | "mpesa";
  cardBrand: string | null;
  cardLast4: string | null;
  receipt: string | null;
}

/** A card's last 4 from an attempt's masked detail (**** 4242). */
const lastFour = (detail: string | null | undefined) => /(\d{4})$/.exec(detail ?? "")?.[1] ?? null;

export function paymentDetailOf(t: PaymentDetailSource): PaymentDetailView | null {
  if (t.paymentMethod === "card") {
    const attempt = t.attempts[0];
    return {
      method: "card",
      cardBrand: attempt?.cardBrand ?? t.savedMethod?.cardBrand ?? null,
      cardLast4: lastFour(attempt?.detail) ?? t.savedMethod?.cardLast4 ?? null,
      receipt: null,
    };
  }
  if (t.paymentMethod === "momo_stk" || t.paymentMethod === "momo_c2b") return { method: "mpesa", cardBrand: null, cardLast4: null, receipt: t.providerReference };
  return null;
}

const PaymentDetail = builder.objectRef<PaymentDetailView>("PaymentDetail").implement({
  description: "How a payment was made: a card (brand and last 4) or M-Pesa (its receipt code once paid).",
  fields: (t) => ({
    method: t.exposeString("method", { description: "card or mpesa." }),
    cardBrand: t.exposeString("cardBrand", { nullable: true, description: "Visa, Mastercard ... when the card's network is known." }),
    cardLast4: t.exposeString("cardLast4", { nullable: true }),
    receipt: t.exposeString("receipt", { nullable: true, description: "The M-Pesa receipt code (e.g. SBX0A2186F) once paid." }),
  }),
});

const TransactionPage = offsetPageType("TransactionPage", Transaction, { days: true });

/**
 * Transaction fields that read only the summary columns (rows.ts): those exposed under the model field's own
 * name, plus databaseId (the id) and authorizationUrl (the reference).
 */
const SUMMARY_FIELDS: ReadonlySet<string> = new Set(["__typename", ...TRANSACTION_SUMMARY_FIELDS, "databaseId", "authorizationUrl", "refunded", "disputed", "net"]);

/**
 * Whether the transaction (at `path` below the current field: the page's items) is selected for summary fields
 * only, so its row can be read for those columns alone.
 */
function selectsSummaryOnly(info: GraphQLResolveInfo, path: readonly string[]): boolean {
  const fields = selectedFieldNames(info, path, "Transaction");
  return fields !== null && [...fields].every((field) => SUMMARY_FIELDS.has(field));
}

/** The status and date filters transactions and payouts share (src/filters.ts applies them). */
export function statusDateArgs(t: Parameters<Parameters<typeof builder.queryFields>[0]>[0]) {
  return {
    status: t.arg({ type: TransactionStatusEnum, required: false }),
    dateFrom: t.arg.string({ required: false, description: "Inclusive start date, YYYY-MM-DD: a day in timeZone (the merchant's by default)." }),
    dateTo: t.arg.string({ required: false, description: "Inclusive end date, YYYY-MM-DD: a day in timeZone (the merchant's by default)." }),
  };
}

builder.queryFields((t) => {
  const filterArgs = () => ({
    ...statusDateArgs(t),
    search: t.arg.string({
      required: false,
      description: "Exact match on the reference, your client reference, the provider's receipt, the payer's e-mail (any case) or phone (+254..., 254... or 07...).",
    }),
    clientReference: t.arg.string({ required: false, description: "Exactly your own reference (initialize's `reference`); several payments may share one." }),
    receipt: t.arg.string({ required: false, description: "Exactly the provider's receipt, e.g. the M-Pesa receipt code." }),
    phone: t.arg.string({ required: false, description: "The payer's phone, in any accepted form (0712..., 254712..., +254712...)." }),
    email: t.arg.string({ required: false, description: "The payer's e-mail, in any case." }),
    customer: t.arg.int({ required: false, description: "One of your customers, by its databaseId." }),
  });
  return {
  transaction: t.field({
    type: Transaction,
    description: "One of the merchant's transactions by reference.",
    errors: { types: businessErrors },
    args: { reference: t.arg.string({ required: true }) },
    resolve: (_root, { reference }, ctx, info) =>
      selectsSummaryOnly(info, [])
        ? ctx.services.transactions.getByReference(ctx.principal!, reference, {}, { summary: true })
        : ctx.services.transactions.getByReference(ctx.principal!, reference, queryFromInfo({ context: ctx, info, typeName: "Transaction" }) as object),
  }),

  ...pagedListFields(t, {
    days: true,
    name: "transactions",
    type: "Transaction",
    page: TransactionPage,
    descriptions: { page: "Newest first, by page number, with totals (the shape of the REST list).", connection: "Newest first, with Relay cursors and totalCount." },
    args: filterArgs,
    source: ({ services: { transactions } }) => ({
      listPage: (principal, input, query, info) => transactions.listPage(principal, input, query, { summary: selectsSummaryOnly(info, ["items"]) }),
      connectionSlice: transactions.listConnection,
      count: transactions.count,
    }),
  }),
  };
});

const InitializeTransactionInput = builder.inputType("InitializeTransactionInput", {
  fields: (t) => ({
    amount: t.field({ type: "BigInt", required: true, description: "Positive integer in the currency's minor unit, at most 10^12." }),
    email: t.string({ required: false, description: "The payer's e-mail; required unless `customer` is given." }),
    customer: t.int({ required: false, description: "One of your customers (its databaseId), instead of `email`." }),
    savePaymentMethod: t.boolean({ required: false, description: "Save the payer's card or M-Pesa phone for later charges when the payment succeeds (needs a customer: `customer`, or the one `email` names). The payer can still untick it on the checkout page." }),
    paymentChannelId: t.int({ required: false, description: "Defaults to the merchant's default channel." }),
    currency: t.string({ required: false, description: "ISO 4217; defaults to the merchant's default currency." }),
    description: t.string({ required: false }),
    firstName: t.string({ required: false }),
    lastName: t.string({ required: false }),
    phone: t.string({ required: false, description: PHONE_INPUT_DESCRIPTION }),
    callbackUrl: t.string({
      required: false,
      description: "An http(s) URL of the merchant's: after paying, the payer is sent there with ?trxref=<reference>&reference=<reference>.",
    }),
    reference: t.string({ required: false, description: "Your own reference (at most 100 characters), kept as clientReference; need not be unique." }),
    metadata: t.field({ type: "JSON", required: false, description: "A JSON object of yours, at most 8 KB serialized, echoed by verify, transaction and webhooks." }),
  }),
});

const InitializeTransactionPayload = builder
  .objectRef<{ transaction: { id: number; reference: string; accessCode: string } }>("InitializeTransactionPayload")
  .implement({
    fields: (t) => ({
      transaction: t.field({ type: Transaction, resolve: (p) => p.transaction as never }),
      reference: t.string({ resolve: (p) => p.transaction.reference }),
      accessCode: t.string({ resolve: (p) => p.transaction.accessCode }),
      authorizationUrl: t.string({ resolve: (p, _args, ctx) => ctx.services.transactions.checkoutUrl(p.transaction.reference) }),
    }),
  });

builder.mutationField("initializeTransaction", (t) =>
  t.field({
    type: InitializeTransactionPayload,
    description: "Starts a payment; the payer completes it at authorizationUrl.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: InitializeTransactionInput, required: true }) },
    resolve: async (_root, { input }, ctx) => ({ transaction: await ctx.services.transactions.initialize(ctx.principal!, input) }),
  }),
);
