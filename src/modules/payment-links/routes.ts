import { ValidationError } from "../../errors.ts";
import { body, bool, dateTime, envelope, int, list, nullable, obj, pageQuery, schemas, str } from "../../openapi/schemas.ts";
import { bodyFields, boolParam, intField, pageVariables } from "../../rest/params.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1PaymentLinkFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";

/** /v1/payment-links over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
graphql(`
  fragment V1PaymentLink on PaymentLink {
    databaseId url slug active amount minAmount currency description reusable expiresAt callbackUrl paymentChannelId paymentsCount createdAt
  }
`);

export const toV1PaymentLink = (l: V1PaymentLinkFragment) => ({
  id: l.databaseId,
  url: l.url,
  slug: l.slug,
  active: l.active,
  amount: l.amount,
  min_amount: l.minAmount,
  currency: l.currency,
  description: l.description,
  reusable: l.reusable,
  expires_at: l.expiresAt,
  callback_url: l.callbackUrl,
  payment_channel_id: l.paymentChannelId,
  payments_count: l.paymentsCount,
  created_at: l.createdAt,
});

const paymentLinkSchema = obj({
  id: int(),
  url: str("PUBLIC_URL/pay/<slug>: give it to payers"),
  slug: str("Random, URL-safe, unguessable"),
  active: bool("False once deactivated"),
  amount: nullable(int("Minor units; null for an open amount")),
  min_amount: int("The least an open amount may be (minor units)"),
  currency: str(),
  description: str(),
  reusable: bool("True: every payer pays; false: done once paid"),
  expires_at: nullable(dateTime()),
  callback_url: nullable(str()),
  payment_channel_id: nullable(int()),
  payments_count: int("Transactions made through the link"),
  created_at: dateTime(),
});

/** A positive whole number of minor units when given: checked here so the 400 names the REST field. */
function amountField(b: Record<string, unknown>, name: string): number | undefined {
  if (typeof b[name] === "number" && !Number.isInteger(b[name])) throw new ValidationError(name, "must be an integer in the currency's minor unit (e.g. 1000 for KES 10.00)");
  const value = intField(b, name);
  if (value !== undefined && value < 1) throw new ValidationError(name, "must be a positive integer (minor units)");
  return value;
}

const tag = "Payment links";

export const paymentLinkRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/payment-links",
    doc: {
      operationId: "createPaymentLink",
      summary: "A payment link: a fixed amount, or an open one (the payer types it, at least min_amount)",
      tag,
      body: body(
        {
          amount: int("Minor units; leave out for an open amount", { minimum: 1 }),
          min_amount: int("Open amounts only: the least a payer may pay (default 1)", { minimum: 1 }),
          currency: str("ISO 4217; default: the merchant's currency"),
          description: str("Shown to payers; at most 500 characters"),
          reusable: bool("Default false: one payment, then the link is done"),
          expires_at: str("ISO 8601 with a zone, in the future", { format: "date-time" }),
          callback_url: str("Where payers go after paying"),
          payment_channel_id: int("Default: the merchant's default channel"),
        },
        ["description"],
      ),
      status: 201,
      response: envelope({ data: paymentLinkSchema }),
      errors: [404],
    },
    operation: graphql(`
      mutation V1CreatePaymentLink($input: CreatePaymentLinkInput!) {
        createPaymentLink(input: $input) { __typename ... on Error { code message } ... on PaymentLink { ...V1PaymentLink } }
      }
    `),
    variables: ({ body: b }) => ({
      input: {
        amount: amountField(b, "amount"),
        minAmount: amountField(b, "min_amount"),
        paymentChannelId: intField(b, "payment_channel_id"),
        ...bodyFields(b, { currency: "currency", description: "description", reusable: "reusable", expiresAt: "expires_at", callbackUrl: "callback_url" }),
      },
    }),
    respond: (data) => ({ statusCode: 201, body: { status: "success", data: toV1PaymentLink(data.createPaymentLink) } }),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/payment-links",
    doc: {
      operationId: "listPaymentLinks",
      summary: "The merchant's payment links, newest first, by page",
      tag,
      query: { page: pageQuery.page, limit: pageQuery.limit, active: { description: "true or false", schema: { type: "boolean" } } },
      response: envelope({ data: list(paymentLinkSchema), ...schemas.page }),
    },
    operation: graphql(`
      query V1ListPaymentLinks($page: Int, $limit: Int, $active: Boolean) {
        paymentLinksPage(page: $page, limit: $limit, active: $active) {
          __typename ... on Error { code message } ... on PaymentLinkPage { total page limit pages items { ...V1PaymentLink } }
        }
      }
    `),
    variables: ({ query }) => {
      const { page, limit } = pageVariables({ page: query.page, limit: query.limit });
      return { page, limit, active: boolParam(query, "active") };
    },
    respond: (data) => pageBody(data.paymentLinksPage, toV1PaymentLink),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/payment-links/:id",
    doc: { operationId: "getPaymentLink", summary: "One payment link, by its id", tag, response: envelope({ data: paymentLinkSchema }), errors: [404, 414] },
    operation: graphql(`
      query V1PaymentLink($id: String!) { paymentLink(id: $id) { __typename ... on Error { code message } ... on PaymentLink { ...V1PaymentLink } } }
    `),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => ({ body: { status: "success", data: toV1PaymentLink(data.paymentLink) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/payment-links/:id/deactivate",
    doc: { operationId: "deactivatePaymentLink", summary: "Stops a payment link taking payments", tag, response: envelope({ data: paymentLinkSchema }), errors: [404, 414] },
    operation: graphql(`
      mutation V1DeactivatePaymentLink($id: String!) {
        deactivatePaymentLink(id: $id) { __typename ... on Error { code message } ... on PaymentLink { ...V1PaymentLink } }
      }
    `),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => ({ body: { status: "success", data: toV1PaymentLink(data.deactivatePaymentLink) } }),
  }),
];
