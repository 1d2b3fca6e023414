import { scopeOf, type Principal } from "../../auth.ts";
import type { WebhookConfig } from "../../config.ts";
import type { PrismaClient, Reader } from "../../db/database.ts";
import type { Mode, Prisma, WebhookEndpoint } from "../../db/generated/prisma/client.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { cancel, enqueueJobs } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import type { SecretBox } from "../../security/encryption.ts";
import type { MerchantUrls } from "../../security/outbound.ts";
import { optionalText } from "../../validation.ts";
import { WEBHOOK_DELIVERY_JOB } from "./fan-out.ts";
import { webhookBody, webhookEventTypes } from "./payload.ts";
import { generateWebhookSecret, webhookHeaders } from "./signing.ts";

export interface EndpointInput {
  url?: string | null;
  events?: readonly string[] | null;
  description?: string | null;
  enabled?: boolean | null;
}

export interface DeliveryFilters {
  endpointId?: number | null;
  eventId?: string | null;
  limit?: number | null;
}

const MAX_ENDPOINTS_PER_MODE = 16;
/** Deliveries to one endpoint at once, per instance, and how many more may wait here for a turn. */
const MAX_IN_FLIGHT_PER_ENDPOINT = 5;
const MAX_WAITING_PER_ENDPOINT = 10;
/** Runner slots for deliveries: a slow endpoint holds at most 15 of them, so the others keep flowing. */
const DELIVERY_CONCURRENCY = 50;
/** An endpoint that has failed every attempt for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
/** After a rotation the previous secret keeps signing this long, so receivers can switch over. */
export const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60 * 1000;

/** ±10 % so endpoints that failed together do not retry together. */
const withJitter = (ms: number) => Math.round(ms * (0.9 + Math.random() * 0.2));

function parseEvents(value: readonly string[] | null | undefined): string[] {
  const events = [...new Set(value ?? [])];
  const unknown = events.find((e) => !(webhookEventTypes as readonly string[]).includes(e));
  if (unknown !== undefined) throw new ValidationError("events", `unknown event type "${unknown.slice(0, 60)}"; known types: ${webhookEventTypes.join(", ")}`);
  return events;
}

function parseEventId(value: string, field: string): bigint {
  if (!/^\d{1,18}$/.test(value)) throw new ValidationError(field, "must be an event id");
  return BigInt(value);
}

export function createWebhookService(deps: {
  prisma: PrismaClient;
  /** The reader for the lists (a replica when there is one); the primary when unset. */
  read?: Reader;
  secrets: SecretBox;
  jobs: JobRunner;
  config: WebhookConfig;
  /** The URL guard and outbound-HTTP rule shared with every other merchant URL. */
  merchantUrls: MerchantUrls;
  logger: Logger;
  /** Told of every delivery attempt's outcome (metrics). */
  onAttempt?: (outcome: "succeeded" | "retrying" | "failed", eventCreatedAt?: Date) => void;
}) {
  const { prisma, secrets, config, logger } = deps;
  const reader = deps.read?.prisma ?? prisma;
  const scope = scopeOf;
  const { merchantUrls } = deps;
  const slots = new Map<number, { inFlight: number; waiting: (() => void)[] }>();

  /** A turn to send to this endpoint: now, after a short local wait, or false when too many already wait. */
  async function takeTurn(endpointId: number): Promise<boolean> {
    let slot = slots.get(endpointId);
    if (!slot) slots.set(endpointId, (slot = { inFlight: 0, waiting: [] }));
    if (slot.inFlight < MAX_IN_FLIGHT_PER_ENDPOINT) {
      slot.inFlight++;
      return true;
    }
    if (slot.waiting.length >= MAX_WAITING_PER_ENDPOINT) return false;
    await new Promise<void>((resolve) => slot.waiting.push(resolve));
    return true;
  }

  /** Hands the turn to the next waiting delivery, if any. */
  function endTurn(endpointId: number) {
    const slot = slots.get(endpointId);
    if (!slot) return;
    const next = slot.waiting.shift();
    if (next) return next();
    slot.inFlight--;
    if (slot.inFlight === 0) slots.delete(endpointId);
  }

  /** HTTPS in live mode; loopback and private networks only in test mode with ALLOW_PRIVATE_URLS. */
  async function validateUrl(mode: Mode, value: string | null | undefined): Promise<string> {
    const url = value?.trim();
    if (!url) throw new ValidationError("url", "is required");
    return merchantUrls.check(mode, url);
  }

  async function getEndpoint(principal: Principal, id: number): Promise<WebhookEndpoint> {
    const endpoint = await prisma.webhookEndpoint.findFirst({ where: { id, ...scope(principal) } });
    if (!endpoint) throw new NotFoundError(`Webhook endpoint ${id}`);
    return endpoint;
  }

  /** The secrets that sign now: the current one, and the previous one for a day after a rotation. */
  function signingSecrets(endpoint: WebhookEndpoint, now: Date): string[] {
    const current = secrets.decrypt(endpoint.secretEncrypted);
    const previousValid = endpoint.previousSecretEncrypted && endpoint.previousSecretExpiresAt && endpoint.previousSecretExpiresAt > now;
    return previousValid ? [current, secrets.decrypt(endpoint.previousSecretEncrypted!)] : [current];
  }

  async function deliver({ deliveryId }: { deliveryId: number }) {
    const delivery = await prisma.webhookDelivery.findUnique({ where: { id: BigInt(deliveryId) }, include: { endpoint: true, event: true } });
    if (!delivery || delivery.status !== "pending") return;
    const { endpoint, event } = delivery;
    if (!endpoint.enabled) {
      await prisma.webhookDelivery.update({ where: { id: delivery.id }, data: { status: "failed", lastError: "endpoint disabled", nextAttemptAt: null } });
      return;
    }
    if (!(await takeTurn(endpoint.id))) return { retryInMs: 200 + Math.round(Math.random() * 200), countAttempt: false };
    const now = new Date();
    let result;
    try {
      const body = webhookBody(event);
      const headers = webhookHeaders({ id: event.id.toString(), timestamp: Math.floor(now.getTime() / 1000), body, secrets: signingSecrets(endpoint, now) });
      result = await merchantUrls.post(endpoint.mode, endpoint.url, body, config.timeoutMs, headers);
    } finally {
      endTurn(endpoint.id);
    }
    const attempts = delivery.attempts + 1;
    const outcome = { attempts, lastStatusCode: result.statusCode, lastLatencyMs: result.latencyMs, lastError: result.error };
    if (result.ok) {
      await prisma.webhookDelivery.update({ where: { id: delivery.id }, data: { ...outcome, status: "succeeded", deliveredAt: new Date(), nextAttemptAt: null } });
      deps.onAttempt?.("succeeded", event.createdAt);
      if (endpoint.failingSince) await prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data: { failingSince: null } });
      return;
    }
    const failingSince = endpoint.failingSince ?? now;
    if (!endpoint.failingSince) await prisma.webhookEndpoint.updateMany({ where: { id: endpoint.id, failingSince: null }, data: { failingSince: now } });
    const schedule = config.retrySchedule[delivery.mode];
    const failingTooLong = now.getTime() - failingSince.getTime() >= DISABLE_AFTER_MS;
    if (failingTooLong) {
      await prisma.webhookEndpoint.update({
        where: { id: endpoint.id },
        data: { enabled: false, disabledReason: `Disabled on ${now.toISOString()}: every delivery attempt failed for 5 days (last: ${result.error})` },
      });
      logger.warn({ endpointId: endpoint.id, merchantId: endpoint.merchantId }, "webhook endpoint disabled after failing for 5 days");
    }
    if (failingTooLong || attempts >= schedule.length) {
      await prisma.webhookDelivery.update({ where: { id: delivery.id }, data: { ...outcome, status: "failed", nextAttemptAt: null } });
      deps.onAttempt?.("failed");
      return;
    }
    const retryInMs = withJitter(schedule[attempts]!);
    await prisma.webhookDelivery.update({ where: { id: delivery.id }, data: { ...outcome, nextAttemptAt: new Date(Date.now() + retryInMs) } });
    deps.onAttempt?.("retrying");
    return { retryInMs, error: result.error ?? undefined };
  }

  deps.jobs.register<{ deliveryId: number }>({ kind: WEBHOOK_DELIVERY_JOB, concurrency: DELIVERY_CONCURRENCY, run: deliver });

  return {
    /** Creates an endpoint; the signing secret is in the answer this once and never again. */
    async createEndpoint(principal: Principal, input: EndpointInput) {
      const url = await validateUrl(principal.mode, input.url);
      const events = parseEvents(input.events);
      const description = optionalText(input.description, "description", 500);
      if ((await prisma.webhookEndpoint.count({ where: scope(principal) })) >= MAX_ENDPOINTS_PER_MODE) {
        throw new ValidationError("url", `a merchant may have at most ${MAX_ENDPOINTS_PER_MODE} webhook endpoints per mode`);
      }
      const secret = generateWebhookSecret();
      const endpoint = await prisma.webhookEndpoint.create({
        data: { ...scope(principal), url, events, description, enabled: input.enabled ?? true, secretEncrypted: secrets.encrypt(secret) },
      });
      return { endpoint, secret };
    },

    listEndpoints(principal: Principal) {
      return prisma.webhookEndpoint.findMany({ where: scope(principal), orderBy: { id: "asc" } });
    },

    /** Re-enabling an endpoint clears why it was disabled and starts its 5-day failure clock afresh. */
    async updateEndpoint(principal: Principal, id: number, input: EndpointInput) {
      const endpoint = await getEndpoint(principal, id);
      const data: Record<string, unknown> = {};
      if (input.url != null) data.url = await validateUrl(principal.mode, input.url);
      if (input.events != null) data.events = parseEvents(input.events);
      if (input.description !== undefined) data.description = optionalText(input.description, "description", 500);
      if (input.enabled != null) {
        data.enabled = input.enabled;
        if (input.enabled && !endpoint.enabled) Object.assign(data, { disabledReason: null, failingSince: null });
      }
      return prisma.webhookEndpoint.update({ where: { id: endpoint.id }, data });
    },

    async deleteEndpoint(principal: Principal, id: number) {
      const endpoint = await getEndpoint(principal, id);
      await prisma.webhookEndpoint.delete({ where: { id: endpoint.id } });
      return endpoint;
    },

    /** A new secret; the previous one keeps signing for 24 hours alongside it. */
    async rotateSecret(principal: Principal, id: number) {
      const endpoint = await getEndpoint(principal, id);
      const secret = generateWebhookSecret();
      const updated = await prisma.webhookEndpoint.update({
        where: { id: endpoint.id },
        data: {
          secretEncrypted: secrets.encrypt(secret),
          previousSecretEncrypted: endpoint.secretEncrypted,
          previousSecretExpiresAt: new Date(Date.now() + PREVIOUS_SECRET_TTL_MS),
        },
      });
      return { endpoint: updated, secret };
    },

    /** Newest first; only the caller's merchant and mode. */
    listDeliveries(principal: Principal, filters: DeliveryFilters, query: { include?: Prisma.WebhookDeliveryInclude; select?: Prisma.WebhookDeliverySelect } = {}) {
      const limit = filters.limit ?? 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ValidationError("limit", "must be between 1 and 100");
      return reader.webhookDelivery.findMany({
        ...query,
        where: {
          ...scope(principal),
          ...(filters.endpointId != null ? { endpointId: filters.endpointId } : {}),
          ...(filters.eventId != null ? { eventId: parseEventId(filters.eventId, "eventId") } : {}),
        },
        orderBy: { id: "desc" },
        take: limit,
      });
    },

    /**
     * Sends an event again: to one endpoint, or to every enabled endpoint subscribed to its type. A
     * delivery that already exists starts a fresh round of attempts.
     */
    async resendEvent(principal: Principal, eventIdText: string, endpointId?: number | null) {
      const eventId = parseEventId(eventIdText, "eventId");
      const event = await prisma.event.findFirst({ where: { id: eventId, ...scope(principal) } });
      if (!event) throw new NotFoundError(`Event ${eventIdText}`);
      const endpoints =
        endpointId != null
          ? [await getEndpoint(principal, endpointId)]
          : (await prisma.webhookEndpoint.findMany({ where: { ...scope(principal), enabled: true } })).filter((e) => e.events.length === 0 || e.events.includes(event.type));
      const deliveries = await prisma.$transaction(async (tx) => {
        const rows = [];
        for (const endpoint of endpoints) {
          const reset = { status: "pending" as const, attempts: 0, nextAttemptAt: new Date(), lastError: null, lastStatusCode: null };
          rows.push(
            await tx.webhookDelivery.upsert({
              where: { endpointId_eventId: { endpointId: endpoint.id, eventId } },
              create: { endpointId: endpoint.id, eventId, ...scope(principal) },
              update: reset,
            }),
          );
        }
        // A retry still scheduled for one of these would double the new round of attempts.
        for (const d of rows) {
          await cancel(tx, WEBHOOK_DELIVERY_JOB, { deliveryId: Number(d.id) });
        }
        await enqueueJobs(tx, rows.map((d) => ({ kind: WEBHOOK_DELIVERY_JOB, payload: { deliveryId: Number(d.id) } })));
        return rows;
      });
      if (deliveries.length) deps.jobs.nudge();
      return deliveries;
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
