import type { WebhookConfig } from "../../config.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Sql } from "../../db/sql.ts";
import type { BatchJob, BatchJobDefinition, BatchOutcome, JobOutcome } from "../../jobs/runner.ts";
import type { Logger } from "../../logger.ts";
import type { SecretBox } from "../../security/encryption.ts";
import type { MerchantUrls, OutboundResult } from "../../security/outbound.ts";
import { Prisma } from "../../db/generated/prisma/client.ts";
import { RESPONSE_READ_BYTES, responseExcerpt, responseHeaders } from "./exchange.ts";
import { webhookBody } from "./payload.ts";
import { webhookHeaders } from "./signing.ts";
import * as store from "./store.ts";
import { insertNotices } from "../mail/store.ts";
import type { DeliveryToSend, DeliverySuccess } from "./store.ts";
import { createPostingTurns, DELIVERY_CONCURRENCY } from "./turns.ts";

/**
 * Deliveries handed over together (a claim of 200 runs as 8 batches): each batch costs 4 statements whatever its
 * size (claim, load, record, delete), and batches settle one by one, so the slowest delivery of a batch holds only
 * its own batch's slots. 25 measured best in bench/webhook-drain.ts (10: more statements; 50: fewer batches in turn).
 */
const DELIVERY_BATCH_SIZE = 25;
/** An endpoint that has failed every attempt for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

/** ±10 % so endpoints that failed together do not retry together. */
const withJitter = (ms: number) => Math.round(ms * (0.9 + Math.random() * 0.2));

/** What is kept of an endpoint's answer (nothing when there was none: no status). */
const answerOf = (result: OutboundResult) =>
  result.statusCode === null ? { body: null, headers: null } : { body: responseExcerpt(result.body), headers: responseHeaders(result.headers) };

type Succeeded = DeliverySuccess & { succeeded: true };
const isSuccess = (r: JobOutcome | Succeeded | Error): r is Succeeded => !!r && "succeeded" in r;

export interface DispatchDeps {
  prisma: PrismaClient;
  /** Plain SQL on the same database, for the delivery batch's statements. */
  sql: Sql;
  secrets: SecretBox;
  config: WebhookConfig;
  /** The URL guard and outbound-HTTP rule shared with every other merchant URL. */
  merchantUrls: MerchantUrls;
  logger: Logger;
  /** Told of every delivery attempt's outcome (metrics). */
  onAttempt?: (outcome: "succeeded" | "retrying" | "failed", eventCreatedAt?: Date) => void;
  /** Starts the job runner on work just queued (the notice of a disabled endpoint). */
  nudge?: () => void;
}

/**
 * The delivery job: posts each pending delivery to its endpoint, signed, and settles it: a success is recorded
 * with its batch, a failure is retried on the mode's schedule until it gives up, and an endpoint that fails
 * every attempt for 5 days is disabled.
 */
export function webhookDeliveryJob(deps: DispatchDeps): BatchJobDefinition<{ deliveryId: number }> {
  const { prisma, secrets, config, logger, merchantUrls } = deps;
  const turns = createPostingTurns();

  /** The secrets that sign now: the current one, and the previous one for a day after a rotation. */
  function signingSecrets(endpoint: DeliveryToSend["endpoint"], now: Date): string[] {
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
   * A failed attempt: the endpoint's failure clock starts (or it is disabled once it has run 5 days), and the
   * delivery is retried on its mode's schedule, or given up when that is spent or the endpoint is disabled.
   */
  async function settleFailure(delivery: DeliveryToSend, attempts: number, now: Date, result: OutboundResult): Promise<JobOutcome> {
    const { endpoint } = delivery;
    const answer = answerOf(result);
    const outcome = {
      attempts,
      lastStatusCode: result.statusCode,
      lastLatencyMs: result.latencyMs,
      lastError: result.error,
      lastResponseBody: answer.body,
      lastResponseHeaders: answer.headers ?? Prisma.DbNull,
    };
    const failingSince = endpoint.failingSince ?? now;
    if (!endpoint.failingSince) await store.markFailing(prisma, endpoint.id, now);
    const schedule = config.retrySchedule[delivery.mode];
    const failingTooLong = now.getTime() - failingSince.getTime() >= DISABLE_AFTER_MS;
    if (failingTooLong) {
      const reason = `Disabled on ${now.toISOString()}: every delivery attempt failed for 5 days (last: ${result.error})`;
      // The team hears of it once (a notice per member who wants it), in the transaction that disables it.
      const notified = await prisma.$transaction(async (tx) =>
        (await store.disableEndpoint(tx, endpoint.id, reason))
          ? insertNotices(tx, { merchantId: endpoint.merchantId, mode: endpoint.mode, kind: "webhook_disabled", keyPrefix: `webhook_disabled:${endpoint.id}:${failingSince.toISOString()}`, facts: { url: endpoint.url, reason } })
          : 0,
      );
      if (notified > 0) deps.nudge?.();
      logger.warn({ endpointId: endpoint.id, merchantId: endpoint.merchantId }, "webhook endpoint disabled after failing for 5 days");
    }
    if (failingTooLong || attempts >= schedule.length) {
      await store.recordFailure(prisma, delivery.id, { ...outcome, status: "failed", nextAttemptAt: null });
      deps.onAttempt?.("failed");
      return;
    }
    const retryInMs = withJitter(schedule[attempts]!);
    await store.recordFailure(prisma, delivery.id, { ...outcome, nextAttemptAt: new Date(Date.now() + retryInMs) });
    deps.onAttempt?.("retrying");
    return { retryInMs, error: result.error ?? undefined };
  }

  /**
   * One attempt of one delivery: a success comes back as what to record (the batch records them all in one
   * statement); anything else is settled here, one delivery at a time, as it is rare (disabled endpoint, a
   * failure and its retry, giving up, no turn free).
   */
  async function attempt(delivery: DeliveryToSend, secretsOf: (endpoint: DeliveryToSend["endpoint"]) => string[]): Promise<JobOutcome | Succeeded> {
    const { endpoint, event } = delivery;
    if (!endpoint.enabled) {
      await store.recordFailure(prisma, delivery.id, { status: "failed", lastError: "endpoint disabled", nextAttemptAt: null });
      return;
    }
    let now = new Date();
    const result = await turns.inTurn(endpoint.id, () => {
      now = new Date();
      const body = webhookBody(event);
      const headers = webhookHeaders({ id: event.id.toString(), timestamp: Math.floor(Date.now() / 1000), body, secrets: secretsOf(endpoint) });
      return merchantUrls.post(endpoint.mode, endpoint.url, body, config.timeoutMs, headers, endpoint.allowLocalUrls, RESPONSE_READ_BYTES);
    });
    if (!result) return { retryInMs: turns.deferMs(endpoint.id), countAttempt: false };
    const attempts = delivery.attempts + 1;
    if (result.ok) return { succeeded: true, delivery, attempts, statusCode: result.statusCode, latencyMs: result.latencyMs, at: new Date(), ...answerOf(result) };
    return settleFailure(delivery, attempts, now, result);
  }

  /**
   * A batch of delivery jobs (the runner's claim): one statement loads them with their endpoints and events, each
   * is posted (at most 5 at once per endpoint, across batches), one statement records the successes, and the
   * runner deletes their jobs in one more. A crash before that leaves the jobs to be claimed again when their
   * lease ends: the event goes out again with the same webhook-id (at-least-once; receivers dedupe on it).
   */
  async function deliverBatch(jobs: BatchJob<{ deliveryId: number }>[]): Promise<BatchOutcome[]> {
    const byId = await store.loadDeliveries(deps.sql, jobs.map((j) => String(j.payload.deliveryId)));
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
    const succeeded = results.filter(isSuccess);
    if (succeeded.length) {
      try {
        await store.recordSuccesses(deps.sql, succeeded);
      } catch (error) {
        // Sent but not recorded: their jobs run again (at-least-once), as after a crash.
        const failed = error instanceof Error ? error : new Error(String(error));
        return results.map((r) => (isSuccess(r) ? failed : r));
      }
      for (const s of succeeded) deps.onAttempt?.("succeeded", s.delivery.event.createdAt);
      const recovered = [...new Set(succeeded.filter((s) => s.delivery.endpoint.failingSince).map((s) => s.delivery.endpoint.id))];
      if (recovered.length) await store.clearFailing(prisma, recovered);
    }
    return results.map((r) => (isSuccess(r) ? undefined : r));
  }

  // A delivery waits on the merchant's server: while the API is busy, deliveries are started at the busy share's pace,
  // and a slow endpoint's posts in flight hold only their own slots, not the whole share (bench/webhooks.ts).
  return { kind: store.WEBHOOK_DELIVERY_JOB, concurrency: DELIVERY_CONCURRENCY, batchSize: DELIVERY_BATCH_SIZE, waitsOnNetwork: true, runBatch: deliverBatch };
}
