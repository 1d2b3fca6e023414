import { graphql } from "../../rest/gql/index.ts";
import type { RestChannelFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, type RestRequest } from "../../rest/route-table.ts";
import { bodyFields, boolParam, intField, intParam } from "../../rest/params.ts";
import { body, bool, dateTime, envelope, int, list, obj, oneOfStrings, schemas, str } from "../../openapi/schemas.ts";
import { listedProviderNames } from "../../providers/registry.ts";

const RestChannel = graphql(`
  fragment RestChannel on PaymentChannel { databaseId name provider isActive isDefault createdAt webhookUrl feePercentBps feeFixed feeCap }
`);

/** The documented channel object; config is write-only and never part of it. */
const toLegacyChannel = (c: RestChannelFragment) => ({
  id: c.databaseId,
  name: c.name,
  provider: c.provider,
  is_active: c.isActive,
  is_default: c.isDefault,
  created_at: c.createdAt,
  fee_percent_bps: c.feePercentBps,
  fee_fixed: c.feeFixed,
  fee_cap: c.feeCap,
  // Only channels that need one (paystack) carry it; the documented shape of the others is unchanged.
  ...(c.webhookUrl ? { webhook_url: c.webhookUrl } : {}),
});

function createVariables({ body }: RestRequest) {
  return {
    input: {
      ...bodyFields(body, { name: "name", provider: "provider" }),
      config: body.config ?? null,
      feePercentBps: intField(body, "fee_percent_bps") ?? null,
      feeFixed: intField(body, "fee_fixed") ?? null,
      feeCap: intField(body, "fee_cap") ?? null,
    },
  };
}

export const channelRoutes = [
  defineRoute({
    method: "POST",
    path: "/api/payment-channels/create",
    doc: {
      operationId: "createPaymentChannel",
      summary: "Create a payment channel (it becomes the default)",
      tag: "Payment channels",
      body: body(
        {
          name: str(),
          provider: oneOfStrings(listedProviderNames),
          config: { type: "object", description: "The provider's credentials; write-only" },
          fee_percent_bps: int("The provider's fee in basis points of each payment (150 = 1.5%); default 0", { minimum: 0, maximum: 10000 }),
          fee_fixed: int("The provider's fixed fee per payment, minor units; default 0", { minimum: 0 }),
          fee_cap: int("The most the fee on one payment can be, minor units; default: no cap", { minimum: 0 }),
        },
        ["name", "provider"],
      ),
      status: 201,
      response: envelope({ message: str(), channel: schemas.channel }),
      errors: [409, 422],
    },
    operation: graphql(`
      mutation RestCreatePaymentChannel($input: CreatePaymentChannelInput!) {
        createPaymentChannel(input: $input) {
          ... on PaymentChannel { ...RestChannel }
          ... on Error { code message }
        }
      }
    `),
    variables: createVariables,
    respond: ({ createPaymentChannel }) => ({
      statusCode: 201,
      body: { status: "success", message: "Payment channel created", channel: toLegacyChannel(createPaymentChannel) },
    }),
  }),
  defineRoute({
    method: "GET",
    path: "/api/payment-channels/list",
    doc: {
      operationId: "listPaymentChannels",
      summary: "The merchant's payment channels",
      tag: "Payment channels",
      query: { active_only: { description: "true: active channels only", schema: bool() } },
      response: envelope({ channels: list(schemas.channel) }),
    },
    operation: graphql(`
      query RestListPaymentChannels($activeOnly: Boolean) {
        paymentChannels(activeOnly: $activeOnly) { ...RestChannel }
      }
    `),
    variables: ({ query }) => ({ activeOnly: boolParam(query, "active_only") ?? false }),
    respond: ({ paymentChannels }) => ({ body: { status: "success", channels: paymentChannels.map(toLegacyChannel) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/payment-channels/:id/check-credentials",
    doc: {
      operationId: "checkChannelCredentials",
      summary: "Show a channel's credentials to its provider now (a call that changes nothing) and keep the answer",
      description: "M-Pesa: Daraja's OAuth token call; Paystack: GET /balance. A refusal is an answer (ok false, with the provider's words), not an error. The go-live checklist reads the last answer.",
      tag: "Payment channels",
      response: envelope({ data: obj({ ok: bool(), message: str(), checked_at: dateTime() }) }),
      errors: [404],
    },
    operation: graphql(`
      mutation V1CheckChannelCredentials($id: Int!) {
        checkChannelCredentials(id: $id) {
          __typename
          ... on Error { code message }
          ... on ChannelCredentialCheck { ok message checkedAt }
        }
      }
    `),
    variables: ({ params }) => ({ id: intParam(params, "id") ?? null }),
    respond: ({ checkChannelCredentials: check }) => ({ body: { status: "success", data: { ok: check.ok, message: check.message, checked_at: check.checkedAt } } }),
  }),
];
