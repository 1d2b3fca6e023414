import type { WebsocketHandler } from "@fastify/websocket";
import { getOperationAST, GraphQLError, Kind, print, type ExecutionArgs, type ExecutionResult } from "graphql";
import { makeHandler } from "graphql-ws/use/@fastify/websocket";
import type { YogaServerInstance } from "graphql-yoga";
import type WebSocket from "ws";
import { credentialFrom, type Credential, type Principal } from "../auth.ts";
import { GatewayError } from "../errors.ts";
import type { GraphQLContext } from "./context.ts";
import { isSharedExecution, type SubscriptionFanout } from "./fanout.ts";
import type { LiveConnections } from "./live-connections.ts";

/**
 * GraphQL over WebSocket (graphql-ws) on /graphql, wired the way graphql-yoga documents it: every
 * operation goes through yoga's envelop (parse, validate, context), so the same armor limits apply
 * as over HTTP. The credential comes in the connection_init payload: {"X-API-Key": "<key>"}, or a user's
 * {"Authorization": "Bearer <access token>"}; a missing or bad one closes the socket with 4403
 * (Forbidden) and spends the client IP's budget, as a 401 does.
 * An IP or key over its budget closes it with 4429 before the key is looked up: the HTTP 429's number,
 * and a close code graphql-ws clients treat as fatal, so they do not retry into the limit.
 *
 * The credential is checked again for every operation (a revoked key, a disabled user, an expired token are
 * refused; a changed role applies), and the socket closes on its own when the principal changes anywhere
 * (4403: key revoked, user disabled, role or password changed) and when a user's access token expires (4401),
 * unless the client sent a fresh token first in a ping: {"type":"ping","payload":{"Authorization":"Bearer <new>"}}
 * (the same user, merchant and mode). A client may instead reconnect with a fresh token.
 */
export interface WebSocketDeps {
  yoga: YogaServerInstance<any, GraphQLContext>;
  /** connection_init, budgeted like an HTTP request: the principal and its budget, null for a bad credential, or the 429 error. */
  authenticate(ip: string, credential: Credential): Promise<{ principal: Principal; budget: string | undefined } | null | GatewayError>;
  /** Counts one subscribe operation against the credential's budget; resolves to the 429 error when over it. */
  chargeOperation(budget: string): Promise<GatewayError | undefined>;
  /** The credential's principal now (no budget spent): null when revoked, disabled, expired. */
  reauthenticate(credential: Credential): Promise<Principal | null>;
  /** When a user's access token expires (epoch ms); undefined for an API key. */
  expiresAt(credential: Credential): number | undefined;
  /** Where the socket registers, so a change to its principal closes it on every instance. */
  live: LiveConnections;
  keepAliveMs?: number;
  /** Where identical subscriptions share one execution (see sharedExecution); the gateway exposes its stats. */
  fanout: SubscriptionFanout;
}

interface Connection {
  credential: Credential;
  principal: Principal;
  budget: string | undefined;
  /** Closes the socket with 4401 when the access token expires. */
  expiry?: NodeJS.Timeout;
}

/** graphql-ws's Unauthorized / Forbidden close codes: the token expired; the principal lost its access. */
export const TOKEN_EXPIRED_CLOSE_CODE = 4401;
export const FORBIDDEN_CLOSE_CODE = 4403;
/** setTimeout's limit; a token living longer is checked on each operation anyway. */
const MAX_TIMER_MS = 2 ** 31 - 1;

function param(params: Readonly<Record<string, unknown>> | undefined, ...names: string[]): string | undefined {
  for (const name of names) {
    const value = params?.[name];
    if (typeof value === "string") return value;
  }
  return undefined;
}

/** Also graphql-ws's "too many initialisation requests"; either way the client must back off. */
export const RATE_LIMITED_CLOSE_CODE = 4429;

type Envelope = ReturnType<WebSocketDeps["yoga"]["getEnveloped"]>;

/** What execute/subscribe need besides the arguments graphql-ws passes them: one per operation. */
interface Operation {
  envelope: Envelope;
  principal: Principal;
  socket: WebSocket;
  id: string;
  params: unknown;
}

/** The stream of a subscription built by the subscriber's own subscribe call; anything else is a one-off result. */
function isStream(result: unknown): result is AsyncIterableIterator<ExecutionResult> {
  return typeof result === "object" && result !== null && Symbol.asyncIterator in result;
}

/** JSON with object keys sorted, so equal variables give equal keys whatever their order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The key subscribers share an execution under, or undefined when this operation is not shared: its one root
 * field must be marked sharedExecution and selected plainly (no fragment or directive at the root, so the field
 * is known without executing). The key holds everything the result can depend on: the document, the operation
 * and the variables, and the principal's merchant, mode and role (authorization depends on role and mode).
 */
function sharedKey(args: ExecutionArgs, principal: Principal): string | undefined {
  const operation = getOperationAST(args.document, args.operationName);
  if (operation?.operation !== "subscription" || operation.selectionSet.selections.length !== 1) return undefined;
  const [root] = operation.selectionSet.selections;
  if (root?.kind !== Kind.FIELD || root.directives?.length) return undefined;
  const field = args.schema.getSubscriptionType()?.getFields()[root.name.value];
  if (!field || !isSharedExecution(field)) return undefined;
  return JSON.stringify([principal.merchantId, principal.mode, principal.role, args.operationName ?? null, canonicalJson(args.variableValues ?? {}), print(args.document)]);
}

export function graphqlWebSocketHandler(deps: WebSocketDeps): WebsocketHandler {
  // graphql-ws hands the same context object to every callback of one socket.
  const connections = new WeakMap<object, Connection>();
  // graphql-ws passes onSubscribe's ExecutionArgs object on to execute/subscribe.
  const operations = new WeakMap<ExecutionArgs, Operation>();

  /**
   * The group's one stream: executed with the scope alone (no user, key or connection of any one member), so
   * nothing of one subscriber can reach another's frames, and ended by the group's signal.
   */
  const openShared = async (args: ExecutionArgs, operation: Operation, signal: AbortSignal) => {
    const { merchantId, mode, role } = operation.principal;
    const scope: Principal = { merchantId, mode, role, userId: null, keyId: null, keyPrefix: null };
    const envelope = deps.yoga.getEnveloped({ params: operation.params, principal: scope });
    const contextValue = Object.assign(await envelope.contextFactory(), { shutdownSignal: signal });
    return envelope.subscribe({ ...args, contextValue });
  };

  /** Closes the socket when the connection's access token expires (a ping with a fresh one moves it). */
  const scheduleExpiry = (connection: Connection, socket: WebSocket) => {
    clearTimeout(connection.expiry);
    const expiresAt = deps.expiresAt(connection.credential);
    if (expiresAt === undefined) return;
    connection.expiry = setTimeout(() => socket.close(TOKEN_EXPIRED_CLOSE_CODE, "Access token expired: reconnect with a fresh one"), Math.min(MAX_TIMER_MS, Math.max(0, expiresAt - Date.now())));
    connection.expiry.unref();
  };

  /** The connection's principal now, or null after closing the socket (4401 expired, 4403 revoked or disabled). */
  const recheck = async (connection: Connection, socket: WebSocket): Promise<Principal | null> => {
    const principal = await deps.reauthenticate(connection.credential);
    if (principal) return (connection.principal = principal);
    const expiresAt = deps.expiresAt(connection.credential);
    if (expiresAt !== undefined && expiresAt <= Date.now()) socket.close(TOKEN_EXPIRED_CLOSE_CODE, "Access token expired: reconnect with a fresh one");
    else socket.close(FORBIDDEN_CLOSE_CODE, "Forbidden: the credential was revoked or the user disabled");
    return null;
  };

  return makeHandler<Record<string, unknown>>(
    {
      onConnect: async (ctx) => {
        const params = ctx.connectionParams;
        const credential = credentialFrom(param(params, "X-API-Key"), param(params, "Authorization", "authorization"), true);
        const authenticated = await deps.authenticate(ctx.extra.request.ip, credential);
        if (authenticated instanceof GatewayError) {
          // graphql-ws's own close (4403) that follows `false` is a no-op on a socket already closing.
          ctx.extra.socket.close(RATE_LIMITED_CLOSE_CODE, authenticated.message);
          return false;
        }
        if (!authenticated) return false; // graphql-ws closes with 4403 Forbidden
        const socket = ctx.extra.socket;
        const connection: Connection = { credential, ...authenticated };
        connections.set(ctx, connection);
        scheduleExpiry(connection, socket);
        const unregister = deps.live.add(authenticated.principal, {
          end: (reason) => socket.close(FORBIDDEN_CLOSE_CODE, reason),
          recheck: () => void recheck(connection, socket).catch(() => socket.close(1011, "Could not check the credential")),
        });
        socket.once("close", () => {
          clearTimeout(connection.expiry);
          unregister();
        });
        return true;
      },
      // A fresh access token for the same user, merchant and mode keeps the socket open past the old one's expiry.
      onPing: async (ctx, payload) => {
        const connection = connections.get(ctx);
        const presented = param(payload, "Authorization", "authorization");
        if (!connection || presented === undefined || connection.principal.userId === null) return;
        const credential = credentialFrom(undefined, presented, true);
        const principal = credential ? await deps.reauthenticate(credential) : null;
        const same = principal && principal.userId === connection.principal.userId && principal.merchantId === connection.principal.merchantId && principal.mode === connection.principal.mode;
        if (!same) {
          ctx.extra.socket.close(FORBIDDEN_CLOSE_CODE, "Forbidden: the refreshed token is not valid for this connection");
          return;
        }
        connection.credential = credential;
        connection.principal = principal;
        scheduleExpiry(connection, ctx.extra.socket);
      },
      onSubscribe: async (ctx, id, payload) => {
        const connection = connections.get(ctx)!;
        // Every operation runs as the principal is now, not as it was at connection_init.
        const principal = await recheck(connection, ctx.extra.socket);
        if (!principal) return [new GraphQLError("The connection's credential no longer holds", { extensions: { code: "forbidden" } })];
        const limited = connection.budget === undefined ? undefined : await deps.chargeOperation(connection.budget);
        if (limited) return [new GraphQLError(limited.message, { extensions: { code: limited.code } })];
        const envelope = deps.yoga.getEnveloped({
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params: payload,
          principal,
        });
        let document;
        try {
          document = envelope.parse(payload.query);
        } catch (error) {
          return [error instanceof GraphQLError ? error : new GraphQLError("Invalid query")];
        }
        const args: ExecutionArgs = {
          schema: envelope.schema,
          operationName: payload.operationName ?? null,
          document,
          variableValues: payload.variables ?? null,
          contextValue: await envelope.contextFactory(),
          rootValue: null,
        };
        const errors = envelope.validate(args.schema, args.document);
        if (errors.length) return errors;
        operations.set(args, { envelope, principal, socket: ctx.extra.socket, id, params: payload });
        return args;
      },
      execute: (args) => operations.get(args)!.envelope.execute(args),
      subscribe: async (args) => {
        const operation = operations.get(args)!;
        // Authorization, limits and the root field's own checks run for every subscriber, shared or not.
        const result = await operation.envelope.subscribe(args);
        const key = isStream(result) && sharedKey(args, operation.principal);
        if (!key) return result;
        // Its own stream is closed before it started (nothing listens before the first next()); the group's serves it.
        await result.return?.();
        const { shutdownSignal } = args.contextValue as GraphQLContext;
        return deps.fanout.join(key, operation.socket, operation.id, shutdownSignal, (signal) => openShared(args, operation, signal));
      },
    },
    deps.keepAliveMs,
  );
}
