import { ownedNode } from "../../auth.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";

const ChannelCredentialCheck = builder.prismaObject("ChannelCredentialCheck", {
  description: "What the provider said when the channel's credentials were last shown to it (M-Pesa: the OAuth token call; Paystack: GET /balance).",
  fields: (t) => ({
    ok: t.exposeBoolean("ok", { description: "True when the provider accepted them (and, for a live channel, they are live credentials)." }),
    message: t.exposeString("message", { description: "The provider's answer in the merchant's words; never a secret." }),
    checkedAt: t.expose("checkedAt", { type: "DateTime" }),
  }),
});

export const PaymentChannel = builder.prismaNode("PaymentChannel", {
  id: { field: "id" },
  description: "A connection to an upstream payment provider. Its credentials are write-only.",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  // configEncrypted and callbackToken are deliberately not exposed.
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API and in mutation inputs." }),
    name: t.exposeString("name"),
    provider: t.exposeString("provider", { description: "sandbox, mpesa or paystack." }),
    isActive: t.exposeBoolean("isActive"),
    isDefault: t.exposeBoolean("isDefault", { description: "Used by payments that name no channel. At most one per merchant and mode." }),
    feePercentBps: t.exposeInt("feePercentBps", { description: "The provider's fee on each payment, in basis points of the amount (150 = 1.5%); the ledger books it." }),
    feeFixed: t.expose("feeFixed", { type: "BigInt", description: "The provider's fixed fee on each payment, in minor units, added to the percentage." }),
    feeCap: t.expose("feeCap", { type: "BigInt", nullable: true, description: "The most the fee on one payment can be, in minor units; null: no cap." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    credentialsCheck: t.relation("credentialCheck", {
      nullable: true,
      description: "The last check of its credentials with the provider; null until one is made (live channels are checked when their credentials are saved).",
    }),
    webhookUrl: t.string({
      nullable: true,
      description: "Paystack channels: the URL to paste into Paystack's dashboard (Settings, API keys & webhooks) so its webhooks reach this channel. Null for other providers.",
      select: { provider: true, callbackToken: true },
      resolve: (channel, _args, ctx) => ctx.services.channels.providerWebhookUrl(channel),
    }),
  }),
});

const CreatePaymentChannelInput = builder.inputType("CreatePaymentChannelInput", {
  fields: (t) => ({
    name: t.string({ required: true, description: "1 to 100 characters." }),
    provider: t.string({ required: true, description: "sandbox, mpesa or paystack." }),
    config: t.field({ type: "JSON", description: "The provider's credentials, e.g. public_key and secret_key for paystack." }),
    feePercentBps: t.int({ description: "The provider's fee in basis points of each payment's amount, 0 to 10000 (default 0)." }),
    feeFixed: t.field({ type: "BigInt", description: "The provider's fixed fee per payment in minor units, 0 to 10^12 (default 0)." }),
    feeCap: t.field({ type: "BigInt", description: "The most the fee on one payment can be, minor units, 0 to 10^12 (default: no cap)." }),
  }),
});

const UpdatePaymentChannelInput = builder.inputType("UpdatePaymentChannelInput", {
  fields: (t) => ({
    id: t.int({ required: true, description: "The channel's databaseId." }),
    name: t.string(),
    config: t.field({ type: "JSON", description: "Replaces the whole config; validated against the channel's provider." }),
    feePercentBps: t.int({ description: "The provider's fee in basis points of each payment's amount, 0 to 10000 (default 0)." }),
    feeFixed: t.field({ type: "BigInt", description: "The provider's fixed fee per payment in minor units, 0 to 10^12 (default 0)." }),
    feeCap: t.field({ type: "BigInt", description: "The most the fee on one payment can be, minor units, 0 to 10^12; absent: unchanged (removeFeeCap removes it)." }),
    removeFeeCap: t.boolean({ description: "True: the fee has no cap any more." }),
  }),
});

const FeePreview = builder.objectRef<{ fee: bigint; amount: bigint }>("FeePreview").implement({
  description: "What a fee schedule takes of one payment.",
  fields: (t) => ({
    amount: t.expose("amount", { type: "BigInt", description: "The payment's amount, minor units." }),
    fee: t.expose("fee", { type: "BigInt", description: "The fee, minor units." }),
    net: t.field({ type: "BigInt", description: "amount - fee: what the payment brings the balance.", resolve: (p) => p.amount - p.fee }),
  }),
});

builder.queryField("feePreview", (t) =>
  t.field({
    type: FeePreview,
    description:
      "The fee a schedule takes of a payment of `amount` (minor units), computed as each payment's fee is when it completes: min(round(amount * feePercentBps / 10000) + feeFixed, feeCap).",
    errors: { types: businessErrors },
    args: {
      amount: t.arg({ type: "BigInt", required: true }),
      feePercentBps: t.arg.int({ required: true }),
      feeFixed: t.arg({ type: "BigInt", required: true }),
      feeCap: t.arg({ type: "BigInt", required: false }),
    },
    resolve: async (_root, { amount, ...schedule }, ctx) => ({ amount, fee: await ctx.services.channels.previewFee(schedule, amount) }),
  }),
);

builder.queryField("paymentChannels", (t) =>
  t.field({
    type: [PaymentChannel],
    args: { activeOnly: t.arg.boolean({ defaultValue: false }) },
    resolve: (_root, { activeOnly }, ctx) => ctx.services.channels.listChannels(ctx.principal!, { activeOnly }),
  }),
);

builder.mutationFields((t) => ({
  createPaymentChannel: t.field({
    type: PaymentChannel,
    description: "Creates an active channel and makes it the default.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreatePaymentChannelInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.channels.createChannel(ctx.principal!, input),
  }),
  updatePaymentChannel: t.field({
    type: PaymentChannel,
    errors: { types: businessErrors },
    args: { input: t.arg({ type: UpdatePaymentChannelInput, required: true }) },
    resolve: (_root, { input: { id, ...changes } }, ctx) => ctx.services.channels.updateChannel(ctx.principal!, id, changes),
  }),
  setDefaultPaymentChannel: t.field({
    type: PaymentChannel,
    description: "Makes an active channel the default, clearing the previous one.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.channels.setDefaultChannel(ctx.principal!, id),
  }),
  checkChannelCredentials: t.prismaField({
    type: ChannelCredentialCheck,
    description: "Shows the channel's credentials to its provider now (a call that changes nothing) and keeps the answer on the channel.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_query, _root, { id }, ctx) => ctx.services.channels.checkCredentials(ctx.principal!, id),
  }),
  activatePaymentChannel: t.field({
    type: PaymentChannel,
    description: "Makes a deactivated channel usable again; it does not become the default (setDefaultPaymentChannel).",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.channels.activateChannel(ctx.principal!, id),
  }),
  deactivatePaymentChannel: t.field({
    type: PaymentChannel,
    description: "Deactivates a channel; it also stops being the default.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.channels.deactivateChannel(ctx.principal!, id),
  }),
}));
