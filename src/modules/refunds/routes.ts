import { ValidationError } from "../../errors.ts";
import { body, envelope, list, oneOfStrings, pageQuery, schemas, str, int } from "../../openapi/schemas.ts";
import { intField, pageVariables, required, stringField } from "../../rest/params.ts";
import { defineRoute } from "../../rest/route-table.ts";
import { refundReasons } from "./service.ts";

/** /v1/refunds over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
interface RefundData {
  databaseId: number;
  reference: string;
  transactionReference: string;
  amount: number;
  currency: string;
  status: string;
  method: string;
  reason: string | null;
  merchantNote: string | null;
  customerNote: string | null;
  providerReference: string | null;
  failureCode: string | null;
  failureReason: string | null;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
}

const refundFields =
  "databaseId reference transactionReference amount currency status method reason merchantNote customerNote providerReference failureCode failureReason createdAt updatedAt completedAt";

export const toV1Refund = (r: RefundData) => ({
  id: r.databaseId,
  reference: r.reference,
  transaction_reference: r.transactionReference,
  amount: r.amount,
  currency: r.currency,
  status: r.status,
  method: r.method,
  reason: r.reason,
  merchant_note: r.merchantNote,
  customer_note: r.customerNote,
  provider_reference: r.providerReference,
  failure_code: r.failureCode,
  failure_reason: r.failureReason,
  created_at: r.createdAt,
  updated_at: r.updatedAt,
  completed_at: r.completedAt,
});

/** `transaction` is the reference (a string) or the numeric id: either way GraphQL takes it as text. */
function transactionField(body: Record<string, unknown>): string {
  const value = body.transaction;
  if (typeof value === "number" && Number.isSafeInteger(value) && value > 0) return String(value);
  if (typeof value === "string" && value.trim() !== "") return value;
  if (value === undefined || value === null) throw new ValidationError("transaction", "is required: the transaction's reference or id");
  throw new ValidationError("transaction", "must be the transaction's reference (a string) or its id (a positive integer)");
}

/** Checked here so the 400 names the REST field (GraphQL would report the enum variable). */
function reasonField(body: Record<string, unknown>): string | undefined {
  const value = stringField(body, "reason");
  if (value !== undefined && !(refundReasons as readonly string[]).includes(value)) throw new ValidationError("reason", `must be one of ${refundReasons.join(", ")}`);
  return value;
}

/** A positive amount in minor units when given; GraphQL's BigInt would refuse a fraction less clearly. */
function amountField(body: Record<string, unknown>): number | undefined {
  if (typeof body.amount === "number" && !Number.isInteger(body.amount)) {
    throw new ValidationError("amount", "must be an integer in the currency's minor unit (e.g. 1000 for KES 10.00)");
  }
  const amount = intField(body, "amount");
  if (amount !== undefined && amount < 1) throw new ValidationError("amount", "must be a positive integer (minor units)");
  return amount;
}

export const refundRoutes = [
  defineRoute<{ createRefund: RefundData }>({
    method: "POST",
    path: "/v1/refunds",
    doc: {
      operationId: "createRefund",
      summary: "Refund a completed transaction, in full or in part; never more than was paid",
      tag: "Refunds",
      body: body(
        {
          transaction: { description: "The transaction's reference, or its numeric id", oneOf: [{ type: "string" }, { type: "integer" }] },
          amount: int("Minor units; default: all that is still refundable", { minimum: 1 }),
          reason: oneOfStrings([...refundReasons]),
          merchant_note: str("At most 255 characters"),
          customer_note: str("At most 255 characters"),
        },
        ["transaction"],
      ),
      status: 201,
      response: envelope({ data: schemas.refund }),
      errors: [404, 409, 422, 502],
    },
    operation: `mutation V1CreateRefund($input: CreateRefundInput!) {
      createRefund(input: $input) {
        __typename
        ... on Error { code message }
        ... on Refund { ${refundFields} }
      }
    }`,
    variables: ({ body }) => ({
      input: {
        transaction: required(transactionField(body), "transaction"),
        amount: amountField(body),
        reason: reasonField(body),
        merchantNote: stringField(body, "merchant_note"),
        customerNote: stringField(body, "customer_note"),
      },
    }),
    respond: ({ createRefund }) => ({ statusCode: 201, body: { status: "success", data: toV1Refund(createRefund) } }),
  }),
  /** The paged list in the same envelope as /api/transactions/list: data, total, page, limit, pages. */
  defineRoute<{ refundsPage: { items: RefundData[]; total: number; page: number; limit: number; pages: number } }>({
    method: "GET",
    path: "/v1/refunds",
    doc: {
      operationId: "listRefunds",
      summary: "The merchant's refunds, newest first, by page",
      tag: "Refunds",
      query: { ...pageQuery, transaction: { description: "The refunded transaction's reference or id", schema: str() } },
      response: envelope({ data: list(schemas.refund), ...schemas.page }),
    },
    operation: `query V1ListRefunds($page: Int, $limit: Int, $status: TransactionStatus, $dateFrom: String, $dateTo: String, $transaction: String) {
      refundsPage(page: $page, limit: $limit, status: $status, dateFrom: $dateFrom, dateTo: $dateTo, transaction: $transaction) {
        __typename
        ... on Error { code message }
        ... on RefundPage { total page limit pages items { ${refundFields} } }
      }
    }`,
    variables: ({ query }) => ({ ...pageVariables(query), transaction: typeof query.transaction === "string" ? query.transaction : undefined }),
    respond: ({ refundsPage: p }) => ({
      body: { status: "success", data: p.items.map(toV1Refund), total: p.total, page: p.page, limit: p.limit, pages: p.pages },
    }),
  }),
  defineRoute<{ refund: RefundData }>({
    method: "GET",
    path: "/v1/refunds/:id",
    doc: {
      operationId: "getRefund",
      summary: "One refund, by its id or reference",
      tag: "Refunds",
      response: envelope({ data: schemas.refund }),
      errors: [404, 414],
    },
    operation: `query V1Refund($reference: String!) {
      refund(reference: $reference) {
        __typename
        ... on Error { code message }
        ... on Refund { ${refundFields} }
      }
    }`,
    variables: ({ params }) => ({ reference: params.id }),
    respond: ({ refund }) => ({ body: { status: "success", data: toV1Refund(refund) } }),
  }),
];
