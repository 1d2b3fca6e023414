import type { FastifyInstance } from "fastify";
import type { Database } from "../db/database.ts";
import type { RedisConnections } from "../infra/redis.ts";
import type { Services } from "../services.ts";

/** What a gateway closes, in this order, after its port. */
export interface GatewayResources {
  app: FastifyInstance;
  services: Services;
  /** The CLI's socket (embedded database only) and the metrics port, when there is one. */
  listeners: ({ close(): Promise<void> } | undefined)[];
  redis: RedisConnections | undefined;
  db: Database;
}

/**
 * A gateway's way out, each step once: drain (SIGTERM's first step: /ready answers 503, every response closes its
 * connection, no more jobs are claimed), then close.
 */
export function createLifecycle() {
  // Aborted first on close: open subscriptions end, so WebSocket and SSE connections close cleanly.
  const shutdown = new AbortController();
  let draining = false;
  let jobsStopped: Promise<void> | undefined;
  let closing: Promise<void> | undefined;
  return {
    shutdownSignal: shutdown.signal,
    isDraining: () => draining,
    /** Jobs still running at `releaseJobsAt` (epoch ms) go back to the queue. */
    drain(services: Services, releaseJobsAt?: number): void {
      draining = true;
      jobsStopped ??= services.jobs.stop({ releaseAt: releaseJobsAt });
    },
    /** Closes WebSockets (1001), stops accepting connections, lets in-flight requests finish, then closes the rest. */
    close({ app, services, listeners, redis, db }: GatewayResources): Promise<void> {
      closing ??= (async () => {
        // 1001 Going Away before the subscriptions end: clients see a dropped connection (and reconnect and
        // resubscribe, through the balancer to another instance), not subscriptions that completed.
        for (const socket of app.websocketServer?.clients ?? []) socket.close(1001, "server shutting down");
        shutdown.abort();
        await app.close();
        for (const listener of listeners) await listener?.close();
        await (jobsStopped ?? services.jobs.stop());
        // Provider calls recorded by the last requests and jobs are written before the database closes.
        await services.providerCalls.flush();
        services.momo.close();
        services.mail.close();
        await redis?.close();
        await db.close();
      })();
      return closing;
    },
  };
}
