import { ValidationError } from "../../errors.ts";
import { intField, pageVariables, required, stringField } from "../../rest/params.ts";
import { payoutCommands } from "./service.ts";
import { defineRoute } from "../../rest/route-table.ts";
import { body, envelope, int, list, oneOfStrings, pageQuery, schemas, str } from "../../openapi/schemas.ts";
import { MSISDN_INPUT_DESCRIPTION } from "../../phone.ts";

/** /v1/payouts over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
interface PayoutData {
  databaseId: number;
  reference: string;
  clientReference: string | null;
  amount: number;
  currency: string;
  phoneNumber: string;
  status: string;
  paymentChannelId: number;
  providerReference: string | null;
  failureCode: string | null;
  failureReason: string | null;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
}

const payoutFields =
  "databaseId reference clientReference amount currency phoneNumber status paymentChannelId providerReference failureCode failureReason createdAt updatedAt completedAt";

const toV1Payout = (p: PayoutData) => ({
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

export const payoutRoutes = [
  defineRoute<{ createPayout: PayoutData }>({
    method: "POST",
    path: "/v1/payouts",
    doc: {
      operationId: "createPayout",
      summary: "Pay out to a phone (M-Pesa B2C); never sent twice",
      tag: "Payouts",
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
      status: 201,
      response: envelope({ data: schemas.payout }),
      errors: [404, 409, 422, 502],
    },
    operation: `mutation V1CreatePayout($input: CreatePayoutInput!) {
      createPayout(input: $input) {
        __typename
        ... on Error { code message }
        ... on Payout { ${payoutFields} }
      }
    }`,
    variables: ({ body }) => ({
      input: {
        amount: required(intField(body, "amount"), "amount"),
        phoneNumber: required(stringField(body, "phone_number"), "phone_number"),
        currency: stringField(body, "currency"),
        paymentChannelId: intField(body, "payment_channel_id"),
        reference: stringField(body, "reference"),
        description: stringField(body, "description"),
        commandId: commandField(body),
      },
    }),
    respond: ({ createPayout }) => ({ statusCode: 201, body: { status: "success", data: toV1Payout(createPayout) } }),
  }),
  /** The paged list in the same envelope as /api/transactions/list: data, total, page, limit, pages. */
  defineRoute<{ payoutsPage: { items: PayoutData[]; total: number; page: number; limit: number; pages: number } }>({
    method: "GET",
    path: "/v1/payouts",
    doc: {
      operationId: "listPayouts",
      summary: "The merchant's payouts, newest first, by page",
      tag: "Payouts",
      query: {
        ...pageQuery,
      },
      response: envelope({ data: list(schemas.payout), ...schemas.page }),
    },
    operation: `query V1ListPayouts($page: Int, $limit: Int, $status: TransactionStatus, $dateFrom: String, $dateTo: String) {
      payoutsPage(page: $page, limit: $limit, status: $status, dateFrom: $dateFrom, dateTo: $dateTo) {
        __typename
        ... on Error { code message }
        ... on PayoutPage { total page limit pages items { ${payoutFields} } }
      }
    }`,
    variables: ({ query }) => pageVariables(query),
    respond: ({ payoutsPage: p }) => ({
      body: { status: "success", data: p.items.map(toV1Payout), total: p.total, page: p.page, limit: p.limit, pages: p.pages },
    }),
  }),
  defineRoute<{ payout: PayoutData }>({
    method: "GET",
    path: "/v1/payouts/:id",
    doc: {
      operationId: "getPayout",
      summary: "One payout, by its reference",
      tag: "Payouts",
      response: envelope({ data: schemas.payout }),
      errors: [404, 414],
    },
    operation: `query V1Payout($reference: String!) {
      payout(reference: $reference) {
        __typename
        ... on Error { code message }
        ... on Payout { ${payoutFields} }
      }
    }`,
    variables: ({ params }) => ({ reference: params.id }),
    respond: ({ payout }) => ({ body: { status: "success", data: toV1Payout(payout) } }),
  }),
];
