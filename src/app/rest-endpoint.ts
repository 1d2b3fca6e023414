import type { FastifyInstance } from "fastify";
import type { GraphQLSchema } from "graphql";
import { runWithRequestLog } from "../graphql/logging.ts";
import type { Logger } from "../logger.ts";
import { restRoutePolicy, runOperation, type CompiledRoute, type RestRequest } from "../rest/route-table.ts";
import { assertSafeText } from "../validation.ts";
import type { RequestContexts } from "./request-context.ts";

/** Each REST row as a Fastify route: the request mapped to the row's operation's variables, its result to the documented body. */
export function mountRestRoutes(app: FastifyInstance, routes: CompiledRoute[], schema: GraphQLSchema, contexts: RequestContexts): void {
  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.path,
      config: restRoutePolicy(route),
      handler: async (request, reply) => {
        const restRequest: RestRequest = {
          body: request.body && typeof request.body === "object" && !Array.isArray(request.body) ? (request.body as Record<string, unknown>) : {},
          query: (request.query ?? {}) as Record<string, unknown>,
          params: (request.params ?? {}) as Record<string, string>,
        };
        assertSafeText(restRequest);
        const data = await runWithRequestLog(request.log as Logger, () => runOperation(schema, route, route.variables(restRequest), contexts.forRest(request)));
        const { statusCode = 200, body } = route.respond(data, restRequest);
        reply.code(statusCode).type("application/json; charset=utf-8");
        return reply.send(typeof body === "string" ? body : JSON.stringify(body));
      },
    });
  }
}
