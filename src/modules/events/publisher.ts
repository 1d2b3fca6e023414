import { createRedisEventTarget } from "@graphql-yoga/redis-event-target";
import { createPubSub } from "graphql-yoga";
import type { Mode } from "../../db/generated/prisma/enums.ts";
import type { RedisConnections } from "../../infra/redis.ts";

/** A committed status change, as subscriptions and webhooks receive it. JSON-safe: it may cross Redis. */
export interface PublishedEvent {
  id: string;
  type: string;
  merchantId: number;
  mode: Mode;
  transactionId: number | null;
  payoutId: number | null;
  /** Set on refund events. */
  refundId?: number | null;
  /** Set on dispute events. */
  disputeId?: number | null;
  /** ISO 8601 UTC. */
  createdAt: string;
  payload: unknown;
}

/**
 * Delivers committed events (never a rolled-back change) to subscribers of the event's merchant and
 * mode: in memory, or through Redis when REDIS_URL is set, so a change on instance A reaches
 * subscribers on instance B. One topic per merchant and mode keeps tenants and modes apart.
 */
export interface EventPublisher {
  publish(event: PublishedEvent): void;
  /** Events of one merchant and mode from every instance; `return()` unsubscribes. */
  subscribe(merchantId: number, mode: Mode): AsyncIterableIterator<PublishedEvent>;
  /**
   * Resolves once every subscribe() of this merchant and mode whose first next() was called before is listening:
   * an event published from then on (on any instance) reaches it. With Redis that is the SUBSCRIBE's reply.
   */
  listening(merchantId: number, mode: Mode): Promise<void>;
}

const topic = (merchantId: number, mode: Mode) => `${merchantId}:${mode}`;

export function createEventPublisher(redis?: RedisConnections): EventPublisher {
  const subscriber = redis?.client("pubsub-subscribe");
  const eventTarget = redis
    ? createRedisEventTarget({ publishClient: redis.client("pubsub-publish"), subscribeClient: subscriber! })
    : undefined;
  const pubsub = createPubSub<{ "transaction-events": [id: string, event: PublishedEvent] }>(eventTarget ? { eventTarget } : {});
  return {
    publish(event) {
      pubsub.publish("transaction-events", topic(event.merchantId, event.mode), event);
    },
    subscribe(merchantId, mode) {
      return pubsub.subscribe("transaction-events", topic(merchantId, mode)) as AsyncIterableIterator<PublishedEvent>;
    },
    async listening(merchantId, mode) {
      // The event target sent its SUBSCRIBE (unawaited) when the stream started; one connection answers in order,
      // so the reply to this repeated SUBSCRIBE (a no-op for Redis) comes after that one's.
      if (subscriber) await subscriber.subscribe(`transaction-events:${topic(merchantId, mode)}`);
    },
  };
}
