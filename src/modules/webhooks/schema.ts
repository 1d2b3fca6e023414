import { nodeScopeOf, ownedNode } from "../../auth.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import type { WebhookEndpoint as EndpointRow } from "../../db/generated/prisma/client.ts";
import { deliveryRequest, headerPairs, type HeaderPair } from "./exchange.ts";

/** Webhook endpoints and deliveries: thin resolvers over services.webhooks (REST /v1/webhooks runs these too). */

export const WebhookEndpoint = builder.prismaNode("WebhookEndpoint", {
  id: { field: "id" },
  description: "A URL that receives signed events. Its signing secret is shown only on creation and rotation.",
  findUnique: (id, ctx) => ownedNode(id, ctx.principal),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API and in mutation inputs." }),
    url: t.exposeString("url"),
    description: t.exposeString("description", { nullable: true }),
    events: t.exposeStringList("events", { description: "Event types delivered; empty means every type." }),
    enabled: t.exposeBoolean("enabled"),
    allowLocalUrls: t.exposeBoolean("allowLocalUrls", {
      description: "Test mode only: its URL may be on loopback or a private network (a receiver on your machine); every other endpoint keeps the SSRF guard.",
    }),
    disabledReason: t.exposeString("disabledReason", { nullable: true, description: "Why the gateway disabled it (every attempt failing for 5 days)." }),
    failingSince: t.expose("failingSince", { type: "DateTime", nullable: true, description: "Start of the current run of failed attempts." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
  }),
});

const WebhookDeliveryStatus = builder.enumType("WebhookDeliveryStatus", { values: ["pending", "succeeded", "failed"] as const });

const WebhookHeader = builder.objectRef<HeaderPair>("WebhookHeader").implement({
  fields: (t) => ({ name: t.exposeString("name"), value: t.exposeString("value") }),
});

const WebhookRequest = builder.objectRef<ReturnType<typeof deliveryRequest>>("WebhookRequest").implement({
  description: "What every attempt of a delivery sends. The signature's value is not shown, nor ever the endpoint's secret.",
  fields: (t) => ({
    url: t.exposeString("url", { description: "The endpoint's URL as it is now." }),
    headers: t.field({ type: [WebhookHeader], resolve: (r) => r.headers }),
    body: t.exposeString("body", { description: "The exact JSON body (the same bytes on every attempt)." }),
  }),
});

const WebhookResponse = builder.objectRef<{ status: number; headers: HeaderPair[]; body: string }>("WebhookResponse").implement({
  description: "What the endpoint answered to the last attempt. Untrusted text: show it, never render it.",
  fields: (t) => ({
    status: t.exposeInt("status"),
    headers: t.field({ type: [WebhookHeader], description: "Its headers, minus cookie/authorization-like ones.", resolve: (r) => r.headers }),
    body: t.exposeString("body", { description: "Its first 2,048 characters, control characters other than newline and tab removed." }),
  }),
});

const WebhookDelivery = builder.prismaObject("WebhookDelivery", {
  description: "One event to one endpoint: how many attempts, what the last one got back, and when the next is due.",
  fields: (t) => ({
    // BigInt columns: GraphQL's ID serializes strings and numbers only.
    id: t.id({ resolve: (d) => d.id.toString() }),
    eventId: t.id({ description: "The webhook-id header of every attempt.", resolve: (d) => d.eventId.toString() }),
    eventType: t.string({ select: { event: { select: { type: true } } }, resolve: (d) => d.event.type }),
    endpoint: t.relation("endpoint"),
    status: t.expose("status", { type: WebhookDeliveryStatus }),
    attempts: t.exposeInt("attempts"),
    lastStatusCode: t.exposeInt("lastStatusCode", { nullable: true, description: "HTTP status of the last attempt; null when it got no answer." }),
    lastError: t.exposeString("lastError", { nullable: true }),
    lastLatencyMs: t.exposeInt("lastLatencyMs", { nullable: true }),
    request: t.field({
      type: WebhookRequest,
      select: { endpoint: { select: { url: true } }, event: { select: { id: true, type: true, createdAt: true, payload: true } } },
      resolve: (d) => deliveryRequest(d.endpoint.url, d.event),
    }),
    response: t.field({
      type: WebhookResponse,
      nullable: true,
      description: "The last attempt's answer; null before the first attempt and when it got none.",
      select: { lastStatusCode: true, lastResponseBody: true, lastResponseHeaders: true },
      resolve: (d) =>
        d.lastStatusCode === null
          ? null
          : { status: d.lastStatusCode, body: d.lastResponseBody ?? "", headers: headerPairs((d.lastResponseHeaders ?? {}) as Record<string, string>) },
    }),
    nextAttemptAt: t.expose("nextAttemptAt", { type: "DateTime", nullable: true }),
    deliveredAt: t.expose("deliveredAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const WebhookEndpointWithSecret = builder.objectRef<{ endpoint: EndpointRow; secret: string }>("WebhookEndpointWithSecret").implement({
  description: "An endpoint and its signing secret: the only time the secret is shown.",
  fields: (t) => ({
    endpoint: t.field({ type: WebhookEndpoint, resolve: (p) => p.endpoint }),
    secret: t.exposeString("secret", { description: "whsec_ + base64: verify deliveries with it (Standard Webhooks)." }),
  }),
});

const ResendEventPayload = builder.objectRef<{ deliveries: unknown[] }>("ResendEventPayload").implement({
  fields: (t) => ({ deliveries: t.field({ type: [WebhookDelivery], resolve: (p) => p.deliveries as never }) }),
});

const CreateWebhookEndpointInput = builder.inputType("CreateWebhookEndpointInput", {
  fields: (t) => ({
    url: t.string({ required: true, description: "HTTPS in live mode; never a private or loopback address in live mode." }),
    events: t.stringList({ required: false, description: "Event types to deliver; absent or empty means every type." }),
    description: t.string({ required: false }),
    enabled: t.boolean({ required: false, description: "Default true." }),
    allowLocalUrls: t.boolean({ required: false, description: "Allow local URLs (test mode only): the URL may be on loopback or a private network. Refused in live mode. Default false." }),
  }),
});

const UpdateWebhookEndpointInput = builder.inputType("UpdateWebhookEndpointInput", {
  fields: (t) => ({
    id: t.int({ required: true, description: "The endpoint's databaseId." }),
    url: t.string({ required: false }),
    events: t.stringList({ required: false }),
    description: t.string({ required: false }),
    enabled: t.boolean({ required: false, description: "Re-enabling a disabled endpoint clears its failure record." }),
    allowLocalUrls: t.boolean({ required: false, description: "Allow local URLs (test mode only); turning it off checks the URL again. Refused in live mode." }),
  }),
});

builder.queryFields((t) => ({
  webhookEndpoints: t.prismaField({
    type: ["WebhookEndpoint"],
    description: "The merchant's endpoints in the key's mode.",
    resolve: (query, _root, _args, ctx) => ctx.prisma.webhookEndpoint.findMany({ ...query, where: nodeScopeOf(ctx.principal), orderBy: { id: "asc" } }),
  }),
  webhookDeliveries: t.prismaField({
    type: ["WebhookDelivery"],
    description: "Newest first, for one endpoint and/or one event.",
    args: {
      endpointId: t.arg.int({ required: false }),
      eventId: t.arg.id({ required: false }),
      limit: t.arg.int({ required: false, description: "1 to 100 (default 50)." }),
    },
    resolve: (query, _root, args, ctx) =>
      ctx.services.webhooks.listDeliveries(ctx.principal!, { endpointId: args.endpointId, eventId: args.eventId == null ? null : String(args.eventId), limit: args.limit }, query),
  }),
}));

builder.mutationFields((t) => ({
  createWebhookEndpoint: t.field({
    type: WebhookEndpointWithSecret,
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateWebhookEndpointInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.webhooks.createEndpoint(ctx.principal!, input),
  }),
  updateWebhookEndpoint: t.field({
    type: WebhookEndpoint,
    errors: { types: businessErrors },
    args: { input: t.arg({ type: UpdateWebhookEndpointInput, required: true }) },
    resolve: (_root, { input: { id, ...changes } }, ctx) => ctx.services.webhooks.updateEndpoint(ctx.principal!, id, changes),
  }),
  deleteWebhookEndpoint: t.field({
    type: WebhookEndpoint,
    description: "Deletes the endpoint and its delivery history; returns it as it was.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.webhooks.deleteEndpoint(ctx.principal!, id),
  }),
  rotateWebhookSecret: t.field({
    type: WebhookEndpointWithSecret,
    description: "A new signing secret; the old one keeps signing alongside it for 24 hours.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.webhooks.rotateSecret(ctx.principal!, id),
  }),
  sendTestWebhook: t.field({
    type: WebhookDelivery,
    description: "Sends a signed webhook.test event to this one endpoint through the normal delivery path; its delivery is returned (pending) and listed with the others.",
    errors: { types: businessErrors },
    args: { endpointId: t.arg.int({ required: true }) },
    resolve: (_root, { endpointId }, ctx) => ctx.services.webhooks.sendTestEvent(ctx.principal!, endpointId) as never,
  }),
  resendEvent: t.field({
    type: ResendEventPayload,
    description: "Delivers an event again: to one endpoint, or to every enabled endpoint subscribed to its type.",
    errors: { types: businessErrors },
    args: { eventId: t.arg.id({ required: true }), endpointId: t.arg.int({ required: false }) },
    resolve: async (_root, { eventId, endpointId }, ctx) => ({ deliveries: await ctx.services.webhooks.resendEvent(ctx.principal!, String(eventId), endpointId) }),
  }),
}));
