import { ownedNode } from "../../auth.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { BALANCE_TRANSACTION_TYPES } from "./postings.ts";
import type { ChannelBalance as ChannelBalanceRow } from "./store.ts";

/** Balances, balance transactions and adjustments: thin resolvers over services.ledger (REST /v1/balance runs these too). */

const BalanceTransactionTypeEnum = builder.enumType("BalanceTransactionType", {
  description: "What moved the balance. Reservations of refunds and payouts in flight move money within it and are not listed.",
  values: BALANCE_TRANSACTION_TYPES,
});

export const BalanceTransaction = builder.prismaNode("LedgerEntry", {
  name: "BalanceTransaction",
  id: { field: "id" },
  description:
    "One movement of a channel's balance (a journal entry of the ledger): amount is the change in what the provider holds for the merchant " +
    "plus the fee, money in positive; net = amount - fee. Immutable: corrections are adjustments.",
  findUnique: (id, ctx) => ({ ...ownedNode(id, ctx.principal), type: { in: [...BALANCE_TRANSACTION_TYPES] } }),
  fields: (t) => ({
    databaseId: t.expose("id", { type: "BigInt", description: "The id used by the REST API and the CSV export." }),
    type: t.field({ type: BalanceTransactionTypeEnum, resolve: (e) => e.type as (typeof BALANCE_TRANSACTION_TYPES)[number] }),
    amount: t.expose("amount", { type: "BigInt", description: "Signed, minor units: a payment positive, a completed refund or payout negative, a failed one 0." }),
    fee: t.expose("fee", { type: "BigInt", description: "What the provider kept (the channel's fee schedule), minor units." }),
    net: t.field({ type: "BigInt", description: "amount - fee.", resolve: (e) => e.amount - e.fee }),
    currency: t.exposeString("currency"),
    paymentChannelId: t.exposeInt("channelId"),
    sourceReference: t.exposeString("sourceReference", { description: "The payment's, refund's or payout's reference; an adjustment's own (adj_...)." }),
    description: t.exposeString("note", { nullable: true, description: "An adjustment's note; null for the others." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const BalanceTransactionPage = offsetPageType("BalanceTransactionPage", BalanceTransaction, { days: true });

const ChannelBalance = builder.objectRef<ChannelBalanceRow>("ChannelBalance").implement({
  description:
    "One channel's balance in one currency, from the ledger's accounts: available = collected - fees - refunded - paidOut - pendingOut - disputed - chargedBack + adjustments. " +
    "Only channels with ledger activity are listed.",
  fields: (t) => ({
    paymentChannelId: t.exposeInt("channelId"),
    provider: t.exposeString("provider"),
    currency: t.exposeString("currency"),
    collected: t.expose("collected", { type: "BigInt", description: "Payments received." }),
    fees: t.expose("fees", { type: "BigInt", description: "What the provider kept of them." }),
    refunded: t.expose("refunded", { type: "BigInt", description: "Refunds completed." }),
    paidOut: t.expose("paidOut", { type: "BigInt", description: "Payouts completed." }),
    pendingOut: t.expose("pendingOut", { type: "BigInt", description: "Reserved for refunds and payouts in flight." }),
    adjustments: t.expose("adjustments", { type: "BigInt", description: "The sum of adjustments, money in positive." }),
    disputed: t.expose("disputed", { type: "BigInt", description: "Held while payers' chargebacks are open." }),
    chargedBack: t.expose("chargedBack", { type: "BigInt", description: "Taken back by lost disputes." }),
    available: t.expose("available", { type: "BigInt", description: "What the provider holds for the merchant, less what is reserved." }),
  }),
});

const CreateAdjustmentInput = builder.inputType("CreateAdjustmentInput", {
  fields: (t) => ({
    paymentChannelId: t.int({ required: true }),
    amount: t.field({ type: "BigInt", required: true, description: "Signed minor units, not 0, at most 10^12 either way: positive adds to available." }),
    currency: t.string({ required: false, description: "ISO 4217; default: the merchant's default currency." }),
    note: t.string({ required: true, description: "Why: 1 to 500 characters, kept with the entry (the CSV export's description)." }),
  }),
});

const filterArgs = (t: Parameters<Parameters<typeof builder.queryFields>[0]>[0]) => ({
  type: t.arg({ type: BalanceTransactionTypeEnum, required: false }),
  paymentChannelId: t.arg.int({ required: false }),
  dateFrom: t.arg.string({ required: false, description: "Inclusive start date, YYYY-MM-DD: a day in timeZone (the merchant's by default)." }),
  dateTo: t.arg.string({ required: false, description: "Inclusive end date, YYYY-MM-DD: a day in timeZone (the merchant's by default)." }),
});

builder.queryFields((t) => ({
  balance: t.field({
    type: [ChannelBalance],
    description: "Each channel's balance per currency, ordered by channel and currency (the shape of GET /v1/balance).",
    args: { paymentChannelId: t.arg.int({ required: false }) },
    resolve: (_root, args, ctx) => ctx.services.ledger.balance(ctx.principal!, args),
  }),
  ...pagedListFields(t, {
    days: true,
    name: "balanceTransactions",
    type: BalanceTransaction,
    page: BalanceTransactionPage,
    descriptions: {
      page: "Newest first, by page number, with totals (the shape of GET /v1/balance/transactions).",
      connection: "Newest first, with Relay cursors and totalCount; the same filters as balanceTransactionsPage.",
    },
    args: () => filterArgs(t),
    source: (ctx) => ctx.services.ledger,
  }),
}));

builder.mutationField("createAdjustment", (t) =>
  t.field({
    type: BalanceTransaction,
    description:
      "Corrects a channel's balance with a new entry (available <-> adjustments), never an edit. A signed-in owner only " +
      "(recorded as its author): an API key or another role gets forbidden. Honours Idempotency-Key.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateAdjustmentInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.ledger.createAdjustment(ctx.principal!, input),
  }),
);
