import { scopeOf, type Principal } from "../../auth.ts";
import type { Db, PrismaClient } from "../../db/database.ts";
import { Prisma, type Event, type Mode, type WebhookDelivery, type WebhookEndpoint } from "../../db/generated/prisma/client.ts";
import type { Sql } from "../../db/sql.ts";
import { enqueueCte } from "../../jobs/store.ts";

/**
 * Every statement on webhook_endpoints and webhook_deliveries: Prisma for the endpoints' commands and the
 * lists, plain SQL for the fan-out (a part of the statement that records an event) and the delivery batch's
 * load and record (one statement each, whatever the batch's size).
 */

export const WEBHOOK_DELIVERY_JOB = "webhook.deliver";

// ---- The fan-out, with the event ----

/**
 * The fan-out as CTEs over a CTE named `ev` (id, merchant_id, mode, type) of the event just recorded: one
 * delivery (and its job) per enabled endpoint of the event's merchant and mode that subscribes to its type.
 * `delivery_jobs` has a row per delivery queued. Part of the statement or transaction that records the
 * event, so an event that never committed is never sent; events with no endpoints cost one index probe.
 */
export const WEBHOOK_FAN_OUT_CTES = `endpoints AS (
  SELECT ep.id AS endpoint_id, ev.id AS event_id, ev.merchant_id, ev.mode FROM ev
  JOIN webhook_endpoints ep ON ep.merchant_id = ev.merchant_id AND ep.mode = ev.mode
  WHERE ep.enabled AND (cardinality(ep.events) = 0 OR ev.type = ANY(ep.events))
), deliveries AS (
  INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, mode)
  SELECT endpoint_id, event_id, merchant_id, mode FROM endpoints
  ON CONFLICT (endpoint_id, event_id) DO NOTHING
  RETURNING id
), ${enqueueCte("delivery_jobs", WEBHOOK_DELIVERY_JOB, { from: "deliveries", payload: { deliveryId: "id" } })}`;

// ---- Endpoints ----

export function countEndpoints(db: Db, principal: Principal): Promise<number> {
  return db.webhookEndpoint.count({ where: scopeOf(principal) });
}

export function insertEndpoint(db: Db, data: Prisma.WebhookEndpointUncheckedCreateInput): Promise<WebhookEndpoint> {
  return db.webhookEndpoint.create({ data });
}

export function listEndpoints(db: Db, principal: Principal): Promise<WebhookEndpoint[]> {
  return db.webhookEndpoint.findMany({ where: scopeOf(principal), orderBy: { id: "asc" } });
}

/** The caller's endpoint, in its merchant and mode only. */
export function findEndpoint(db: Db, principal: Principal, id: number): Promise<WebhookEndpoint | null> {
  return db.webhookEndpoint.findFirst({ where: { id, ...scopeOf(principal) } });
}

/** The caller's enabled endpoints that subscribe to `type` (no events listed: all of them). */
export async function subscribedEndpoints(db: Db, principal: Principal, type: string): Promise<WebhookEndpoint[]> {
  const enabled = await db.webhookEndpoint.findMany({ where: { ...scopeOf(principal), enabled: true } });
  return enabled.filter((e) => e.events.length === 0 || e.events.includes(type));
}

export function updateEndpoint(db: Db, id: number, data: Prisma.WebhookEndpointUncheckedUpdateInput): Promise<WebhookEndpoint> {
  return db.webhookEndpoint.update({ where: { id }, data });
}

/** Its deliveries go with it (ON DELETE CASCADE). */
export async function deleteEndpoint(db: Db, id: number): Promise<void> {
  await db.webhookEndpoint.delete({ where: { id } });
}

/** The endpoint's first failure since it last succeeded starts its failure clock; a later one keeps it. */
export async function markFailing(db: Db, id: number, since: Date): Promise<void> {
  await db.webhookEndpoint.updateMany({ where: { id, failingSince: null }, data: { failingSince: since } });
}

/** Disables an enabled endpoint; false when it was not enabled (another instance disabled it first). */
export async function disableEndpoint(db: Db, id: number, disabledReason: string): Promise<boolean> {
  const { count } = await db.webhookEndpoint.updateMany({ where: { id, enabled: true }, data: { enabled: false, disabledReason } });
  return count === 1;
}

/** A success stops the failure clock of these endpoints. */
export async function clearFailing(db: Db, ids: number[]): Promise<void> {
  await db.webhookEndpoint.updateMany({ where: { id: { in: ids } }, data: { failingSince: null } });
}

// ---- Deliveries ----

/** What one attempt needs of a delivery, its endpoint and its event. */
export interface DeliveryToSend {
  id: bigint;
  status: string;
  attempts: number;
  mode: Mode;
  endpoint: Pick<WebhookEndpoint, "id" | "merchantId" | "mode" | "url" | "enabled" | "allowLocalUrls" | "failingSince" | "secretEncrypted" | "previousSecretEncrypted" | "previousSecretExpiresAt">;
  event: { id: bigint; type: string; createdAt: Date; payload: unknown };
}

/** A delivery the receiver acknowledged, for the batch's one recording statement. */
export interface DeliverySuccess {
  delivery: DeliveryToSend;
  attempts: number;
  statusCode: number | null;
  latencyMs: number;
  at: Date;
  /** The answer's excerpt and kept headers (see exchange.ts). */
  body: string | null;
  headers: Record<string, string> | null;
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
  allow_local_urls: boolean;
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
    ep.id AS endpoint_id, ep.merchant_id, ep.mode::text AS endpoint_mode, ep.url, ep.enabled, ep.allow_local_urls, ep.failing_since,
    ep.secret_encrypted, ep.previous_secret_encrypted, ep.previous_secret_expires_at,
    ev.id::text AS event_id, ev.type, ev.created_at AS event_created_at, ev.payload
  FROM webhook_deliveries d
  JOIN webhook_endpoints ep ON ep.id = d.endpoint_id
  JOIN events ev ON ev.id = d.event_id
  WHERE d.id = ANY($1::bigint[])`;

/** The batch's successes in one statement; only pending rows, so a delivery is marked succeeded once. */
const RECORD_SUCCESSES = `UPDATE webhook_deliveries d SET status = 'succeeded', attempts = s.attempts, last_status_code = s.status_code,
    last_latency_ms = s.latency_ms, last_error = NULL, delivered_at = s.at, next_attempt_at = NULL, updated_at = s.at,
    last_response_body = s.response_body, last_response_headers = s.response_headers::jsonb
  FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::timestamptz[], $6::text[], $7::text[])
    AS s(id, attempts, status_code, latency_ms, at, response_body, response_headers)
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
      allowLocalUrls: row.allow_local_urls,
      failingSince: row.failing_since === null ? null : time(row.failing_since),
      secretEncrypted: row.secret_encrypted,
      previousSecretEncrypted: row.previous_secret_encrypted,
      previousSecretExpiresAt: row.previous_secret_expires_at === null ? null : time(row.previous_secret_expires_at),
    },
    event: { id: BigInt(row.event_id), type: row.type, createdAt: time(row.event_created_at), payload: row.payload },
  };
}

/** The deliveries of a batch by id (as text); one that is gone (its endpoint deleted) is absent. */
export async function loadDeliveries(sql: Sql, ids: string[]): Promise<Map<string, DeliveryToSend>> {
  const rows = await sql.query<DeliveryRow>(LOAD_DELIVERIES, [ids]);
  return new Map(rows.map((row) => [row.id, deliveryFromRow(row)]));
}

export async function recordSuccesses(sql: Sql, successes: DeliverySuccess[]): Promise<void> {
  await sql.query(RECORD_SUCCESSES, [
    successes.map((s) => String(s.delivery.id)),
    successes.map((s) => s.attempts),
    successes.map((s) => s.statusCode),
    successes.map((s) => s.latencyMs),
    successes.map((s) => s.at.toISOString()),
    successes.map((s) => s.body),
    successes.map((s) => (s.headers ? JSON.stringify(s.headers) : null)),
  ]);
}

/** A failed attempt's outcome (and the next attempt's time, or none when it gave up), one delivery at a time. */
export async function recordFailure(db: Db, id: bigint, data: Prisma.WebhookDeliveryUncheckedUpdateInput): Promise<void> {
  await db.webhookDelivery.update({ where: { id }, data });
}

export type DeliveryQuery = { include?: Prisma.WebhookDeliveryInclude; select?: Prisma.WebhookDeliverySelect };

/** The caller's deliveries, newest first, optionally of one endpoint or one event. */
export function listDeliveries(
  db: Db,
  principal: Principal,
  filters: { endpointId: number | null; eventId: bigint | null; limit: number },
  query: DeliveryQuery = {},
): Promise<WebhookDelivery[]> {
  return db.webhookDelivery.findMany({
    ...query,
    where: {
      ...scopeOf(principal),
      ...(filters.endpointId !== null ? { endpointId: filters.endpointId } : {}),
      ...(filters.eventId !== null ? { eventId: filters.eventId } : {}),
    },
    orderBy: { id: "desc" },
    take: filters.limit,
  });
}

/**
 * The latest delivery of the merchant's mode that an enabled endpoint answered with a 2xx since `since` (the go-live
 * checklist's proof that an endpoint works), with its endpoint's URL; null when none. Walks the (merchant, mode, id)
 * index newest first, so it stops at the first success.
 */
export function latestSuccessfulDelivery(db: Db, principal: Principal, since: Date) {
  return db.webhookDelivery.findFirst({
    where: { ...scopeOf(principal), status: "succeeded", deliveredAt: { gte: since }, endpoint: { enabled: true } },
    orderBy: { id: "desc" },
    select: { deliveredAt: true, lastStatusCode: true, endpoint: { select: { id: true, url: true } } },
  });
}

/** The caller's event a resend names (the events table, read here for the resend alone). */
export function findEvent(db: PrismaClient, principal: Principal, id: bigint): Promise<Event | null> {
  return db.event.findFirst({ where: { id, ...scopeOf(principal) } });
}

/** A delivery of the event to each endpoint, created or started afresh (a new round of attempts), in the caller's transaction. */
export async function restartDeliveries(tx: Prisma.TransactionClient, principal: Principal, endpointIds: number[], eventId: bigint): Promise<WebhookDelivery[]> {
  const rows = [];
  for (const endpointId of endpointIds) {
    const reset = { status: "pending" as const, attempts: 0, nextAttemptAt: new Date(), lastError: null, lastStatusCode: null, lastResponseBody: null, lastResponseHeaders: Prisma.DbNull };
    rows.push(
      await tx.webhookDelivery.upsert({
        where: { endpointId_eventId: { endpointId, eventId } },
        create: { endpointId, eventId, ...scopeOf(principal) },
        update: reset,
      }),
    );
  }
  return rows;
}
