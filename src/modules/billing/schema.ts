import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { Customer } from "../customers/schema.ts";
import { merchantEventsField, statusEventType } from "../events/schema.ts";
import { NextAction } from "../payment-methods/schema.ts";
import { INVOICE_STATUSES, PLAN_INTERVALS, SUBSCRIPTION_STATUSES } from "./service.ts";
import type { invoiceView, subscriptionView } from "./views.ts";
import { nextActionOf } from "./views.ts";

/** Recurring billing: thin resolvers over services.billing (REST /v1 plans, subscriptions, invoices and test clocks run these). */

const PlanIntervalEnum = builder.enumType("PlanInterval", { values: PLAN_INTERVALS });
const SubscriptionStatusEnum = builder.enumType("SubscriptionStatus", {
  description: "trialing -> active; active -> past_due while an invoice's charge is retried, -> unpaid (or canceled) after the last retry fails; canceled at any time.",
  values: SUBSCRIPTION_STATUSES,
});
const InvoiceStatusEnum = builder.enumType("InvoiceStatus", { description: "open -> paid | uncollectible | void.", values: INVOICE_STATUSES });

export const Plan = builder.prismaObject("Plan", {
  description: "What a subscription bills each period. Immutable: a new price is a new plan.",
  fields: (t) => ({
    id: t.exposeString("reference", { description: "pln_..." }),
    name: t.exposeString("name"),
    amount: t.expose("amount", { type: "BigInt", description: "Minor units, each period." }),
    currency: t.exposeString("currency"),
    interval: t.field({ type: PlanIntervalEnum, resolve: (p) => p.interval as (typeof PLAN_INTERVALS)[number] }),
    intervalCount: t.exposeInt("intervalCount", { description: "Intervals per period (e.g. 2 with week: every two weeks)." }),
    trialDays: t.exposeInt("trialDays", { description: "Days before the first period is billed." }),
    metadata: t.expose("metadata", { type: "JSON", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const TestClock = builder.prismaObject("TestClock", {
  description: "Test mode: a clock whose customers' billing follows its frozen time; advancing it runs what falls due, in order.",
  fields: (t) => ({
    id: t.exposeString("reference", { description: "clock_..." }),
    name: t.exposeString("name", { nullable: true }),
    frozenTime: t.expose("frozenTime", { type: "DateTime" }),
    status: t.exposeString("status", { description: "advancing until everything due up to frozenTime has run, then ready." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const Subscription = builder.prismaObject("Subscription", {
  // "Subscription" is GraphQL's root type of subscriptions.
  name: "BillingSubscription",
  description: "A customer billed a plan every period on a saved payment method (/v1/subscriptions).",
  fields: (t) => ({
    id: t.exposeString("reference", { description: "sub_..." }),
    customerId: t.exposeInt("customerId", { description: "The customer's databaseId." }),
    customer: t.relation("customer"),
    plan: t.relation("plan"),
    paymentMethod: t.relation("paymentMethod"),
    status: t.field({ type: SubscriptionStatusEnum, resolve: (s) => s.status as (typeof SUBSCRIPTION_STATUSES)[number] }),
    trialEnd: t.expose("trialEnd", { type: "DateTime", nullable: true }),
    currentPeriodStart: t.expose("currentPeriodStart", { type: "DateTime" }),
    currentPeriodEnd: t.expose("currentPeriodEnd", { type: "DateTime" }),
    cancelAtPeriodEnd: t.exposeBoolean("cancelAtPeriodEnd"),
    canceledAt: t.expose("canceledAt", { type: "DateTime", nullable: true }),
    nextInvoiceAt: t.expose("nextInvoiceAt", { type: "DateTime", nullable: true, description: "When the next period is invoiced (with cancelAtPeriodEnd: when it ends instead); null once it bills no more." }),
    testClock: t.relation("testClock", { nullable: true }),
    metadata: t.expose("metadata", { type: "JSON", nullable: true }),
    invoices: t.relation("invoices", { query: { orderBy: [{ periodStart: "desc" }, { id: "desc" }] } }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const CHARGE_SELECT = { reference: true, invoiceAttempt: true, status: true, failureCode: true, providerCheckoutUrl: true, createdAt: true } as const;
type ChargeRow = { reference: string; invoiceAttempt: number | null; status: string; failureCode: string | null; providerCheckoutUrl: string | null; createdAt: Date };

const InvoiceCharge = builder.objectRef<ChargeRow>("InvoiceCharge").implement({
  description: "One charge of an invoice: an ordinary transaction (in lists, the ledger and reports).",
  fields: (t) => ({
    attempt: t.int({ resolve: (c) => c.invoiceAttempt ?? 0, description: "1 for the first charge, then each retry." }),
    transactionReference: t.exposeString("reference"),
    status: t.exposeString("status", { description: "pending, completed or failed." }),
    failureCode: t.exposeString("failureCode", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const Invoice = builder.prismaObject("Invoice", {
  description: "One period of a subscription, billed once.",
  fields: (t) => ({
    id: t.exposeString("reference", { description: "in_..." }),
    subscription: t.relation("subscription"),
    customerId: t.exposeInt("customerId", { description: "The customer's databaseId." }),
    amountDue: t.expose("amountDue", { type: "BigInt" }),
    currency: t.exposeString("currency"),
    periodStart: t.expose("periodStart", { type: "DateTime" }),
    periodEnd: t.expose("periodEnd", { type: "DateTime" }),
    status: t.field({ type: InvoiceStatusEnum, resolve: (i) => i.status as (typeof INVOICE_STATUSES)[number] }),
    attempts: t.exposeInt("attempts", { description: "Charges whose outcome is recorded." }),
    nextAttemptAt: t.expose("nextAttemptAt", { type: "DateTime", nullable: true, description: "When the next charge is made; null once nothing more is tried." }),
    paidAt: t.expose("paidAt", { type: "DateTime", nullable: true }),
    charges: t.field({
      type: [InvoiceCharge],
      select: { transactions: { select: CHARGE_SELECT, orderBy: { invoiceAttempt: "asc" } } },
      resolve: (i) => i.transactions,
    }),
    transactionReference: t.string({
      nullable: true,
      description: "The latest charge's transaction.",
      select: { transactions: { select: CHARGE_SELECT, orderBy: { invoiceAttempt: "asc" } } },
      resolve: (i) => i.transactions.at(-1)?.reference ?? null,
    }),
    nextAction: t.field({
      type: NextAction,
      nullable: true,
      description: "When the latest charge waits for the payer (a card's bank asks for OTP): where to send them.",
      select: { transactions: { select: CHARGE_SELECT, orderBy: { invoiceAttempt: "asc" } } },
      resolve: (i, _args, ctx) => nextActionOf(i.transactions, ctx.services.transactions.checkoutUrl),
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

builder.objectFields(Customer, (t) => ({
  testClock: t.field({
    type: TestClock,
    nullable: true,
    description: "Test mode: the clock the customer lives on.",
    resolve: (c, _args, ctx) => (c.testClockId === null ? null : ctx.prisma.testClock.findUnique({ where: { id: c.testClockId } })),
  }),
  subscriptions: t.field({
    type: [Subscription],
    description: "Its subscriptions, newest first.",
    resolve: (c, _args, ctx) => ctx.services.billing.subscriptions.connectionSlice(ctx.principal!, { customer: c.id }, {}),
  }),
  invoices: t.field({
    type: [Invoice],
    description: "Its invoices, newest first (at most 100).",
    resolve: (c, _args, ctx) => ctx.services.billing.invoices.connectionSlice(ctx.principal!, { customer: c.id }, { take: 100 }),
  }),
}));

const PlanPage = offsetPageType("PlanPage", Plan);
const SubscriptionPage = offsetPageType("SubscriptionPage", Subscription);
const InvoicePage = offsetPageType("InvoicePage", Invoice);

builder.queryFields((t) => ({
  plan: t.field({
    type: Plan,
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "pln_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.billing.plan(ctx.principal!, id),
  }),
  subscription: t.field({
    type: Subscription,
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "sub_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.billing.subscription(ctx.principal!, id),
  }),
  invoice: t.field({
    type: Invoice,
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "in_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.billing.invoice(ctx.principal!, id),
  }),
  testClock: t.field({
    type: TestClock,
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "clock_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.billing.testClock(ctx.principal!, id),
  }),
  ...pagedListFields(t, {
    name: "plans",
    // Paged lists (the /v1 shapes); a merchant's billing lists are short enough not to need cursors.
    connection: false,
    type: "Plan",
    page: PlanPage,
    descriptions: { page: "Newest first, by page, with totals (the shape of GET /v1/plans).", connection: "Newest first, with Relay cursors and totalCount." },
    args: () => ({}),
    source: (ctx) => ctx.services.billing.plans,
  }),
  ...pagedListFields(t, {
    name: "subscriptions",
    // Paged lists (the /v1 shapes); a merchant's billing lists are short enough not to need cursors.
    connection: false,
    type: "Subscription",
    page: SubscriptionPage,
    descriptions: { page: "Newest first, by page, with totals (the shape of GET /v1/subscriptions).", connection: "Newest first, with Relay cursors and totalCount; the same filters." },
    args: () => ({
      customer: t.arg.int({ required: false, description: "The customer's databaseId." }),
      status: t.arg({ type: SubscriptionStatusEnum, required: false }),
      plan: t.arg.string({ required: false, description: "pln_..." }),
    }),
    source: (ctx) => ctx.services.billing.subscriptions,
  }),
  ...pagedListFields(t, {
    name: "invoices",
    // Paged lists (the /v1 shapes); a merchant's billing lists are short enough not to need cursors.
    connection: false,
    type: "Invoice",
    page: InvoicePage,
    descriptions: { page: "Newest first, by page, with totals (the shape of GET /v1/invoices).", connection: "Newest first, with Relay cursors and totalCount; the same filters." },
    args: () => ({
      subscription: t.arg.string({ required: false, description: "sub_..." }),
      customer: t.arg.int({ required: false, description: "The customer's databaseId." }),
      status: t.arg({ type: InvoiceStatusEnum, required: false }),
    }),
    source: (ctx) => ctx.services.billing.invoices,
  }),
}));

const CreatePlanInput = builder.inputType("CreatePlanInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    amount: t.field({ type: "BigInt", required: true, description: "Minor units, each period." }),
    currency: t.string({ required: true }),
    interval: t.string({ required: true, description: PLAN_INTERVALS.join(", ") }),
    intervalCount: t.int({ description: "Default 1." }),
    trialDays: t.int({ description: "Default 0." }),
    metadata: t.field({ type: "JSON" }),
  }),
});

const CreateSubscriptionInput = builder.inputType("CreateSubscriptionInput", {
  fields: (t) => ({
    customer: t.int({ required: true, description: "The customer's databaseId." }),
    plan: t.string({ required: true, description: "pln_..." }),
    paymentMethod: t.string({ required: true, description: "pm_..., one of the customer's reusable methods." }),
    startAt: t.string({ description: "ISO 8601; default now (the customer's clock's now)." }),
    metadata: t.field({ type: "JSON" }),
  }),
});

builder.mutationFields((t) => ({
  createPlan: t.field({
    type: Plan,
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreatePlanInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.billing.createPlan(ctx.principal!, input),
  }),
  createSubscription: t.field({
    type: Subscription,
    description: "Subscribes a customer to a plan; its first period is billed when it starts (after the trial, if any).",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateSubscriptionInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.billing.createSubscription(ctx.principal!, input),
  }),
  cancelSubscription: t.field({
    type: Subscription,
    description: "atPeriodEnd true: it ends when the current period does (no further invoice); false: now, its open invoices voided.",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "sub_..." }), atPeriodEnd: t.arg.boolean({ required: false, defaultValue: false }) },
    resolve: (_root, { id, atPeriodEnd }, ctx) => ctx.services.billing.cancelSubscription(ctx.principal!, id, atPeriodEnd ?? false),
  }),
  createTestClock: t.field({
    type: TestClock,
    description: "Test mode only.",
    errors: { types: businessErrors },
    args: { frozenTime: t.arg.string({ required: true, description: "ISO 8601 with a zone." }), name: t.arg.string({ required: false }) },
    resolve: (_root, args, ctx) => ctx.services.billing.createTestClock(ctx.principal!, args),
  }),
  advanceTestClock: t.field({
    type: TestClock,
    description: "Moves the clock forward (only forward) and runs everything due up to then, in order; status advancing until done.",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "clock_..." }), frozenTime: t.arg.string({ required: true, description: "ISO 8601 with a zone." }) },
    resolve: (_root, { id, frozenTime }, ctx) => ctx.services.billing.advanceTestClock(ctx.principal!, id, frozenTime),
  }),
  deleteTestClock: t.field({
    type: TestClock,
    description: "Deletes the clock; its subscriptions are canceled first.",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "clock_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.billing.deleteTestClock(ctx.principal!, id),
  }),
}));

type SubscriptionView = ReturnType<typeof subscriptionView>;
type InvoiceView = ReturnType<typeof invoiceView>;

/** A subscription as of its event (fields named as on BillingSubscription; the webhook carries the /v1/subscriptions shape). */
const SubscriptionSnapshot = builder.objectRef<SubscriptionView>("SubscriptionSnapshot").implement({
  fields: (t) => ({
    id: t.exposeString("id", { description: "sub_..." }),
    customerId: t.exposeInt("customer"),
    status: t.field({ type: SubscriptionStatusEnum, resolve: (s) => s.status as (typeof SUBSCRIPTION_STATUSES)[number] }),
    trialEnd: t.exposeString("trial_end", { nullable: true }),
    currentPeriodStart: t.exposeString("current_period_start", { nullable: true }),
    currentPeriodEnd: t.exposeString("current_period_end", { nullable: true }),
    cancelAtPeriodEnd: t.exposeBoolean("cancel_at_period_end"),
    canceledAt: t.exposeString("canceled_at", { nullable: true }),
    nextInvoiceAt: t.exposeString("next_invoice_at", { nullable: true }),
    createdAt: t.exposeString("created_at", { nullable: true }),
  }),
});

/** An invoice as of its event (fields named as on Invoice; the webhook carries the /v1/invoices shape). */
const InvoiceSnapshot = builder.objectRef<InvoiceView>("InvoiceSnapshot").implement({
  fields: (t) => ({
    id: t.exposeString("id", { description: "in_..." }),
    customerId: t.exposeInt("customer"),
    amountDue: t.exposeInt("amount_due"),
    currency: t.exposeString("currency"),
    periodStart: t.exposeString("period_start", { nullable: true }),
    periodEnd: t.exposeString("period_end", { nullable: true }),
    status: t.field({ type: InvoiceStatusEnum, resolve: (i) => i.status as (typeof INVOICE_STATUSES)[number] }),
    attempts: t.exposeInt("attempts"),
    nextAttemptAt: t.exposeString("next_attempt_at", { nullable: true }),
    paidAt: t.exposeString("paid_at", { nullable: true }),
    transactionReference: t.exposeString("transaction_reference", { nullable: true }),
    createdAt: t.exposeString("created_at", { nullable: true }),
  }),
});

const SubscriptionEvent = statusEventType("SubscriptionEvent", "subscription.created, subscription.updated (a new period, a status change) or subscription.canceled.", "subscription", SubscriptionSnapshot);
const InvoiceEvent = statusEventType("InvoiceEvent", "invoice.created, invoice.paid or invoice.payment_failed (with the next attempt, or status uncollectible after the last).", "invoice", InvoiceSnapshot);

builder.subscriptionFields((t) => ({
  subscriptionEvents: merchantEventsField(t, SubscriptionEvent, "Every event of the merchant's subscriptions in the key's mode.", (event) => event.type.startsWith("subscription.")),
  invoiceEvents: merchantEventsField(t, InvoiceEvent, "Every event of the merchant's invoices in the key's mode.", (event) => event.type.startsWith("invoice.")),
}));
