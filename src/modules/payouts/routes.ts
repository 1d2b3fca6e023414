import { ValidationError } from "../../errors.ts";
import { bodyFields, intField, required, stringField } from "../../rest/params.ts";
import { payoutCommands } from "./service.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1PayoutFragment } from "../../rest/gql/graphql.ts";
import { v1CreateRoute, v1GetRoute, v1ListRoute } from "../../rest/v1-objects.ts";
import { body, envelope, int, oneOfStrings, schemas, str } from "../../openapi/schemas.ts";
import { MSISDN_INPUT_DESCRIPTION } from "../../phone.ts";

/** /v1/payouts over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
const V1Payout = graphql(`
  fragment V1Payout on Payout {
    databaseId reference clientReference amount currency phoneNumber status paymentChannelId providerReference failureCode failureReason
    createdAt updatedAt completedAt
  }
`);

const toV1Payout = (p: V1PayoutFragment) => ({
  id: p.databaseId,
  reference: p.reference,
  client_reference: p.clientReference,
  amount: p.amount,
  currency: p.currency,
  phone_number: p.phoneNumber,
  status: p.status,
  payment_channel_id: p.paymentChannelId,
  provider_reference: p.providerReference,
  failure_code: p.failureCode,
  failure_reason: p.failureReason,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
  completed_at: p.completedAt,
});

/** Checked here so the 400 names the REST field (GraphQL would report the enum variable). */
function commandField(body: Record<string, unknown>): string | undefined {
  const value = stringField(body, "command_id");
  if (value !== undefined && !(payoutCommands as readonly string[]).includes(value)) {
    throw new ValidationError("command_id", `must be one of ${payoutCommands.join(", ")}`);
  }
  return value;
}

const payoutObject = { path: "/v1/payouts", tag: "Payouts", one: "Payout", many: "Payouts", fragment: V1Payout, schema: schemas.payout, toV1: toV1Payout };

export const payoutRoutes = [
  v1CreateRoute({
    ...payoutObject,
    summary: "Pay out to a phone (M-Pesa B2C); never sent twice",
    body: body(
      {
        amount: int(undefined, { minimum: 1 }),
        phone_number: str(MSISDN_INPUT_DESCRIPTION),
        currency: str(),
        payment_channel_id: int(),
        reference: str("Your own reference (unique per merchant and mode)"),
        description: str(),
        command_id: oneOfStrings(["BusinessPayment", "SalaryPayment", "PromotionPayment"]),
      },
      ["amount", "phone_number"],
    ),
    input: (body) => ({
      amount: required(intField(body, "amount"), "amount"),
      paymentChannelId: intField(body, "payment_channel_id"),
      commandId: commandField(body),
      ...bodyFields(body, { phoneNumber: "phone_number", currency: "currency", reference: "reference", description: "description" }),
    }),
  }),
  v1ListRoute({ ...payoutObject, summary: "The merchant's payouts, newest first, by page" }),
  v1GetRoute({ ...payoutObject, summary: "One payout, by its reference" }),
];
