import { queryFromInfo } from "@pothos/plugin-prisma";
import { ownedNode } from "../../auth.ts";
import { ValidationError } from "../../errors.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType, pagedListFields } from "../../graphql/offset-page.ts";
import { DISPUTE_REASONS } from "../../providers/types.ts";
import { merchantEventsField, statusEventType } from "../events/schema.ts";
import { DISPUTE_STATUSES, MAX_DISPUTE_FILE_BYTES } from "./service.ts";
import type { DisputeSnapshot } from "./store.ts";

/** Disputes (chargebacks): thin resolvers over services.disputes (REST /v1/disputes runs these too). */

export const DisputeStatusEnum = builder.enumType("DisputeStatus", {
  description: "needs_response -> under_review -> won | lost; needs_response -> lost when accepted or left unanswered past its deadline.",
  values: DISPUTE_STATUSES,
});
const DisputeReasonEnum = builder.enumType("DisputeReason", { description: "Why the payer disputes, from the provider's category (general when unknown).", values: DISPUTE_REASONS });

interface StoredEvidence {
  customer_name: string | null;
  customer_email: string | null;
  customer_phone: string | null;
  service_details: string | null;
  delivery_address: string | null;
  delivery_date: string | null;
  uploaded_files: string[];
}

const DisputeEvidence = builder.objectRef<StoredEvidence>("DisputeEvidence").implement({
  description: "The merchant's answer: a draft until submitted.",
  fields: (t) => ({
    customerName: t.exposeString("customer_name", { nullable: true }),
    customerEmail: t.exposeString("customer_email", { nullable: true }),
    customerPhone: t.exposeString("customer_phone", { nullable: true }),
    serviceDetails: t.exposeString("service_details", { nullable: true }),
    deliveryAddress: t.exposeString("delivery_address", { nullable: true }),
    deliveryDate: t.exposeString("delivery_date", { nullable: true, description: "YYYY-MM-DD" }),
    uploadedFiles: t.exposeStringList("uploaded_files", { description: "The evidence files' ids (df_...)." }),
  }),
});

interface StoredMessage {
  sender: string;
  body: string;
  created_at: string | null;
}

const DisputeMessage = builder.objectRef<StoredMessage>("DisputeMessage").implement({
  description: "What the provider or the payer's bank wrote.",
  fields: (t) => ({
    sender: t.exposeString("sender"),
    body: t.exposeString("body"),
    createdAt: t.exposeString("created_at", { nullable: true, description: "ISO 8601, as the provider gave it." }),
  }),
});

interface DisputeFileView {
  reference: string;
  name: string;
  size: number;
  contentType: string;
  createdAt: Date;
}

const DisputeFile = builder.objectRef<DisputeFileView>("DisputeFile").implement({
  description: `One evidence file (PDF, PNG or JPEG, at most ${MAX_DISPUTE_FILE_BYTES / 1024 / 1024} MB).`,
  fields: (t) => ({
    id: t.exposeString("reference", { description: "df_..., named in the evidence's uploadedFiles." }),
    name: t.exposeString("name"),
    size: t.exposeInt("size", { description: "Bytes." }),
    contentType: t.exposeString("contentType"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const Dispute = builder.prismaNode("Dispute", {
  id: { field: "id" },
  description: "A payer's chargeback of a card payment. Its amount is held from the balance while it is open; won returns it, lost takes it.",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  fields: (t) => ({
    reference: t.exposeString("reference", { description: "dp_..., the id /v1/disputes shows." }),
    transactionReference: t.exposeString("transactionReference"),
    transaction: t.relation("transaction"),
    amount: t.expose("amount", { type: "BigInt", description: "What is held: the disputed amount, never more than the payment still has." }),
    currency: t.exposeString("currency"),
    reason: t.field({ type: DisputeReasonEnum, resolve: (d) => d.reason as (typeof DISPUTE_REASONS)[number] }),
    status: t.field({ type: DisputeStatusEnum, resolve: (d) => d.status as (typeof DISPUTE_STATUSES)[number] }),
    dueBy: t.expose("dueBy", { type: "DateTime", nullable: true, description: "The deadline for the merchant's answer; after it nothing can be submitted." }),
    evidence: t.field({ type: DisputeEvidence, nullable: true, resolve: (d) => d.evidence as StoredEvidence | null }),
    evidenceSubmittedAt: t.expose("evidenceSubmittedAt", { type: "DateTime", nullable: true }),
    messages: t.field({ type: [DisputeMessage], resolve: (d) => (Array.isArray(d.messages) ? (d.messages as unknown as StoredMessage[]) : []) }),
    files: t.field({ type: [DisputeFile], resolve: (d, _args, ctx) => ctx.services.disputes.filesOf(d.id) }),
    fee: t.expose("fee", { type: "BigInt", description: "What the provider charged on a loss." }),
    providerReference: t.exposeString("providerReference"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    closedAt: t.expose("closedAt", { type: "DateTime", nullable: true }),
  }),
});

builder.prismaObjectField("Transaction", "disputes", (t) =>
  t.relation("disputes", { description: "Its disputes (chargebacks), newest first.", query: { orderBy: [{ createdAt: "desc" }, { id: "desc" }] } }),
);

const DisputePage = offsetPageType("DisputePage", Dispute, { days: true });

const DisputeSnapshotType = builder.objectRef<DisputeSnapshot>("DisputeSnapshot").implement({
  description: "A dispute as it was when the event happened (its fields named as on Dispute; the webhook carries the /v1/disputes shape).",
  fields: (t) => ({
    reference: t.exposeString("id", { description: "dp_..." }),
    transactionReference: t.exposeString("transaction_reference"),
    amount: t.exposeInt("amount"),
    currency: t.exposeString("currency"),
    reason: t.field({ type: DisputeReasonEnum, resolve: (d) => d.reason as (typeof DISPUTE_REASONS)[number] }),
    status: t.field({ type: DisputeStatusEnum, resolve: (d) => d.status as (typeof DISPUTE_STATUSES)[number] }),
    dueBy: t.exposeString("due_by", { nullable: true }),
    evidenceSubmittedAt: t.exposeString("evidence_submitted_at", { nullable: true }),
    providerReference: t.exposeString("provider_reference"),
    createdAt: t.exposeString("created_at"),
    updatedAt: t.exposeString("updated_at"),
    closedAt: t.exposeString("closed_at", { nullable: true }),
  }),
});

const DisputeEvent = statusEventType("DisputeEvent", "A dispute's event: dispute.created, dispute.updated (evidence submitted, a reminder) or dispute.closed (won or lost).", "dispute", DisputeSnapshotType);

const SubmitDisputeEvidenceInput = builder.inputType("SubmitDisputeEvidenceInput", {
  fields: (t) => ({
    dispute: t.string({ required: true, description: "The dispute's id (dp_...)." }),
    customerName: t.string({ required: false }),
    customerEmail: t.string({ required: false }),
    customerPhone: t.string({ required: false }),
    serviceDetails: t.string({ required: false, description: "What was sold and how it was delivered; the bank reads this." }),
    deliveryAddress: t.string({ required: false }),
    deliveryDate: t.string({ required: false, description: "YYYY-MM-DD" }),
    uploadedFiles: t.stringList({ required: false, description: "Evidence files' ids (df_...), uploaded first." }),
    submit: t.boolean({ required: false, description: "true sends it to the provider (name, e-mail, phone and service details required); false (default) keeps a draft." }),
  }),
});

const UploadDisputeFileInput = builder.inputType("UploadDisputeFileInput", {
  fields: (t) => ({
    dispute: t.string({ required: true, description: "The dispute's id (dp_...)." }),
    fileName: t.string({ required: true }),
    contentBase64: t.string({ required: true, description: "The file's bytes in base64: a PDF, PNG or JPEG of at most 5 MB (REST takes multipart: POST /v1/disputes/{id}/files)." }),
  }),
});

builder.queryFields((t) => ({
  dispute: t.field({
    type: Dispute,
    description: "One of the merchant's disputes, by its id (dp_...).",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "dp_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.disputes.get(ctx.principal!, id) as never,
  }),
  ...pagedListFields(t, {
    days: true,
    name: "disputes",
    type: "Dispute",
    page: DisputePage,
    descriptions: {
      page: "Open disputes first, soonest deadline first, then closed ones newest first; by page, with totals (the shape of GET /v1/disputes).",
      connection: "Newest first, with Relay cursors and totalCount; the same filters as disputesPage.",
    },
    args: () => ({
      status: t.arg({ type: DisputeStatusEnum, required: false }),
      transaction: t.arg.string({ required: false, description: "The disputed transaction's reference or id." }),
      dateFrom: t.arg.string({ required: false, description: "Inclusive start date, YYYY-MM-DD: a day in timeZone (the merchant's by default)." }),
      dateTo: t.arg.string({ required: false, description: "Inclusive end date, YYYY-MM-DD: a day in timeZone (the merchant's by default)." }),
    }),
    source: (ctx) => ctx.services.disputes,
  }),
}));

builder.mutationFields((t) => ({
  submitDisputeEvidence: t.field({
    type: Dispute,
    description: "Saves the merchant's evidence as a draft, or (submit: true) sends it to the provider to contest the dispute: status under_review. Before the deadline only. Owners, and developers in test mode.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: SubmitDisputeEvidenceInput, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const { dispute, ...evidence } = input;
      return ctx.services.disputes.submitEvidence(ctx.principal!, dispute, evidence) as never;
    },
  }),
  acceptDispute: t.field({
    type: Dispute,
    description: "Accepts the loss: the provider refunds the payer and the held amount is taken (status lost). Before the deadline only.",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "dp_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.disputes.accept(ctx.principal!, id) as never,
  }),
  uploadDisputeFile: t.field({
    type: DisputeFile,
    description: "Stores one evidence file and hands it to the provider; name its id in submitDisputeEvidence's uploadedFiles.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: UploadDisputeFileInput, required: true }) },
    resolve: (_root, { input }, ctx) => {
      const base64 = input.contentBase64.replace(/\s+/g, "");
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64) || base64.length % 4 !== 0) throw new ValidationError("file", "must be the file's bytes in base64");
      return ctx.services.disputes.uploadFile(ctx.principal!, input.dispute, { name: input.fileName, bytes: Buffer.from(base64, "base64") }) as never;
    },
  }),
}));

builder.subscriptionFields((t) => ({
  disputeEvents: merchantEventsField(t, DisputeEvent, "Every event of the merchant's disputes in the key's mode.", (event) => event.disputeId != null),
}));
