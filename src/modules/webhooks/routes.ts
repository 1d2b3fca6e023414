import { bodyFields, stringListField } from "../../rest/params.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1WebhookEndpointFragment } from "../../rest/gql/graphql.ts";
import { defineRoute } from "../../rest/route-table.ts";
import { body, bool, envelope, list, nullable, obj, schemas, str } from "../../openapi/schemas.ts";

/** /v1/webhooks over the GraphQL operations frontends use; the secret appears only in the create answer. */
graphql(`fragment V1WebhookEndpoint on WebhookEndpoint { databaseId url events description enabled allowLocalUrls disabledReason createdAt }`);

const toV1Endpoint = (e: V1WebhookEndpointFragment) => ({
  id: e.databaseId,
  url: e.url,
  events: e.events,
  description: e.description,
  enabled: e.enabled,
  allow_local_urls: e.allowLocalUrls,
  created_at: e.createdAt,
});

export const webhookRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/webhooks",
    doc: {
      operationId: "createWebhookEndpoint",
      summary: "Add a webhook endpoint; its signing secret is shown this once",
      tag: "Webhooks",
      body: body({ url: str(), events: list(str()), description: str(), enabled: bool(), allow_local_urls: bool("Test mode only: the URL may be on loopback or a private network (refused in live mode)") }, ["url"]),
      status: 201,
      response: envelope({ data: obj({ ...(schemas.webhookEndpoint.properties as Record<string, Record<string, unknown>>), secret: str("whsec_...: verify deliveries with it (Standard Webhooks)") }) }),
      errors: [409, 422],
    },
    operation: graphql(`
      mutation V1CreateWebhook($input: CreateWebhookEndpointInput!) {
        createWebhookEndpoint(input: $input) {
          __typename
          ... on Error { code message }
          ... on WebhookEndpointWithSecret { secret endpoint { ...V1WebhookEndpoint } }
        }
      }
    `),
    // events keeps its own check: GraphQL would take a lone string as a list of one.
    variables: ({ body }) => ({
      input: { ...bodyFields(body, { url: "url", description: "description", enabled: "enabled", allowLocalUrls: "allow_local_urls" }), events: stringListField(body, "events") },
    }),
    respond: ({ createWebhookEndpoint: { secret, endpoint } }) => {
      const { created_at, ...rest } = toV1Endpoint(endpoint);
      return { statusCode: 201, body: { status: "success", data: { ...rest, secret, created_at } } };
    },
  }),
  defineRoute({
    method: "GET",
    path: "/v1/webhooks",
    doc: {
      operationId: "listWebhookEndpoints",
      summary: "The merchant's webhook endpoints (without secrets)",
      tag: "Webhooks",
      response: envelope({ data: list(obj({ ...(schemas.webhookEndpoint.properties as Record<string, Record<string, unknown>>), disabled_reason: nullable(str()) })) }),
    },
    operation: graphql(`query V1ListWebhooks { webhookEndpoints { ...V1WebhookEndpoint } }`),
    variables: () => ({}),
    respond: ({ webhookEndpoints }) => ({
      body: { status: "success", data: webhookEndpoints.map((e) => ({ ...toV1Endpoint(e), disabled_reason: e.disabledReason })) },
    }),
  }),
];
