import { bool, dateTime, envelope, int, list, nullable, obj, oneOfStrings, str } from "../../openapi/schemas.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1PaymentMethodFragment } from "../../rest/gql/graphql.ts";
import { intParam, required } from "../../rest/params.ts";
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

export const paymentMethodRoutes = [
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
