import { queryFromInfo } from "@pothos/plugin-prisma";
import { ownedNode } from "../../auth.ts";
import { ValidationError } from "../../errors.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { merchantEventsField, statusEventType } from "../events/schema.ts";
import { statusDateArgs, TransactionStatusEnum } from "../transactions/schema.ts";
import { refundReasons } from "./service.ts";
import type { RefundSnapshot } from "./store.ts";

/** Refunds: thin resolvers over services.refunds (REST /v1/refunds runs these too). */

const RefundReasonEnum = builder.enumType("RefundReason", { values: refundReasons });

export const Refund = builder.prismaNode("Refund", {
  id: { field: "id" },
  description: "Money sent back to the payer of a completed transaction, in full or in part. Never more than was paid.",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    reference: t.exposeString("reference", { description: "Assigned by the gateway (re_...)." }),
    transactionReference: t.exposeString("transactionReference", { description: "The refunded transaction's reference." }),
    amount: t.expose("amount", { type: "BigInt", description: "In the currency's minor unit." }),
    currency: t.exposeString("currency"),
    status: t.expose("status", { type: TransactionStatusEnum }),
    method: t.exposeString("method", { description: "The rail: sandbox, paystack_refund, mpesa_reversal or mpesa_b2c." }),
    reason: t.exposeString("reason", { nullable: true }),
    merchantNote: t.exposeString("merchantNote", { nullable: true }),
    customerNote: t.exposeString("customerNote", { nullable: true }),
    providerReference: t.exposeString("providerReference", { nullable: true, description: "The provider's id of the refund." }),
    failureCode: t.exposeString("failureCode", { nullable: true }),
    failureReason: t.exposeString("failureReason", { nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    completedAt: t.expose("completedAt", { type: "DateTime", nullable: true }),
  }),
});

const RefundPage = offsetPageType("RefundPage", Refund, { days: true });

const RefundSnapshotType = builder.objectRef<RefundSnapshot>("RefundSnapshot").implement({
  description: "A refund as it was when the event happened (the /v1/refunds shape).",
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    reference: t.exposeString("reference"),
    transactionReference: t.exposeString("transaction_reference"),
    amount: t.exposeInt("amount"),
    currency: t.exposeString("currency"),
    status: t.field({ type: TransactionStatusEnum, resolve: (r) => r.status }),
    method: t.exposeString("method"),
    providerReference: t.exposeString("provider_reference", { nullable: true }),
    failureCode: t.exposeString("failure_code", { nullable: true }),
    failureReason: t.exposeString("failure_reason", { nullable: true }),
    createdAt: t.exposeString("created_at"),
    completedAt: t.exposeString("completed_at", { nullable: true }),
  }),
});

const RefundEvent = statusEventType("RefundEvent", "A refund's status change: refund.completed or refund.failed.", "refund", RefundSnapshotType);

const CreateRefundInput = builder.inputType("CreateRefundInput", {
  fields: (t) => ({
    transaction: t.string({ required: true, description: "The transaction's reference, or its numeric id." }),
    amount: t.field({ type: "BigInt", required: false, description: "Minor units; leave it out for all that is still refundable (null is refused)." }),
    reason: t.field({ type: RefundReasonEnum, required: false }),
    merchantNote: t.string({ required: false, description: "At most 255 characters." }),
    customerNote: t.string({ required: false, description: "At most 255 characters; shown to the payer where the rail allows." }),
  }),
});

const refundFilterArgs = (t: Parameters<Parameters<typeof builder.queryFields>[0]>[0]) => ({
  ...statusDateArgs(t),
  transaction: t.arg.string({ required: false, description: "The refunded transaction's reference or id." }),
});

builder.queryFields((t) => ({
  refund: t.field({
    type: Refund,
    description: "One of the merchant's refunds, by databaseId or reference.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: false }), reference: t.arg.string({ required: false }) },
    resolve: (_root, { id, reference }, ctx, info) => {
      const key = id != null ? String(id) : reference;
      if (!key) throw new ValidationError("id", "give id or reference");
      return ctx.services.refunds.getRefund(ctx.principal!, key, queryFromInfo({ context: ctx, info, typeName: "Refund" }) as object) as never;
    },
  }),
  ...pagedListFields(t, {
    days: true,
    name: "refunds",
    type: "Refund",
    page: RefundPage,
    descriptions: {
      page: "Newest first, by page number, with totals (the shape of GET /v1/refunds).",
      connection: "Newest first, with Relay cursors and totalCount; the same filters as refundsPage.",
    },
    args: () => refundFilterArgs(t),
    source: (ctx) => ctx.services.refunds,
  }),
}));

builder.mutationField("createRefund", (t) =>
  t.field({
    type: Refund,
    description: "Refunds a completed transaction, in full or in part. Answers pending; refund.completed or refund.failed follows. Owners, and developers in test mode.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateRefundInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.refunds.createRefund(ctx.principal!, input) as never,
  }),
);

builder.subscriptionFields((t) => ({
  refundEvents: merchantEventsField(t, RefundEvent, "Every status change of the merchant's refunds in the key's mode.", (event) => event.refundId != null),
}));
