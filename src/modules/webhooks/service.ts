import type { WebhookConfig } from "../../config.ts";
import type { PrismaClient, Reader } from "../../db/database.ts";
import type { Sql } from "../../db/sql.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import type { Logger } from "../../logger.ts";
import type { SecretBox } from "../../security/encryption.ts";
import type { MerchantUrls } from "../../security/outbound.ts";
import { createDeliveries } from "./deliveries.ts";
import { webhookDeliveryJob } from "./dispatch.ts";
import { createEndpoints } from "./endpoints.ts";

export type { EndpointInput } from "./endpoints.ts";
export type { DeliveryFilters } from "./deliveries.ts";

/**
 * Outgoing webhooks, assembled from their parts:
 *
 *   endpoints.ts   a merchant's endpoints: create, update, delete, rotate the signing secret
 *   deliveries.ts  the deliveries list, and sending an event again
 *   dispatch.ts    the delivery job: post, sign, settle, retry, disable a failing endpoint (turns.ts: who posts now)
 *   store.ts       every statement on webhook_endpoints and webhook_deliveries, the fan-out with each event included
 */
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
  const { prisma, jobs } = deps;
  jobs.register(webhookDeliveryJob({ ...deps, nudge: () => jobs.nudge() }));
  const endpoints = createEndpoints(deps);
  const deliveries = createDeliveries({ prisma, reader: deps.read?.prisma ?? prisma, jobs, endpoints });
  return { ...endpoints, ...deliveries };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
