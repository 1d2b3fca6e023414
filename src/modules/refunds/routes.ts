import { ValidationError } from "../../errors.ts";
import { body, envelope, oneOfStrings, schemas, str, int } from "../../openapi/schemas.ts";
import { bodyFields, intField, required, stringField } from "../../rest/params.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1RefundFragment } from "../../rest/gql/graphql.ts";
import { v1CreateRoute, v1GetRoute, v1ListRoute } from "../../rest/v1-objects.ts";
import { NULL_REFUND_AMOUNT, refundReasons } from "./service.ts";

/** /v1/refunds over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
const V1Refund = graphql(`
  fragment V1Refund on Refund {
    databaseId reference transactionReference amount currency status method reason merchantNote customerNote providerReference
    failureCode failureReason createdAt updatedAt completedAt
  }
`);

export const toV1Refund = (r: V1RefundFragment) => ({
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

const optional = <K extends string, V>(key: K, value: V | undefined) => (value === undefined ? {} : ({ [key]: value } as Record<K, V>));

/** A positive amount in minor units when given (null is not "all"); GraphQL's BigInt would refuse a fraction less clearly. */
function amountField(body: Record<string, unknown>): number | undefined {
  if (body.amount === null) throw new ValidationError("amount", NULL_REFUND_AMOUNT);
  if (typeof body.amount === "number" && !Number.isInteger(body.amount)) {
    throw new ValidationError("amount", "must be an integer in the currency's minor unit (e.g. 1000 for KES 10.00)");
  }
  const amount = intField(body, "amount");
  if (amount !== undefined && amount < 1) throw new ValidationError("amount", "must be a positive integer (minor units)");
  return amount;
}

const refundObject = { path: "/v1/refunds", tag: "Refunds", one: "Refund", many: "Refunds", fragment: V1Refund, schema: schemas.refund, toV1: toV1Refund };

export const refundRoutes = [
  v1CreateRoute({
    ...refundObject,
    summary: "Refund a completed transaction, in full or in part; never more than was paid",
    body: body(
      {
        transaction: { description: "The transaction's reference, or its numeric id", oneOf: [{ type: "string" }, { type: "integer" }] },
        amount: int("Minor units; leave it out for all that is still refundable (null is refused)", { minimum: 1 }),
        reason: oneOfStrings([...refundReasons]),
        merchant_note: str("At most 255 characters"),
        customer_note: str("At most 255 characters"),
      },
      ["transaction"],
    ),
    input: (body) => ({
      transaction: required(transactionField(body), "transaction"),
      // Left out, not undefined: the compiled operation would pass an undefined field on as null, which is refused.
      ...optional("amount", amountField(body)),
      reason: reasonField(body),
      ...bodyFields(body, { merchantNote: "merchant_note", customerNote: "customer_note" }),
    }),
  }),
  v1ListRoute({
    ...refundObject,
    summary: "The merchant's refunds, newest first, by page",
    filters: { transaction: "The refunded transaction's reference or id" },
  }),
  v1GetRoute({ ...refundObject, summary: "One refund, by its id or reference" }),
];
