import { body, bool, dateTime, envelope, int, list, nullable, obj, oneOfStrings, str } from "../../openapi/schemas.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1ChargeFragment, V1PaymentMethodFragment } from "../../rest/gql/graphql.ts";
import { intField, intParam, required, stringField } from "../../rest/params.ts";
import { defineRoute } from "../../rest/route-table.ts";

/** /v1 saved payment methods over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
graphql(`
  fragment V1PaymentMethod on PaymentMethod {
    id type reusable customerId detachedAt createdAt
    card { brand last4 expMonth expYear bank }
    mpesa { phone }
  }
`);

export const toV1PaymentMethod = (m: V1PaymentMethodFragment) => ({
  id: m.id,
  type: m.type,
  customer: m.customerId,
  card: m.card ? { brand: m.card.brand, last4: m.card.last4, exp_month: m.card.expMonth, exp_year: m.card.expYear, bank: m.card.bank } : null,
  mpesa: m.mpesa ? { phone: m.mpesa.phone } : null,
  reusable: m.reusable,
  created_at: m.createdAt,
  detached_at: m.detachedAt,
});

export const paymentMethodSchema = obj({
  id: str("pm_..."),
  type: oneOfStrings(["card", "mpesa"]),
  customer: int("The customer's id"),
  card: nullable(obj({ brand: nullable(str()), last4: nullable(str()), exp_month: nullable(int()), exp_year: nullable(int()), bank: nullable(str()) })),
  mpesa: nullable(obj({ phone: str("Masked: 2547*****149") })),
  reusable: bool("Only a reusable method may be charged"),
  created_at: dateTime(),
  detached_at: nullable(dateTime("Set once detached: it can never be charged again")),
});

graphql(`
  fragment V1Charge on ChargePaymentMethodPayload {
    transaction { reference amount currency status paymentMethod description clientReference providerReference failureCode failureReason metadata createdAt }
    nextAction { type url }
    paymentMethod { id customerId }
  }
`);

/** A charge as /v1/charges answers it: the payment (its reference is its id), and where the payer must go when asked. */
const toV1Charge = (c: V1ChargeFragment) => ({
  reference: c.transaction.reference,
  amount: c.transaction.amount,
  currency: c.transaction.currency,
  status: c.transaction.status,
  payment_method: c.transaction.paymentMethod,
  customer: c.paymentMethod?.customerId ?? null,
  saved_payment_method: c.paymentMethod?.id ?? null,
  description: c.transaction.description,
  client_reference: c.transaction.clientReference,
  provider_reference: c.transaction.providerReference,
  failure_code: c.transaction.failureCode,
  failure_reason: c.transaction.failureReason,
  metadata: c.transaction.metadata ?? null,
  created_at: c.transaction.createdAt,
  next_action: c.nextAction ? { type: c.nextAction.type, url: c.nextAction.url } : null,
});

const text = nullable(str());
const chargeSchema = obj({
  reference: str("The payment's reference: GET /api/transactions/verify/{reference} and webhooks name it"),
  amount: int("Minor units", { minimum: 1 }),
  currency: str(),
  status: oneOfStrings(["pending", "completed", "failed"]),
  payment_method: nullable(oneOfStrings(["card", "momo_stk"])),
  customer: nullable(int()),
  saved_payment_method: nullable(str("pm_...")),
  description: text,
  client_reference: text,
  provider_reference: text,
  failure_code: nullable(str("card_declined, insufficient_funds, ... when failed")),
  failure_reason: text,
  metadata: nullable({ type: "object" }),
  created_at: dateTime(),
  next_action: nullable(obj({ type: oneOfStrings(["redirect"]), url: str("Send the payer here to finish (their bank asks them)") })),
});

export const paymentMethodRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/charges",
    doc: {
      operationId: "chargePaymentMethod",
      summary: "Charge a customer's saved payment method without the payer (Idempotency-Key required)",
      description:
        "Needs an Idempotency-Key header (400 without one): one key is charged at most once, across retries and crashes. A card completes or fails at once, " +
        "or stays pending with next_action when the bank wants the payer. An M-Pesa method sends a prompt the payer approves on the phone: pending until they do. " +
        "A detached method answers 409 payment_method_detached.",
      tag: "Payment methods",
      body: body(
        {
          customer: int("The customer's id"),
          payment_method: str("pm_..."),
          amount: int("Minor units", { minimum: 1 }),
          currency: str("ISO 4217"),
          reference: str("Your own reference, kept as client_reference", { maxLength: 100 }),
          description: str(),
          metadata: { type: "object", description: "A JSON object of yours, at most 8 KB" },
        },
        ["customer", "payment_method", "amount", "currency"],
      ),
      status: 201,
      response: envelope({ data: chargeSchema }),
      errors: [404, 409, 502],
    },
    operation: graphql(`
      mutation V1ChargePaymentMethod($input: ChargePaymentMethodInput!) {
        chargePaymentMethod(input: $input) { __typename ... on Error { code message } ... on ChargePaymentMethodPayload { ...V1Charge } }
      }
    `),
    variables: ({ body }) => ({
      input: {
        customer: required(intField(body, "customer"), "customer"),
        paymentMethod: required(stringField(body, "payment_method"), "payment_method"),
        amount: required(intField(body, "amount"), "amount"),
        currency: required(stringField(body, "currency"), "currency"),
        reference: stringField(body, "reference"),
        description: stringField(body, "description"),
        metadata: body.metadata ?? undefined,
      },
    }),
    respond: (data) => ({ statusCode: 201, body: { status: "success", data: toV1Charge(data.chargePaymentMethod) } }),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/customers/:id/payment-methods",
    doc: {
      operationId: "listCustomerPaymentMethods",
      summary: "A customer's saved payment methods (attached ones), newest first",
      tag: "Payment methods",
      response: envelope({ data: list(paymentMethodSchema) }),
      errors: [404],
    },
    operation: graphql(`
      query V1CustomerPaymentMethods($id: Int!) {
        customer(id: $id) { __typename ... on Error { code message } ... on Customer { paymentMethods { ...V1PaymentMethod } } }
      }
    `),
    variables: ({ params }) => ({ id: required(intParam(params, "id"), "id") }),
    respond: (data) => ({ body: { status: "success", data: data.customer.paymentMethods.map(toV1PaymentMethod) } }),
  }),
  defineRoute({
    method: "DELETE",
    path: "/v1/payment-methods/:id",
    doc: {
      operationId: "detachPaymentMethod",
      summary: "Detach a saved payment method: it can never be charged again",
      tag: "Payment methods",
      response: envelope({ data: paymentMethodSchema }),
      errors: [404],
    },
    operation: graphql(`
      mutation V1DetachPaymentMethod($id: String!) { detachPaymentMethod(id: $id) { __typename ... on Error { code message } ... on PaymentMethod { ...V1PaymentMethod } } }
    `),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => ({ body: { status: "success", data: toV1PaymentMethod(data.detachPaymentMethod) } }),
  }),
];
