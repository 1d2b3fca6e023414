import { boolField, required, stringField, stringListField } from "../../rest/params.ts";
import { defineRoute } from "../../rest/route-table.ts";

/** /v1/webhooks over the GraphQL operations frontends use; the secret appears only in the create answer. */
interface EndpointData {
  databaseId: number;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabledReason: string | null;
  createdAt: string;
}

const endpointFields = "databaseId url events description enabled disabledReason createdAt";

const toV1Endpoint = (e: EndpointData) => ({
  id: e.databaseId,
  url: e.url,
  events: e.events,
  description: e.description,
  enabled: e.enabled,
  created_at: e.createdAt,
});

export const webhookRoutes = [
  defineRoute<{ createWebhookEndpoint: { secret: string; endpoint: EndpointData } }>({
    method: "POST",
    path: "/v1/webhooks",
    operation: `mutation V1CreateWebhook($input: CreateWebhookEndpointInput!) {
      createWebhookEndpoint(input: $input) {
        __typename
        ... on Error { code message }
        ... on WebhookEndpointWithSecret { secret endpoint { ${endpointFields} } }
      }
    }`,
    variables: ({ body }) => ({
      input: {
        url: required(stringField(body, "url"), "url"),
        events: stringListField(body, "events"),
        description: stringField(body, "description"),
        enabled: boolField(body, "enabled"),
      },
    }),
    respond: ({ createWebhookEndpoint: { secret, endpoint } }) => {
      const { created_at, ...rest } = toV1Endpoint(endpoint);
      return { statusCode: 201, body: { status: "success", data: { ...rest, secret, created_at } } };
    },
  }),
  defineRoute<{ webhookEndpoints: EndpointData[] }>({
    method: "GET",
    path: "/v1/webhooks",
    operation: `query V1ListWebhooks { webhookEndpoints { ${endpointFields} } }`,
    variables: () => ({}),
    respond: ({ webhookEndpoints }) => ({
      body: { status: "success", data: webhookEndpoints.map((e) => ({ ...toV1Endpoint(e), disabled_reason: e.disabledReason })) },
    }),
  }),
];
