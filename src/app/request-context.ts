import type { FastifyReply, FastifyRequest } from "fastify";
import { credentialFrom, type Authenticator, type Principal } from "../auth.ts";
import type { PrismaClient } from "../db/database.ts";
import type { GraphQLContext } from "../graphql/context.ts";
import { LiveConnections } from "../graphql/live-connections.ts";
import type { IdempotencyHooks } from "../idempotency/hooks.ts";
import type { Logger } from "../logger.ts";
import type { Services } from "../services.ts";

/**
 * What every operation runs with, over GraphQL (HTTP, SSE, WebSocket) and REST alike: the caller, the services,
 * the request's log and a signal that ends it. `live` holds the long-lived ones (sockets, SSE streams) by principal.
 */
export function createRequestContexts(deps: {
  prisma: PrismaClient;
  services: Services;
  authenticator: Authenticator;
  idempotency: IdempotencyHooks;
  /** The server's: aborted first on close, so open subscriptions end and WebSocket and SSE connections close cleanly. */
  shutdownSignal: AbortSignal;
  logger: Logger;
}) {
  const { prisma, services, authenticator, idempotency, shutdownSignal, logger } = deps;
  const contextFor = (principal: Principal | null, log: Logger, signal: AbortSignal = shutdownSignal): GraphQLContext => ({
    principal,
    prisma,
    services,
    shutdownSignal: signal,
    log,
  });
  // A user disabled, demoted or given a new password, a key revoked (here or on another instance): its sockets and
  // SSE streams end at once. After a Redis reconnect (changes may have been missed) every connection checks again.
  const live = new LiveConnections();
  services.userStates.onChanged((userId) => (userId === "all" ? live.recheckAll() : live.end(`user:${userId}`, "Forbidden: the user was disabled or changed")));
  services.keyCache.onRevoked((keyId) => live.end(`key:${keyId}`, "Forbidden: the API key was revoked"));
  /**
   * An SSE subscription's signal: ends with the server, or when its principal changes (registered in `live` until
   * the response closes). Other requests share the server's signal.
   */
  const streamSignalFor = (req: FastifyRequest | undefined, reply: FastifyReply | undefined, principal: Principal | null): AbortSignal => {
    if (!req || !reply || !principal || !(req.headers.accept ?? "").includes("text/event-stream")) return shutdownSignal;
    const ended = new AbortController();
    const unregister = live.add(principal, {
      end: () => ended.abort(),
      recheck: () =>
        void authenticator.authenticate(credentialFrom(req.headers["x-api-key"] as string | undefined, req.headers.authorization, true)).then(
          (now) => now || ended.abort(),
          () => ended.abort(),
        ),
    });
    reply.raw.once("close", unregister);
    return AbortSignal.any([shutdownSignal, ended.signal]);
  };
  // A request holding an Idempotency-Key carries its claim on its principal to the services (src/idempotency/scope.ts).
  const callerOf = (request: FastifyRequest): Principal | null => {
    const claim = request.principal && idempotency.scopeOf(request);
    return claim ? { ...request.principal!, idempotency: claim } : request.principal;
  };

  return {
    live,
    /** A REST row's operation: the request's caller and log. */
    forRest: (request: FastifyRequest): GraphQLContext => contextFor(callerOf(request), request.log as Logger),
    /** yoga's context: over HTTP the principal comes from the request's key; over WebSocket from connection_init. */
    forGraphql(initial: object): GraphQLContext {
      const { principal, req, reply } = initial as { principal?: Principal; req?: FastifyRequest; reply?: FastifyReply };
      if (principal) return contextFor(principal, (req?.log as Logger | undefined) ?? logger);
      const caller = req ? callerOf(req) : null;
      return contextFor(caller, (req?.log as Logger | undefined) ?? logger, streamSignalFor(req, reply, caller));
    },
  };
}

export type RequestContexts = ReturnType<typeof createRequestContexts>;
