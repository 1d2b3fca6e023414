import { queryFromInfo } from "@pothos/plugin-prisma";
import { ownedNode } from "../../auth.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { ValidationError } from "../../errors.ts";
import { MSISDN_INPUT_DESCRIPTION, toMsisdn } from "../../phone.ts";
import { merchantEventsField, statusEventType, settlingChange } from "../events/schema.ts";
import { statusDateArgs, TransactionStatusEnum } from "../transactions/schema.ts";
import { payoutCommands, type PayoutSnapshot } from "./service.ts";

/** Payouts: thin resolvers over services.payouts (REST /v1/payouts runs these too). */

const PayoutCommandEnum = builder.enumType("PayoutCommand", {
  description: "M-Pesa's B2C CommandID.",
  values: payoutCommands,
});

export const Payout = builder.prismaNode("Payout", {
  id: { field: "id" },
  description: "Money sent to a phone. Never sent twice: an unknown outcome is settled by asking the provider.",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    reference: t.exposeString("reference", { description: "Assigned by the gateway (po_...)." }),
    clientReference: t.exposeString("clientReference", { nullable: true }),
    amount: t.expose("amount", { type: "BigInt", description: "In the currency's minor unit." }),
    currency: t.exposeString("currency"),
    phoneNumber: t.string({ description: "254XXXXXXXXX", resolve: (p) => toMsisdn(p.phoneNumber) }),
    status: t.expose("status", { type: TransactionStatusEnum }),
    commandId: t.exposeString("commandId"),
    description: t.exposeString("description", { nullable: true }),
    paymentChannelId: t.exposeInt("channelId"),
    providerReference: t.exposeString("providerReference", { nullable: true, description: "The M-Pesa receipt once paid." }),
    failureCode: t.exposeString("failureCode", { nullable: true, description: "The provider's result code, e.g. 2040." }),
    failureReason: t.exposeString("failureReason", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    completedAt: t.expose("completedAt", { type: "DateTime", nullable: true }),
  }),
});

const PayoutPage = offsetPageType("PayoutPage", Payout, { days: true });

/** The payout as of the event, from its snapshot (no follow-up query). */
const PayoutSnapshotType = builder.objectRef<PayoutSnapshot>("PayoutSnapshot").implement({
  description: "A payout as it was when the event happened (the /v1/payouts shape).",
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    reference: t.exposeString("reference"),
    clientReference: t.exposeString("client_reference", { nullable: true }),
    amount: t.exposeInt("amount"),
    currency: t.exposeString("currency"),
    phoneNumber: t.exposeString("phone_number"),
    status: t.field({ type: TransactionStatusEnum, resolve: (p) => p.status }),
    providerReference: t.exposeString("provider_reference", { nullable: true }),
    failureCode: t.exposeString("failure_code", { nullable: true }),
    failureReason: t.exposeString("failure_reason", { nullable: true }),
    createdAt: t.exposeString("created_at"),
    completedAt: t.exposeString("completed_at", { nullable: true }),
  }),
});

const PayoutEvent = statusEventType("PayoutEvent", "A payout's status change: payout.completed or payout.failed.", "payout", PayoutSnapshotType);

const CreatePayoutInput = builder.inputType("CreatePayoutInput", {
  fields: (t) => ({
    amount: t.field({ type: "BigInt", required: true, description: "Minor units; M-Pesa: whole shillings, KES 10 to 250,000." }),
    phoneNumber: t.string({ required: true, description: MSISDN_INPUT_DESCRIPTION }),
    currency: t.string({ required: false, description: "Default: the merchant's currency." }),
    paymentChannelId: t.int({ required: false, description: "Default: the default channel if it can pay out, else the newest one that can." }),
    reference: t.string({ required: false, description: "The merchant's own reference." }),
    description: t.string({ required: false, description: "Sent as the payout's remarks." }),
    commandId: t.field({ type: PayoutCommandEnum, required: false, description: "Default BusinessPayment." }),
  }),
});

builder.queryFields((t) => {
  return {
    payout: t.field({
      type: Payout,
      description: "One of the merchant's payouts, by databaseId or reference.",
      errors: { types: businessErrors },
      args: { id: t.arg.int({ required: false }), reference: t.arg.string({ required: false }) },
      resolve: (_root, { id, reference }, ctx, info) => {
        const key = id != null ? String(id) : reference;
        if (!key) throw new ValidationError("id", "give id or reference");
        return ctx.services.payouts.getPayout(ctx.principal!, key, queryFromInfo({ context: ctx, info, typeName: "Payout" }) as object) as never;
      },
    }),
    ...pagedListFields(t, {
      days: true,
      name: "payouts",
      type: "Payout",
      page: PayoutPage,
      descriptions: {
        page: "Newest first, by page number, with totals (the shape of GET /v1/payouts).",
        connection: "Newest first, with Relay cursors and totalCount.",
      },
      args: () => statusDateArgs(t),
      source: (ctx) => ctx.services.payouts,
    }),
  };
});

builder.mutationField("createPayout", (t) =>
  t.field({
    type: Payout,
    description: "Sends money to a phone. Answers pending; payout.completed or payout.failed follows. Owners only.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreatePayoutInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.payouts.createPayout(ctx.principal!, input) as never,
  }),
);

builder.subscriptionFields((t) => ({
  payoutEvents: merchantEventsField(t, PayoutEvent, "Every status change of the merchant's payouts in the key's mode.", (event) => event.payoutId !== null),
  payoutStatusChanged: t.field({
    type: PayoutEvent,
    description: "One payout's settling change; a payout already settled delivers its last change at once.",
    args: { reference: t.arg.string({ required: true }) },
    subscribe: (_root, { reference }, ctx) =>
      settlingChange(ctx, async () => {
        const payout = await ctx.services.payouts.getPayout(ctx.principal!, reference);
        return {
          settled: payout.status !== "pending",
          lastEvent: () => ctx.services.payouts.lastEvent(payout.id),
          isSettling: (event) => event.payoutId === payout.id,
        };
      }),
    resolve: (event) => event,
  }),
}));
