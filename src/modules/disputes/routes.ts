import { body, dateTime, envelope, int, list, nullable, obj, oneOfStrings, schemas, str, v1PageQuery } from "../../openapi/schemas.ts";
import { ValidationError } from "../../errors.ts";
import { boolField, intParam, stringField, stringListField, stringParam } from "../../rest/params.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1DisputeFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { DISPUTE_REASONS } from "../../providers/types.ts";
import { DISPUTE_STATUSES, MAX_DISPUTE_FILE_BYTES } from "./service.ts";

/** /v1/disputes over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
graphql(`
  fragment V1Dispute on Dispute {
    reference transactionReference amount currency reason status dueBy evidenceSubmittedAt providerReference fee createdAt updatedAt closedAt
    evidence { customerName customerEmail customerPhone serviceDetails deliveryAddress deliveryDate uploadedFiles }
    messages { sender body createdAt }
    files { id name size contentType createdAt }
  }
`);

export const toV1Dispute = (d: V1DisputeFragment) => ({
  id: d.reference,
  transaction_reference: d.transactionReference,
  amount: d.amount,
  currency: d.currency,
  reason: d.reason,
  status: d.status,
  due_by: d.dueBy,
  evidence: d.evidence
    ? {
        customer_name: d.evidence.customerName,
        customer_email: d.evidence.customerEmail,
        customer_phone: d.evidence.customerPhone,
        service_details: d.evidence.serviceDetails,
        delivery_address: d.evidence.deliveryAddress,
        delivery_date: d.evidence.deliveryDate,
        uploaded_files: d.evidence.uploadedFiles,
      }
    : null,
  evidence_submitted_at: d.evidenceSubmittedAt,
  messages: d.messages.map((m) => ({ sender: m.sender, body: m.body, created_at: m.createdAt })),
  files: d.files.map(toV1File),
  fee: d.fee,
  provider_reference: d.providerReference,
  created_at: d.createdAt,
  updated_at: d.updatedAt,
  closed_at: d.closedAt,
});

const toV1File = (f: { id: string; name: string; size: number; contentType: string }) => ({ id: f.id, name: f.name, size: f.size, content_type: f.contentType });

const text = nullable(str());
const fileSchema = obj({ id: str("df_..."), name: str(), size: int("Bytes"), content_type: oneOfStrings(["application/pdf", "image/png", "image/jpeg"]) });
const disputeSchema = obj({
  id: str("dp_..."),
  transaction_reference: str(),
  amount: int("What is held, minor units: the disputed amount, never more than the payment still has", { minimum: 0 }),
  currency: str(),
  reason: oneOfStrings([...DISPUTE_REASONS]),
  status: oneOfStrings([...DISPUTE_STATUSES], "needs_response -> under_review -> won | lost; needs_response -> lost (accepted, or unanswered by due_by)"),
  due_by: nullable(dateTime("The deadline for an answer")),
  evidence: nullable(
    obj({
      customer_name: text,
      customer_email: text,
      customer_phone: text,
      service_details: text,
      delivery_address: text,
      delivery_date: nullable(str("YYYY-MM-DD")),
      uploaded_files: list(str("df_...")),
    }),
  ),
  evidence_submitted_at: nullable(dateTime()),
  messages: list(obj({ sender: str(), body: str(), created_at: nullable(str()) })),
  files: list(fileSchema),
  fee: int("What the provider charged on a loss, minor units", { minimum: 0 }),
  provider_reference: str(),
  created_at: dateTime(),
  updated_at: dateTime(),
  closed_at: nullable(dateTime()),
});

/** Checked here so the 400 names the REST parameter (GraphQL would report the enum variable). */
function statusParam(query: Record<string, unknown>): string | undefined {
  const status = stringParam(query, "status");
  if (status !== undefined && !(DISPUTE_STATUSES as readonly string[]).includes(status)) throw new ValidationError("status", `must be one of ${DISPUTE_STATUSES.join(", ")}`);
  return status;
}


export const disputeRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/disputes",
    doc: {
      operationId: "listDisputes",
      summary: "The merchant's disputes (chargebacks): open ones first by deadline, then closed ones newest first",
      tag: "Disputes",
      query: {
        ...v1PageQuery,
        status: { description: DISPUTE_STATUSES.join(", "), schema: oneOfStrings([...DISPUTE_STATUSES]) },
        transaction: { description: "The disputed transaction's reference or id", schema: str() },
      },
      response: envelope({ data: list(disputeSchema), ...schemas.v1Page }),
    },
    operation: graphql(`
      query V1ListDisputes($page: Int, $limit: Int, $status: DisputeStatus, $transaction: String, $dateFrom: String, $dateTo: String) {
        disputesPage(page: $page, limit: $limit, status: $status, transaction: $transaction, dateFrom: $dateFrom, dateTo: $dateTo) {
          __typename
          ... on Error { code message }
          ... on DisputePage { total page limit pages timezone items { ...V1Dispute } }
        }
      }
    `),
    variables: ({ query }) => ({
      page: intParam(query, "page"),
      limit: intParam(query, "limit"),
      status: statusParam(query),
      transaction: stringParam(query, "transaction"),
      dateFrom: stringParam(query, "date_from"),
      dateTo: stringParam(query, "date_to"),
    }),
    respond: (data) => pageBody(data.disputesPage, toV1Dispute, { timezone: data.disputesPage.timezone }),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/disputes/:id",
    doc: { operationId: "getDispute", summary: "One dispute, by its id (dp_...)", tag: "Disputes", response: envelope({ data: disputeSchema }), errors: [404, 414] },
    operation: graphql(`
      query V1Dispute($id: String!) { dispute(id: $id) { __typename ... on Error { code message } ... on Dispute { ...V1Dispute } } }
    `),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => ({ body: { status: "success", data: toV1Dispute(data.dispute) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/disputes/:id/evidence",
    doc: {
      operationId: "submitDisputeEvidence",
      summary: "Save the evidence as a draft (submit: false), or send it to contest the dispute (submit: true): status under_review",
      description: "Submitting needs customer_name, customer_email, customer_phone and service_details. After due_by nothing can be submitted (409 dispute_closed).",
      tag: "Disputes",
      body: body(
        {
          customer_name: str(),
          customer_email: str(),
          customer_phone: str(),
          service_details: str("What was sold and how it was delivered"),
          delivery_address: str(),
          delivery_date: str("YYYY-MM-DD", { format: "date" }),
          uploaded_files: list(str("df_..., from POST /v1/disputes/{id}/files")),
          submit: { type: "boolean", description: "true sends it to the provider; false (default) keeps a draft" },
        },
        [],
      ),
      response: envelope({ data: disputeSchema }),
      errors: [404, 409, 502],
    },
    operation: graphql(`
      mutation V1SubmitDisputeEvidence($input: SubmitDisputeEvidenceInput!) {
        submitDisputeEvidence(input: $input) { __typename ... on Error { code message } ... on Dispute { ...V1Dispute } }
      }
    `),
    variables: ({ params, body }) => ({
      input: {
        dispute: params.id,
        customerName: stringField(body, "customer_name"),
        customerEmail: stringField(body, "customer_email"),
        customerPhone: stringField(body, "customer_phone"),
        serviceDetails: stringField(body, "service_details"),
        deliveryAddress: stringField(body, "delivery_address"),
        deliveryDate: stringField(body, "delivery_date"),
        uploadedFiles: stringListField(body, "uploaded_files"),
        submit: boolField(body, "submit"),
      },
    }),
    respond: (data) => ({ body: { status: "success", data: toV1Dispute(data.submitDisputeEvidence) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/disputes/:id/accept",
    doc: {
      operationId: "acceptDispute",
      summary: "Accept the loss: the provider refunds the payer and the held amount is taken (status lost)",
      tag: "Disputes",
      response: envelope({ data: disputeSchema }),
      errors: [404, 409, 502],
    },
    operation: graphql(`
      mutation V1AcceptDispute($id: String!) { acceptDispute(id: $id) { __typename ... on Error { code message } ... on Dispute { ...V1Dispute } } }
    `),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => ({ body: { status: "success", data: toV1Dispute(data.acceptDispute) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/disputes/:id/files",
    upload: { field: "file", maxBytes: MAX_DISPUTE_FILE_BYTES },
    doc: {
      operationId: "uploadDisputeFile",
      summary: "Upload one evidence file (PDF, PNG or JPEG by its content, at most 5 MB), then name its id in the evidence's uploaded_files",
      tag: "Disputes",
      bodyContentType: "multipart/form-data",
      body: body({ file: str("The file", { format: "binary" }) }, ["file"]),
      status: 201,
      response: envelope({ data: fileSchema }),
      errors: [404, 409, 502],
    },
    operation: graphql(`
      mutation V1UploadDisputeFile($input: UploadDisputeFileInput!) {
        uploadDisputeFile(input: $input) { __typename ... on Error { code message } ... on DisputeFile { id name size contentType } }
      }
    `),
    variables: ({ params, file }) => ({ input: { dispute: params.id, fileName: file!.name, contentBase64: file!.bytes.toString("base64") } }),
    respond: (data) => ({ statusCode: 201, body: { status: "success", data: toV1File(data.uploadDisputeFile) } }),
  }),
];
