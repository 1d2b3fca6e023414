import type { WebsocketHandler } from "@fastify/websocket";
import { GraphQLError, type ExecutionArgs } from "graphql";
import { makeHandler } from "graphql-ws/use/@fastify/websocket";
import type { YogaServerInstance } from "graphql-yoga";
import { credentialFrom, type Credential, type Principal } from "../auth.ts";
import { GatewayError } from "../errors.ts";
import type { GraphQLContext } from "./context.ts";

/**
 * GraphQL over WebSocket (graphql-ws) on /graphql, wired the way graphql-yoga documents it: every
 * operation goes through yoga's envelop (parse, validate, context), so the same armor limits apply
 * as over HTTP. The credential comes in the connection_init payload: {"X-API-Key": "<key>"}, or a user's
 * {"Authorization": "Bearer <access token>"}; a missing or bad one closes the socket with 4403
 * (Forbidden) and spends the client IP's budget, as a 401 does.
 * An IP or key over its budget closes it with 4429 before the key is looked up: the HTTP 429's number,
 * and a close code graphql-ws clients treat as fatal, so they do not retry into the limit.
 */
export interface WebSocketDeps {
  yoga: YogaServerInstance<any, GraphQLContext>;
  /** connection_init, budgeted like an HTTP request: the principal and its budget, null for a bad credential, or the 429 error. */
  authenticate(ip: string, credential: Credential): Promise<{ principal: Principal; budget: string | undefined } | null | GatewayError>;
  /** Counts one subscribe operation against the credential's budget; resolves to the 429 error when over it. */
  chargeOperation(budget: string): Promise<GatewayError | undefined>;
  keepAliveMs?: number;
}

interface Connection {
  principal: Principal;
  budget: string | undefined;
}

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

export function graphqlWebSocketHandler(deps: WebSocketDeps): WebsocketHandler {
  // graphql-ws hands the same context object to every callback of one socket.
  const connections = new WeakMap<object, Connection>();

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
        connections.set(ctx, authenticated);
        return true;
      },
      onSubscribe: async (ctx, _id, payload) => {
        const connection = connections.get(ctx)!;
        const limited = connection.budget === undefined ? undefined : await deps.chargeOperation(connection.budget);
        if (limited) return [new GraphQLError(limited.message, { extensions: { code: limited.code } })];
        const envelope = deps.yoga.getEnveloped({
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params: payload,
          principal: connection.principal,
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
          rootValue: { execute: envelope.execute, subscribe: envelope.subscribe },
        };
        const errors = envelope.validate(args.schema, args.document);
        if (errors.length) return errors;
        return args;
      },
      execute: (args) => (args.rootValue as Envelope).execute(args),
      subscribe: (args) => (args.rootValue as Envelope).subscribe(args),
    },
    deps.keepAliveMs,
  );
}
