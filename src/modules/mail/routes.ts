import { envelope, int, nullable, obj, str } from "../../openapi/schemas.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1MailMessageFragment } from "../../rest/gql/graphql.ts";
import { defineRoute } from "../../rest/route-table.ts";

/** /v1 e-mail routes over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
graphql(`fragment V1MailMessage on MailMessage { databaseId kind status toAddress language subject attempts lastError createdAt sentAt }`);

const toV1Message = (m: V1MailMessageFragment) => ({
  id: m.databaseId,
  kind: m.kind,
  status: m.status,
  to: m.toAddress,
  language: m.language,
  subject: m.subject,
  attempts: m.attempts,
  last_error: m.lastError,
  created_at: m.createdAt,
  sent_at: m.sentAt,
});

const messageSchema = obj({
  id: int(),
  kind: str("payment_receipt"),
  status: str("queued, sent, kept (test inbox), skipped or failed"),
  to: nullable(str()),
  language: nullable(str()),
  subject: nullable(str()),
  attempts: int(),
  last_error: nullable(str()),
  created_at: str(),
  sent_at: nullable(str()),
});

export const mailRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/transactions/:reference/receipt",
    doc: {
      operationId: "resendReceipt",
      summary: "E-mail a completed payment's receipt to its payer again (owner keys and owners; at most 3 times an hour per payment)",
      tag: "Transactions",
      status: 202,
      response: envelope({ data: messageSchema }),
      errors: [400, 403, 404, 409, 429],
    },
    operation: graphql(`
      mutation V1ResendReceipt($reference: String!) {
        resendReceipt(reference: $reference) { __typename ... on Error { code message } ... on MailMessage { ...V1MailMessage } }
      }
    `),
    variables: ({ params }) => ({ reference: params.reference }),
    respond: (data) => ({ statusCode: 202, body: { status: "success", data: toV1Message(data.resendReceipt) } }),
  }),
];
