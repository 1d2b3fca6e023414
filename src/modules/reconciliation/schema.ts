import { queryFromInfo } from "@pothos/plugin-prisma";
import { ownedNode } from "../../auth.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { itemKinds } from "./service.ts";

/** Reconciliation reports: thin resolvers over services.reconciliations (REST /v1/reconciliations runs these too). */

const ReconciliationItemKindEnum = builder.enumType("ReconciliationItemKind", {
  description: "What differs between the gateway's record and the provider's.",
  values: {
    missing_here: { description: "The provider has a completed payment the gateway has no record of (on this channel and day)." },
    missing_there: { description: "The gateway has a completed payment the provider has no record of." },
    status_mismatch: { description: "Both have it, with different statuses (a payment pending here that the provider settled is settled through verify: see resolution)." },
    amount_mismatch: { description: "Both have it, settled alike, for different amounts or currencies." },
    reversed_not_disputed: {
      description:
        "The provider reversed the payment (a chargeback lost or accepted there, or a refund in full) while the gateway shows it completed, with no dispute lost here and not refunded in full: the balance still counts the money.",
    },
  } satisfies Record<(typeof itemKinds)[number], { description: string }>,
});

const ReconciliationItem = builder.prismaObject("ReconciliationItem", {
  description: "One difference a reconciliation found.",
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    kind: t.field({ type: ReconciliationItemKindEnum, resolve: (item) => item.kind as (typeof itemKinds)[number] }),
    reference: t.exposeString("reference", { nullable: true, description: "The gateway's reference, when it has the payment (or the provider keeps it)." }),
    providerReference: t.exposeString("providerReference", { nullable: true, description: "The provider's id of the payment." }),
    gatewayStatus: t.exposeString("gatewayStatus", { nullable: true, description: "pending, completed or failed; null when the gateway has no record. For a settled item, the status before settling (pending)." }),
    providerStatus: t.exposeString("providerStatus", { nullable: true, description: "pending, completed, failed or reversed as the provider reports it; null when it has no record." }),
    gatewayAmount: t.expose("gatewayAmount", { type: "BigInt", nullable: true, description: "Minor units." }),
    providerAmount: t.expose("providerAmount", { type: "BigInt", nullable: true, description: "Minor units." }),
    currency: t.exposeString("currency", { nullable: true }),
    resolution: t.exposeString("resolution", {
      nullable: true,
      description: "What was done: settled_via_verify (asked the provider and recorded its answer through the usual path, webhooks included), verify_did_not_settle, or null (left for a person to look at).",
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const Reconciliation = builder.prismaNode("Reconciliation", {
  id: { field: "id" },
  description: "A comparison of one payment channel's payments of one UTC day with the provider's own record.",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    paymentChannelId: t.exposeInt("channelId"),
    date: t.exposeString("date", { description: "The day compared, YYYY-MM-DD (UTC)." }),
    status: t.exposeString("status", { description: "running, completed (differences or not) or failed (the provider could not be read: see error)." }),
    summary: t.expose("summary", {
      type: "JSON",
      description:
        "Counts and totals on each side: {provider, gateway: {count, by_status, completed_totals: {CUR: minor units}}, provider_record (same shape; null when the provider lists nothing, M-Pesa), " +
        "items: {missing_here, missing_there, status_mismatch, amount_mismatch, reversed_not_disputed}, differences, settled_via_verify, settlements: {count, statuses, totals: {CUR: {total, fees, settled}}} (Paystack) or null, " +
        "balance (M-Pesa): {state: requested|received|failed|unavailable, ledger: [{currency, available, pending_out}], accounts: [{account, currency, current, available, reserved, uncleared}] once received}.",
    }),
    error: t.exposeString("error", { nullable: true }),
    items: t.relation("items", { description: "Every difference, oldest first.", query: { orderBy: { id: "asc" } } }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    completedAt: t.expose("completedAt", { type: "DateTime", nullable: true }),
  }),
});

void ReconciliationItem;

const ReconciliationPage = offsetPageType("ReconciliationPage", Reconciliation);

const RunReconciliationInput = builder.inputType("RunReconciliationInput", {
  fields: (t) => ({
    paymentChannelId: t.int({ required: true }),
    date: t.string({ required: true, description: "YYYY-MM-DD (UTC), today or earlier." }),
  }),
});

builder.queryFields((t) => ({
  reconciliation: t.field({
    type: Reconciliation,
    description: "One of the merchant's reconciliation reports, with its items.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true, description: "The report's databaseId." }) },
    resolve: (_root, { id }, ctx, info) => ctx.services.reconciliations.get(ctx.principal!, id, queryFromInfo({ context: ctx, info, typeName: "Reconciliation" }) as object) as never,
  }),
  ...pagedListFields(t, {
    name: "reconciliations",
    type: "Reconciliation",
    page: ReconciliationPage,
    descriptions: {
      page: "Newest first, by page number, with totals (the shape of GET /v1/reconciliations).",
      connection:
        "The merchant's reconciliation reports in the key's mode, newest first, with Relay cursors and totalCount; one per channel and day from the daily job, more when run again.",
    },
    args: () => ({ paymentChannelId: t.arg.int({ required: false }) }),
    source: (ctx) => ctx.services.reconciliations,
    filters: (args: { paymentChannelId?: number | null }) => ({ channelId: args.paymentChannelId }),
  }),
}));

builder.mutationField("runReconciliation", (t) =>
  t.field({
    type: Reconciliation,
    description: "Reconciles one of the merchant's channels for one day now (a new report each time); answers the report, completed or failed. Owners only.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: RunReconciliationInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.reconciliations.runForMerchant(ctx.principal!, input) as never,
  }),
);
