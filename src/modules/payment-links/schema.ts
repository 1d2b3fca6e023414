import { queryFromInfo } from "@pothos/plugin-prisma";
import { ownedNode } from "../../auth.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";

/** Payment links: thin resolvers over services.paymentLinks (REST /v1/payment-links runs these too). */

export const PaymentLinkType = builder.prismaNode("PaymentLink", {
  id: { field: "id" },
  description: "A link the merchant hands to payers: /pay/<slug> makes a checkout transaction for each payer (one payment only unless reusable).",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    slug: t.exposeString("slug", { description: "Random and unguessable: the public page's path." }),
    url: t.string({ description: "The public page: PUBLIC_URL/pay/<slug>.", resolve: (link, _args, ctx) => ctx.services.paymentLinks.urlOf(link) }),
    active: t.exposeBoolean("active", { description: "False once deactivated." }),
    amount: t.expose("amount", { type: "BigInt", nullable: true, description: "Minor units; null for an open amount, which the payer chooses." }),
    minAmount: t.expose("minAmount", { type: "BigInt", description: "The least an open amount may be (minor units)." }),
    currency: t.exposeString("currency"),
    description: t.exposeString("description"),
    reusable: t.exposeBoolean("reusable", { description: "True: every payer pays; false: the link is done once paid." }),
    expiresAt: t.expose("expiresAt", { type: "DateTime", nullable: true }),
    callbackUrl: t.exposeString("callbackUrl", { nullable: true }),
    paymentChannelId: t.exposeInt("paymentChannelId", { nullable: true }),
    paymentsCount: t.relationCount("payments", { description: "Transactions made through the link, whatever became of them." }),
    payments: t.prismaField({
      type: ["Transaction"],
      description: "The transactions made through the link, newest first, whatever became of them.",
      args: { limit: t.arg.int({ required: false, description: "1 to 100 (default 20)." }) },
      resolve: (query, link, args, ctx) => ctx.services.paymentLinks.linkPayments(link, args.limit, query),
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const PaymentLinkPage = offsetPageType("PaymentLinkPage", PaymentLinkType);

const CreatePaymentLinkInput = builder.inputType("CreatePaymentLinkInput", {
  fields: (t) => ({
    amount: t.field({ type: "BigInt", required: false, description: "Minor units; leave out for an open amount." }),
    minAmount: t.field({ type: "BigInt", required: false, description: "Open amounts only: the least a payer may pay (default 1)." }),
    currency: t.string({ required: false, description: "ISO 4217; default: the merchant's currency." }),
    description: t.string({ required: true, description: "Shown to payers; at most 500 characters." }),
    reusable: t.boolean({ required: false, description: "Default false: one payment, then the link is done." }),
    expiresAt: t.string({ required: false, description: "ISO 8601 with a zone, in the future." }),
    callbackUrl: t.string({ required: false, description: "Where payers go after paying, as initialize's callback_url." }),
    paymentChannelId: t.int({ required: false, description: "Default: the merchant's default channel in this mode." }),
  }),
});

builder.queryFields((t) => ({
  paymentLink: t.field({
    type: PaymentLinkType,
    description: "One of the merchant's payment links, by databaseId.",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "The databaseId." }) },
    resolve: (_root, { id }, ctx, info) =>
      ctx.services.paymentLinks.getLink(ctx.principal!, id, queryFromInfo({ context: ctx, info, typeName: "PaymentLink" }) as object) as never,
  }),
  ...pagedListFields(t, {
    name: "paymentLinks",
    type: "PaymentLink",
    page: PaymentLinkPage,
    descriptions: {
      page: "Newest first, by page number, with totals (the shape of GET /v1/payment-links).",
      connection: "Newest first, with Relay cursors and totalCount.",
    },
    args: () => ({ active: t.arg.boolean({ required: false }) }),
    source: (ctx) => ctx.services.paymentLinks,
  }),
}));

builder.mutationFields((t) => ({
  createPaymentLink: t.field({
    type: PaymentLinkType,
    description: "Creates a payment link: a fixed amount, or an open one of at least minAmount.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreatePaymentLinkInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.paymentLinks.createLink(ctx.principal!, input) as never,
  }),
  deactivatePaymentLink: t.field({
    type: PaymentLinkType,
    description: "Stops a link taking payments; its page then says so. Payments already made are untouched.",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "The databaseId." }) },
    resolve: (_root, { id }, ctx) => ctx.services.paymentLinks.deactivateLink(ctx.principal!, id) as never,
  }),
}));
