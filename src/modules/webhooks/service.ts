import { scopeOf, type Principal } from "../../auth.ts";
import type { WebhookConfig } from "../../config.ts";
import type { PrismaClient, Reader } from "../../db/database.ts";
import type { Mode, Prisma, WebhookEndpoint } from "../../db/generated/prisma/client.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { Sql } from "../../db/sql.ts";
import type { BatchJob, BatchOutcome, JobOutcome, JobRunner } from "../../jobs/runner.ts";
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
/** Deliveries to one endpoint at once, per instance. */
const MAX_IN_FLIGHT_PER_ENDPOINT = 5;
/**
 * How many more may wait here for a turn: 10, or as many as the endpoint's recent latency says get their turn
 * within TURN_WAIT_BUDGET_MS, up to 95 (half the runner's slots), or up to all of them while no other endpoint has
 * deliveries here (a backlog to one endpoint is then never deferred, only to be claimed again). A fast endpoint
 * keeps a deep queue, so a backlog to it never waits on the database between batches; a slow one (10 s timeouts)
 * keeps 10, whose wait (20 s) stays well inside the job lease.
 */
const MIN_WAITING_PER_ENDPOINT = 10;
const MAX_WAITING_PER_ENDPOINT = 95;
const TURN_WAIT_BUDGET_MS = 5_000;
/** POSTs in flight at once per instance, all endpoints together. */
const MAX_SENDING = 50;
/**
 * Runner slots for deliveries: several times the POSTs in flight, so the next batches are claimed and loaded while
 * others post and settle, and the senders do not wait on the database. One endpoint holds at most 100 of them (in
 * flight and waiting), a slow one 15, so the others keep flowing.
 */
const DELIVERY_CONCURRENCY = 4 * MAX_SENDING;
/**
 * Deliveries handed over together (a claim of 200 runs as 8 batches): each batch costs 4 statements whatever its
 * size (claim, load, record, delete), and batches settle one by one, so the slowest delivery of a batch holds only
 * its own batch's slots. 25 measured best in bench/webhook-drain.ts (10: more statements; 50: fewer batches in turn).
 */
const DELIVERY_BATCH_SIZE = 25;
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

/** What one attempt needs of a delivery, its endpoint and its event. */
interface DeliveryToSend {
  id: bigint;
  status: string;
  attempts: number;
  mode: Mode;
  endpoint: Pick<WebhookEndpoint, "id" | "merchantId" | "mode" | "url" | "enabled" | "failingSince" | "secretEncrypted" | "previousSecretEncrypted" | "previousSecretExpiresAt">;
  event: { id: bigint; type: string; createdAt: Date; payload: unknown };
}

/** A delivery the receiver acknowledged, for the batch's one recording statement. */
interface Succeeded {
  succeeded: true;
  delivery: DeliveryToSend;
  attempts: number;
  statusCode: number | null;
  latencyMs: number;
  at: Date;
}

interface DeliveryRow {
  id: string;
  status: string;
  attempts: number;
  mode: Mode;
  endpoint_id: number;
  merchant_id: number;
  endpoint_mode: Mode;
  url: string;
  enabled: boolean;
  failing_since: Date | string | null;
  secret_encrypted: string;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: Date | string | null;
  event_id: string;
  type: string;
  event_created_at: Date | string;
  payload: unknown;
}

/** A batch's deliveries with their endpoints and events, only the columns an attempt needs (int8 as text: drivers differ). */
const LOAD_DELIVERIES = `SELECT d.id::text AS id, d.status::text AS status, d.attempts, d.mode::text AS mode,
    ep.id AS endpoint_id, ep.merchant_id, ep.mode::text AS endpoint_mode, ep.url, ep.enabled, ep.failing_since,
    ep.secret_encrypted, ep.previous_secret_encrypted, ep.previous_secret_expires_at,
    ev.id::text AS event_id, ev.type, ev.created_at AS event_created_at, ev.payload
  FROM webhook_deliveries d
  JOIN webhook_endpoints ep ON ep.id = d.endpoint_id
  JOIN events ev ON ev.id = d.event_id
  WHERE d.id = ANY($1::bigint[])`;

/** The batch's successes in one statement; only pending rows, so a delivery is marked succeeded once. */
const RECORD_SUCCESSES = `UPDATE webhook_deliveries d SET status = 'succeeded', attempts = s.attempts, last_status_code = s.status_code,
    last_latency_ms = s.latency_ms, last_error = NULL, delivered_at = s.at, next_attempt_at = NULL, updated_at = s.at
  FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::timestamptz[]) AS s(id, attempts, status_code, latency_ms, at)
  WHERE d.id = s.id AND d.status = 'pending'`;

const time = (value: Date | string) => (value instanceof Date ? value : new Date(value));

function deliveryFromRow(row: DeliveryRow): DeliveryToSend {
  return {
    id: BigInt(row.id),
    status: row.status,
    attempts: row.attempts,
    mode: row.mode,
    endpoint: {
      id: row.endpoint_id,
      merchantId: row.merchant_id,
      mode: row.endpoint_mode,
      url: row.url,
      enabled: row.enabled,
      failingSince: row.failing_since === null ? null : time(row.failing_since),
      secretEncrypted: row.secret_encrypted,
      previousSecretEncrypted: row.previous_secret_encrypted,
      previousSecretExpiresAt: row.previous_secret_expires_at === null ? null : time(row.previous_secret_expires_at),
    },
    event: { id: BigInt(row.event_id), type: row.type, createdAt: time(row.event_created_at), payload: row.payload },
  };
}

export function createWebhookService(deps: {
  prisma: PrismaClient;
  /** Plain SQL on the same database, for the delivery batch's statements. */
  sql: Sql;
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
  /** Per endpoint with deliveries here: in flight and waiting. */
  const slots = new Map<number, { inFlight: number; waiting: { resolve: (turn: boolean) => void; since: number }[] }>();
  /** Per endpoint this instance has posted to, its recent latency (a moving average), kept while its queue is empty. */
  const latencies = new Map<number, number>();

  function waitingAllowed(latencyMs: number | undefined, alone: boolean): number {
    if (latencyMs === undefined) return MIN_WAITING_PER_ENDPOINT;
    const withinBudget = Math.floor((MAX_IN_FLIGHT_PER_ENDPOINT * TURN_WAIT_BUDGET_MS) / Math.max(1, latencyMs));
    const cap = alone ? DELIVERY_CONCURRENCY - MAX_IN_FLIGHT_PER_ENDPOINT : MAX_WAITING_PER_ENDPOINT;
    return Math.min(cap, Math.max(MIN_WAITING_PER_ENDPOINT, withinBudget));
  }

  function noteLatency(endpointId: number, latencyMs: number) {
    const previous = latencies.get(endpointId);
    latencies.set(endpointId, previous === undefined ? latencyMs : 0.8 * previous + 0.2 * latencyMs);
  }

  /**
   * A turn to send to this endpoint: now, after a local wait, or false when too many already wait or the wait ran
   * past TURN_WAIT_BUDGET_MS (the endpoint slowed down after they queued): the job is deferred, well inside its lease.
   */
  async function takeTurn(endpointId: number): Promise<boolean> {
    let slot = slots.get(endpointId);
    if (!slot) slots.set(endpointId, (slot = { inFlight: 0, waiting: [] }));
    if (slot.inFlight < MAX_IN_FLIGHT_PER_ENDPOINT) {
      slot.inFlight++;
      return true;
    }
    if (slot.waiting.length >= waitingAllowed(latencies.get(endpointId), slots.size === 1)) return false;
    return new Promise<boolean>((resolve) => slot.waiting.push({ resolve, since: performance.now() }));
  }

  /** Hands the turn to the next waiting delivery, if any; those that waited too long are deferred. */
  function endTurn(endpointId: number) {
    const slot = slots.get(endpointId);
    if (!slot) return;
    const now = performance.now();
    while (slot.waiting.length && now - slot.waiting[0]!.since > TURN_WAIT_BUDGET_MS) slot.waiting.shift()!.resolve(false);
    const next = slot.waiting.shift();
    if (next) return next.resolve(true);
    slot.inFlight--;
    if (slot.inFlight === 0) slots.delete(endpointId);
  }

  /** The instance-wide limit on POSTs in flight, taken after the endpoint's turn (so no cycle of waits). */
  let sending = 0;
  const waitingToSend: (() => void)[] = [];
  async function takeSendSlot(): Promise<void> {
    if (sending < MAX_SENDING) {
      sending++;
      return;
    }
    await new Promise<void>((resolve) => waitingToSend.push(resolve));
  }
  function endSendSlot() {
    const next = waitingToSend.shift();
    if (next) next();
    else sending--;
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
  function signingSecrets(endpoint: Pick<WebhookEndpoint, "secretEncrypted" | "previousSecretEncrypted" | "previousSecretExpiresAt">, now: Date): string[] {
    const current = secrets.decrypt(endpoint.secretEncrypted);
    const previousValid = endpoint.previousSecretEncrypted && endpoint.previousSecretExpiresAt && endpoint.previousSecretExpiresAt > now;
    return previousValid ? [current, secrets.decrypt(endpoint.previousSecretEncrypted!)] : [current];
  }

  /** The signing secrets of an endpoint, decrypted once per batch (a batch's deliveries to one endpoint share them). */
  function secretsCache(now: Date) {
    const cache = new Map<number, string[]>();
    return (endpoint: DeliveryToSend["endpoint"]) => {
      let found = cache.get(endpoint.id);
      if (!found) cache.set(endpoint.id, (found = signingSecrets(endpoint, now)));
      return found;
    };
  }

  /**
   * One attempt of one delivery: a success comes back as what to record (the batch records them all in one
   * statement); anything else is settled here, one delivery at a time, as it is rare (disabled endpoint, a
   * failure and its retry, giving up, no turn free).
   */
  async function attempt(delivery: DeliveryToSend, secretsOf: (endpoint: DeliveryToSend["endpoint"]) => string[]): Promise<JobOutcome | Succeeded> {
    const { endpoint, event } = delivery;
    if (!endpoint.enabled) {
      await prisma.webhookDelivery.update({ where: { id: delivery.id }, data: { status: "failed", lastError: "endpoint disabled", nextAttemptAt: null } });
      return;
    }
    if (!(await takeTurn(endpoint.id))) return { retryInMs: 200 + Math.round(Math.random() * 200), countAttempt: false };
    const now = new Date();
    let result;
    try {
      await takeSendSlot();
      try {
        const body = webhookBody(event);
        const headers = webhookHeaders({ id: event.id.toString(), timestamp: Math.floor(Date.now() / 1000), body, secrets: secretsOf(endpoint) });
        result = await merchantUrls.post(endpoint.mode, endpoint.url, body, config.timeoutMs, headers);
        noteLatency(endpoint.id, result.latencyMs);
      } finally {
        endSendSlot();
      }
    } finally {
      endTurn(endpoint.id);
    }
    const attempts = delivery.attempts + 1;
    if (result.ok) return { succeeded: true, delivery, attempts, statusCode: result.statusCode, latencyMs: result.latencyMs, at: new Date() };
    const outcome = { attempts, lastStatusCode: result.statusCode, lastLatencyMs: result.latencyMs, lastError: result.error };
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

  /**
   * A batch of delivery jobs (the runner's claim): one statement loads them with their endpoints and events, each
   * is posted (at most 5 at once per endpoint, across batches), one statement records the successes, and the
   * runner deletes their jobs in one more. A crash before that leaves the jobs to be claimed again when their
   * lease ends: the event goes out again with the same webhook-id (at-least-once; receivers dedupe on it).
   */
  async function deliverBatch(jobs: BatchJob<{ deliveryId: number }>[]): Promise<BatchOutcome[]> {
    const rows = await deps.sql.query<DeliveryRow>(LOAD_DELIVERIES, [jobs.map((j) => String(j.payload.deliveryId))]);
    const byId = new Map(rows.map((row) => [row.id, deliveryFromRow(row)]));
    const secretsOf = secretsCache(new Date());
    const results = await Promise.all(
      jobs.map(async ({ payload }): Promise<JobOutcome | Succeeded | Error> => {
        const delivery = byId.get(String(payload.deliveryId));
        // Gone (its endpoint deleted) or no longer pending (a resend's new round owns it): nothing to do.
        if (!delivery || delivery.status !== "pending") return;
        try {
          return await attempt(delivery, secretsOf);
        } catch (error) {
          return error instanceof Error ? error : new Error(String(error));
        }
      }),
    );
    const succeeded = results.filter((r): r is Succeeded => !!r && "succeeded" in r);
    if (succeeded.length) {
      try {
        await deps.sql.query(RECORD_SUCCESSES, [
          succeeded.map((s) => String(s.delivery.id)),
          succeeded.map((s) => s.attempts),
          succeeded.map((s) => s.statusCode),
          succeeded.map((s) => s.latencyMs),
          succeeded.map((s) => s.at.toISOString()),
        ]);
      } catch (error) {
        // Sent but not recorded: their jobs run again (at-least-once), as after a crash.
        const failed = error instanceof Error ? error : new Error(String(error));
        return results.map((r) => (r && "succeeded" in r ? failed : r));
      }
      for (const s of succeeded) deps.onAttempt?.("succeeded", s.delivery.event.createdAt);
      const recovered = [...new Set(succeeded.filter((s) => s.delivery.endpoint.failingSince).map((s) => s.delivery.endpoint.id))];
      if (recovered.length) await prisma.webhookEndpoint.updateMany({ where: { id: { in: recovered } }, data: { failingSince: null } });
    }
    return results.map((r) => (r && "succeeded" in r ? undefined : r));
  }

  deps.jobs.register<{ deliveryId: number }>({ kind: WEBHOOK_DELIVERY_JOB, concurrency: DELIVERY_CONCURRENCY, batchSize: DELIVERY_BATCH_SIZE, runBatch: deliverBatch });

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
