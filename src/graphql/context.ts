import type { Principal } from "../auth.ts";
import type { PrismaClient } from "../db/database.ts";
import type { Logger } from "../logger.ts";
import type { Services } from "../services.ts";

export interface GraphQLContext {
  /** Null only for requests that never reach a resolver (rejected at the transport). */
  principal: Principal | null;
  prisma: PrismaClient;
  services: Services;
  /** Aborted when the server shuts down: open subscriptions end so connections close cleanly. */
  shutdownSignal: AbortSignal;
  /** The request's logger (it carries the request id); the root logger for a shared subscription stream. */
  log: Logger;
}
