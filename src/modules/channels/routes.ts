import { defineRoute, type RestRequest } from "../../rest/route-table.ts";
import { boolParam, required, stringField } from "../../rest/params.ts";
import { body, bool, envelope, list, oneOfStrings, schemas, str } from "../../openapi/schemas.ts";
import { listedProviderNames } from "../../providers/registry.ts";

interface ChannelData {
  databaseId: number;
  name: string;
  provider: string;
  isActive: boolean;
  isDefault: boolean;
  createdAt: string;
  webhookUrl: string | null;
}

const channelFields = "databaseId name provider isActive isDefault createdAt webhookUrl";

/** The documented channel object; config is write-only and never part of it. */
const toLegacyChannel = (c: ChannelData) => ({
  id: c.databaseId,
  name: c.name,
  provider: c.provider,
  is_active: c.isActive,
  is_default: c.isDefault,
  created_at: c.createdAt,
  // Only channels that need one (paystack) carry it; the documented shape of the others is unchanged.
  ...(c.webhookUrl ? { webhook_url: c.webhookUrl } : {}),
});

function createVariables({ body }: RestRequest) {
  return {
    input: {
      name: required(stringField(body, "name"), "name"),
      provider: required(stringField(body, "provider"), "provider"),
      config: body.config ?? null,
    },
  };
}

export const channelRoutes = [
  defineRoute<{ createPaymentChannel: ChannelData }>({
    method: "POST",
    path: "/api/payment-channels/create",
    doc: {
      operationId: "createPaymentChannel",
      summary: "Create a payment channel (it becomes the default)",
      tag: "Payment channels",
      body: body({ name: str(), provider: oneOfStrings(listedProviderNames), config: { type: "object", description: "The provider's credentials; write-only" } }, ["name", "provider"]),
      status: 201,
      response: envelope({ message: str(), channel: schemas.channel }),
      errors: [409, 422],
    },
    operation: `mutation RestCreatePaymentChannel($input: CreatePaymentChannelInput!) {
      createPaymentChannel(input: $input) {
        ... on PaymentChannel { ${channelFields} }
        ... on Error { code message }
      }
    }`,
    variables: createVariables,
    respond: ({ createPaymentChannel }) => ({
      statusCode: 201,
      body: { status: "success", message: "Payment channel created", channel: toLegacyChannel(createPaymentChannel) },
    }),
  }),
  defineRoute<{ paymentChannels: ChannelData[] }>({
    method: "GET",
    path: "/api/payment-channels/list",
    doc: {
      operationId: "listPaymentChannels",
      summary: "The merchant's payment channels",
      tag: "Payment channels",
      query: { active_only: { description: "true: active channels only", schema: bool() } },
      response: envelope({ channels: list(schemas.channel) }),
    },
    operation: `query RestListPaymentChannels($activeOnly: Boolean) {
      paymentChannels(activeOnly: $activeOnly) { ${channelFields} }
    }`,
    variables: ({ query }) => ({ activeOnly: boolParam(query, "active_only") ?? false }),
    respond: ({ paymentChannels }) => ({ body: { status: "success", channels: paymentChannels.map(toLegacyChannel) } }),
  }),
];
