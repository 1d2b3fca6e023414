import { bodyFields, intField, required } from "../../rest/params.ts";
import { defineRoute, type RestRoute } from "../../rest/route-table.ts";
import { NotFoundError } from "../../errors.ts";
import { withOutcome } from "../transactions/routes.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { RestMomoTransactionFragment } from "../../rest/gql/graphql.ts";
import { body, dateTime, envelope, feeFields, int, nullable, obj, oneOfStrings, refundedFields, schemas, str } from "../../openapi/schemas.ts";
import { MSISDN_INPUT_DESCRIPTION } from "../../phone.ts";

/** The documented /api/momo bodies (and /v1/collections/stk), each over the GraphQL operation it runs. */
graphql(`
  fragment RestMomoTransaction on Transaction {
    databaseId reference clientReference amount currency phoneNumber status paymentMethod checkoutRequestId createdAt metadata
  }
`);

/** The STK push, for /api/momo/stk-push and /v1/collections/stk. */
const stkPushOperation = graphql(`
  mutation RestStkPush($input: StartStkPushInput!) {
    startStkPush(input: $input) {
      __typename
      ... on Error { code message }
      ... on StartStkPushPayload { customerMessage transaction { ...RestMomoTransaction } }
    }
  }
`);

/** A push's status, for /api/momo/stk-status and /v1/collections/stk/:reference. */
const stkStatusOperation = graphql(`
  query RestStkStatus($reference: String!) {
    stkStatus(reference: $reference) {
      __typename
      ... on Error { code message }
      ... on Transaction { ...RestMomoTransaction ...RestTransactionOutcome completedAt }
    }
  }
`);

const stkPushVariables = ({ body }: { body: Record<string, unknown> }) => ({
  input: {
    amount: required(intField(body, "amount"), "amount"),
    paymentChannelId: intField(body, "payment_channel_id"),
    ...bodyFields(body, { phoneNumber: "phone_number", reference: "reference", description: "description" }),
    // Passed as sent: the service refuses what is not an object of at most 8 KB, naming `metadata` (as initialize).
    metadata: body.metadata ?? undefined,
  },
});

const stkBody = body(
  {
    amount: int("Whole shillings in minor units (KES 15.00 is 1500)", { minimum: 1 }),
    phone_number: str(MSISDN_INPUT_DESCRIPTION),
    payment_channel_id: int("Default: the merchant's default channel"),
    reference: str("Your own reference, shown to the payer"),
    description: str(),
    metadata: { type: "object", description: "A JSON object of yours, at most 8 KB serialized, kept on the transaction; echoed by verify, GraphQL and webhooks" },
  },
  ["amount", "phone_number"],
);


const outcomeSchema = {
  currency: str("ISO 4217"),
  client_reference: nullable(str("Your own reference (AccountReference), when you sent one")),
  provider_reference: nullable(str("The M-Pesa receipt (MpesaReceiptNumber) once paid")),
  failure_code: nullable(str("The provider's code, when failed (M-Pesa ResultCode, e.g. 1032)")),
  failure_reason: nullable(str("The provider's words, when failed")),
  ...refundedFields,
  ...feeFields,
};


/** The documented form of stkCollectionFields. */
const stkCollectionSchema = {
  id: int(),
  reference: str(),
  client_reference: nullable(str()),
  amount: schemas.amount,
  currency: str(),
  phone_number: nullable(str()),
  status: schemas.transactionStatus,
  payment_method: nullable(str()),
  checkout_request_id: nullable(str()),
  metadata: schemas.metadata,
};

/** The fields every /v1 STK collection answer starts with (create and read). */
function stkCollectionFields(t: RestMomoTransactionFragment) {
  return {
    id: t.databaseId,
    reference: t.reference,
    client_reference: t.clientReference,
    amount: t.amount,
    currency: t.currency,
    phone_number: t.phoneNumber,
    status: t.status,
    payment_method: t.paymentMethod,
    checkout_request_id: t.checkoutRequestId,
    metadata: t.metadata,
  };
}
export const momoRoutes: RestRoute[] = [
  defineRoute({
    method: "POST",
    path: "/api/momo/stk-push",
    doc: {
      operationId: "stkPush",
      summary: "Send an M-Pesa STK push to the payer's phone",
      tag: "Mobile money",
      body: stkBody,
      response: envelope({
        message: str(),
        transaction: obj({ id: int(), reference: str(), amount: schemas.amount, phone_number: nullable(str()), status: schemas.transactionStatus, checkout_request_id: nullable(str()), created_at: dateTime() }),
      }),
      errors: [404, 409, 422, 502],
    },
    operation: stkPushOperation,
    variables: stkPushVariables,
    respond: ({ startStkPush: { transaction: t } }) => ({
      body: {
        status: "success",
        message: "STK push sent to the customer's phone",
        transaction: {
          id: t.databaseId,
          reference: t.reference,
          amount: t.amount,
          phone_number: t.phoneNumber,
          status: t.status,
          checkout_request_id: t.checkoutRequestId,
          created_at: t.createdAt,
        },
      },
    }),
  }),

  defineRoute({
    method: "GET",
    path: "/api/momo/stk-status/:reference",
    doc: {
      operationId: "stkStatus",
      summary: "An STK push's status (asks M-Pesa when still pending)",
      description: "Beyond the published fields: currency, client_reference, provider_reference (the M-Pesa receipt once paid), failure_code and failure_reason (null unless failed).",
      tag: "Mobile money",
      response: envelope({
        transaction: obj({
          id: int(),
          reference: str(),
          amount: schemas.amount,
          phone_number: nullable(str()),
          status: schemas.transactionStatus,
          payment_method: nullable(str()),
          created_at: dateTime(),
          ...outcomeSchema,
        }),
      }),
      errors: [404, 414],
    },
    operation: stkStatusOperation,
    variables: ({ params }) => ({ reference: params.reference }),
    respond: ({ stkStatus: t }) => ({
      body: {
        status: "success",
        transaction: withOutcome(
          {
            id: t.databaseId,
            reference: t.reference,
            amount: t.amount,
            phone_number: t.phoneNumber,
            status: t.status,
            payment_method: t.paymentMethod,
            created_at: t.createdAt,
          },
          t,
        ),
      },
    }),
  }),

  /** The v1 read of one STK collection: what stk-status gives, in the v1 envelope; anything but an STK push is a 404. */
  defineRoute({
    method: "GET",
    path: "/v1/collections/stk/:reference",
    doc: {
      operationId: "getStkCollection",
      summary: "One STK collection by its reference (the v1 shape of stk-status)",
      description: "Only STK push transactions: another merchant's, the other mode's, or a transaction that is not an STK push is a 404.",
      tag: "Mobile money",
      response: envelope({
        data: obj({
          ...stkCollectionSchema,
          provider_reference: nullable(str("The M-Pesa receipt once paid")),
          failure_code: nullable(str("The M-Pesa ResultCode when failed, e.g. 1032")),
          failure_reason: nullable(str()),
          created_at: dateTime(),
          completed_at: nullable(dateTime()),
        }),
      }),
      errors: [404, 414],
    },
    operation: stkStatusOperation,
    variables: ({ params }) => ({ reference: params.reference }),
    respond: ({ stkStatus: t }) => {
      // Same answer as an unknown reference: a card payment's reference tells nothing more here.
      if (t.paymentMethod !== "momo_stk") throw new NotFoundError("Transaction");
      return {
        body: {
          status: "success",
          data: {
            ...stkCollectionFields(t),
            provider_reference: t.providerReference,
            failure_code: t.failureCode,
            failure_reason: t.failureReason,
            created_at: t.createdAt,
            completed_at: t.completedAt,
          },
        },
      };
    },
  }),

  defineRoute({
    method: "POST",
    path: "/api/momo/register-c2b-urls",
    doc: {
      operationId: "registerC2bUrls",
      summary: "Register the merchant's C2B confirmation and validation URLs",
      tag: "Mobile money",
      body: body({ payment_channel_id: int(), confirmation_url: str(), validation_url: str(), response_type: oneOfStrings(["Completed", "Cancelled"]) }, ["confirmation_url", "validation_url"]),
      response: envelope({ message: str(), urls: obj({ confirmation: str(), validation: str() }) }),
      errors: [404, 409, 422, 502],
    },
    operation: graphql(`
      mutation RestRegisterC2bUrls($input: RegisterC2bUrlsInput!) {
        registerC2bUrls(input: $input) {
          __typename
          ... on Error { code message }
          ... on RegisterC2bUrlsPayload { confirmationUrl validationUrl }
        }
      }
    `),
    variables: ({ body }) => ({
      input: {
        paymentChannelId: intField(body, "payment_channel_id"),
        ...bodyFields(body, { confirmationUrl: "confirmation_url", validationUrl: "validation_url", responseType: "response_type" }),
      },
    }),
    respond: ({ registerC2bUrls: r }) => ({
      body: { status: "success", message: "C2B URLs registered", urls: { confirmation: r.confirmationUrl, validation: r.validationUrl } },
    }),
  }),

  defineRoute({
    method: "POST",
    path: "/api/momo/simulate-c2b",
    doc: {
      operationId: "simulateC2b",
      summary: "Simulate a customer-to-business payment (sandbox only)",
      tag: "Mobile money",
      body: body({ payment_channel_id: int(), amount: int(undefined, { minimum: 1 }), phone_number: str(MSISDN_INPUT_DESCRIPTION), reference: str("The bill reference the payer types") }, ["amount", "phone_number", "reference"]),
      response: envelope({ message: str(), transaction: obj({ amount: schemas.amount, phone_number: str(), reference: str(), status: str() }) }),
      errors: [404, 409, 422, 502],
    },
    operation: graphql(`
      mutation RestSimulateC2b($input: SimulateC2bInput!) {
        simulateC2b(input: $input) {
          __typename
          ... on Error { code message }
          ... on SimulateC2bPayload { amount phoneNumber reference status }
        }
      }
    `),
    variables: ({ body }) => ({
      input: {
        paymentChannelId: intField(body, "payment_channel_id"),
        amount: required(intField(body, "amount"), "amount"),
        ...bodyFields(body, { phoneNumber: "phone_number", reference: "reference" }),
      },
    }),
    respond: ({ simulateC2b: r }) => ({
      body: {
        status: "success",
        message: "C2B payment simulated",
        transaction: { amount: r.amount, phone_number: r.phoneNumber, reference: r.reference, status: r.status },
      },
    }),
  }),

  /** The v1 collection: the same STK push, answered 201 with the whole collection under `data`. */
  defineRoute({
    method: "POST",
    path: "/v1/collections/stk",
    doc: {
      operationId: "createStkCollection",
      summary: "Collect by M-Pesa STK push (the v1 shape of stk-push)",
      tag: "Mobile money",
      body: stkBody,
      status: 201,
      response: envelope({
        data: obj({
          ...stkCollectionSchema,
          customer_message: str(),
          created_at: dateTime(),
        }),
      }),
      errors: [404, 409, 422, 502],
    },
    operation: stkPushOperation,
    variables: stkPushVariables,
    respond: ({ startStkPush: { customerMessage, transaction: t } }) => ({
      statusCode: 201,
      body: {
        status: "success",
        data: {
          ...stkCollectionFields(t),
          customer_message: customerMessage,
          created_at: t.createdAt,
        },
      },
    }),
  }),
];
