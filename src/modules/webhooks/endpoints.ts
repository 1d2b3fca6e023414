import { z } from "zod";
import { scopeOf, type Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Mode, Prisma, WebhookEndpoint } from "../../db/generated/prisma/client.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { SecretBox } from "../../security/encryption.ts";
import type { MerchantUrls } from "../../security/outbound.ts";
import { optionalTextSchema, parseInputAsync, refuse } from "../../validation.ts";
import { webhookEventTypes } from "./event-types.ts";
import { generateWebhookSecret } from "./signing.ts";
import * as store from "./store.ts";

export interface EndpointInput {
  url?: string | null;
  events?: readonly string[] | null;
  description?: string | null;
  enabled?: boolean | null;
  /** "Allow local URLs (test mode only)": this endpoint may be on loopback or a private network. */
  allowLocalUrls?: boolean | null;
}

/** Said when a test-mode URL is local: the endpoint's own switch, no restart with ALLOW_PRIVATE_URLS needed. */
export const ALLOW_LOCAL_URLS_HINT = 'tick "Allow local URLs (test mode only)" on the endpoint (allow_local_urls: true) to allow it in test mode';

const MAX_ENDPOINTS_PER_MODE = 16;
/** After a rotation the previous secret keeps signing this long, so receivers can switch over. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60 * 1000;

const eventsSchema = z.array(z.string()).transform((list, ctx) => {
  const events = [...new Set(list)];
  const unknown = events.find((e) => !(webhookEventTypes as readonly string[]).includes(e));
  return unknown === undefined ? events : refuse(ctx, `unknown event type "${unknown.slice(0, 60)}"; known types: ${webhookEventTypes.join(", ")}`);
});

/** A merchant's webhook endpoints: where its events are posted, each with its signing secret (encrypted at rest). */
export function createEndpoints(deps: { prisma: PrismaClient; secrets: SecretBox; merchantUrls: MerchantUrls }) {
  const { prisma, secrets, merchantUrls } = deps;

  /**
   * An endpoint's input (new, or its changes), in the order its fields are reported when several are wrong. The URL
   * is HTTPS in live mode; loopback and private networks only in test mode, with ALLOW_PRIVATE_URLS or this endpoint's
   * allowLocalUrls (`allowLocal`: the flag it will have): the URL guard's refusal is thrown as it is (it names `url`).
   */
  const urlIn = (mode: Mode, allowLocal: boolean) =>
    z
      .string("is required")
      .trim()
      .min(1, "is required")
      .transform((url) => merchantUrls.check(mode, url, "url", { allowed: allowLocal, hint: ALLOW_LOCAL_URLS_HINT }));
  const allowLocalIn = z.boolean("must be true or false").nullish();
  /** Asked before anything else: in live mode the switch does not exist, whatever the URL. */
  const refuseLocalInLive = (mode: Mode, input: EndpointInput) => {
    if (mode === "live" && input.allowLocalUrls === true) {
      throw new ValidationError("allow_local_urls", "local URLs are allowed in test mode only: a live endpoint must be a public https URL");
    }
  };
  const newEndpoint = (mode: Mode, allowLocal: boolean) =>
    z.object({
      url: urlIn(mode, allowLocal),
      events: eventsSchema.nullish().transform((events) => events ?? []),
      description: optionalTextSchema(500),
      enabled: z.boolean().nullish(),
      allowLocalUrls: allowLocalIn,
    });
  const endpointChanges = (mode: Mode, allowLocal: boolean) =>
    z.object({ url: urlIn(mode, allowLocal).nullish(), events: eventsSchema.nullish(), description: optionalTextSchema(500), enabled: z.boolean().nullish(), allowLocalUrls: allowLocalIn });

  async function getEndpoint(principal: Principal, id: number): Promise<WebhookEndpoint> {
    const endpoint = await store.findEndpoint(prisma, principal, id);
    if (!endpoint) throw new NotFoundError(`Webhook endpoint ${id}`);
    return endpoint;
  }

  return {
    getEndpoint,

    /** How many endpoints the caller's merchant has in its mode. */
    countEndpoints: (principal: Principal) => store.countEndpoints(prisma, principal),

    /** Creates an endpoint; the signing secret is in the answer this once and never again. */
    async createEndpoint(principal: Principal, input: EndpointInput) {
      refuseLocalInLive(principal.mode, input);
      const allowLocal = principal.mode === "test" && input.allowLocalUrls === true;
      const { url, events, description, enabled } = await parseInputAsync(newEndpoint(principal.mode, allowLocal), input);
      if ((await store.countEndpoints(prisma, principal)) >= MAX_ENDPOINTS_PER_MODE) {
        throw new ValidationError("url", `a merchant may have at most ${MAX_ENDPOINTS_PER_MODE} webhook endpoints per mode`);
      }
      const secret = generateWebhookSecret();
      const endpoint = await store.insertEndpoint(prisma, { ...scopeOf(principal), url, events, description, enabled: enabled ?? true, allowLocalUrls: allowLocal, secretEncrypted: secrets.encrypt(secret) });
      return { endpoint, secret };
    },

    listEndpoints: (principal: Principal) => store.listEndpoints(prisma, principal),

    /** Re-enabling an endpoint clears why it was disabled and starts its 5-day failure clock afresh. */
    async updateEndpoint(principal: Principal, id: number, input: EndpointInput) {
      const endpoint = await getEndpoint(principal, id);
      refuseLocalInLive(principal.mode, input);
      const allowLocal = principal.mode === "test" && (input.allowLocalUrls ?? endpoint.allowLocalUrls) === true;
      const changes = await parseInputAsync(endpointChanges(principal.mode, allowLocal), input);
      const data: Prisma.WebhookEndpointUncheckedUpdateInput = {};
      if (changes.url != null) data.url = changes.url;
      if (changes.allowLocalUrls != null) {
        // Switched off: the URL it keeps must pass the guard on its own.
        if (!changes.allowLocalUrls && changes.url == null) await merchantUrls.check(principal.mode, endpoint.url, "url", { allowed: false, hint: ALLOW_LOCAL_URLS_HINT });
        data.allowLocalUrls = changes.allowLocalUrls;
      }
      if (changes.events != null) data.events = changes.events;
      // Null clears the description; absent leaves it.
      if (input.description !== undefined) data.description = changes.description;
      if (changes.enabled != null) {
        data.enabled = changes.enabled;
        if (changes.enabled && !endpoint.enabled) Object.assign(data, { disabledReason: null, failingSince: null });
      }
      return store.updateEndpoint(prisma, endpoint.id, data);
    },

    async deleteEndpoint(principal: Principal, id: number) {
      const endpoint = await getEndpoint(principal, id);
      await store.deleteEndpoint(prisma, endpoint.id);
      return endpoint;
    },

    /** A new secret; the previous one keeps signing for 24 hours alongside it. */
    async rotateSecret(principal: Principal, id: number) {
      const endpoint = await getEndpoint(principal, id);
      const secret = generateWebhookSecret();
      const updated = await store.updateEndpoint(prisma, endpoint.id, {
        secretEncrypted: secrets.encrypt(secret),
        previousSecretEncrypted: endpoint.secretEncrypted,
        previousSecretExpiresAt: new Date(Date.now() + PREVIOUS_SECRET_TTL_MS),
      });
      return { endpoint: updated, secret };
    },
  };
}

export type Endpoints = ReturnType<typeof createEndpoints>;
