import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { renderGraphiQL } from "@graphql-yoga/render-graphiql";
import type { GraphQLSchema } from "graphql";
import { createYoga, type YogaServerInstance } from "graphql-yoga";
import type { Authenticator } from "../auth.ts";
import type { Config } from "../config.ts";
import { GatewayError } from "../errors.ts";
import type { GraphQLContext } from "../graphql/context.ts";
import type { SubscriptionFanout } from "../graphql/fanout.ts";
import { graphqlHardening } from "../graphql/hardening.ts";
import { runWithRequestLog, useErrorLog, useRefusalLog, yogaLogging } from "../graphql/logging.ts";
import { maskError } from "../graphql/mask-errors.ts";
import { subscriptionReady } from "../graphql/ready.ts";
import { graphqlWebSocketHandler } from "../graphql/websocket.ts";
import type { Logger } from "../logger.ts";
import type { GatewayMetrics } from "../metrics/registry.ts";
import { expiryOf } from "../modules/users/tokens.ts";
import { budgetedAuthentication } from "../rate-limit/hook.ts";
import { chargeOperation, type GatewayRateLimiter } from "../rate-limit/limiter.ts";
import { graphiqlCsp } from "../security/headers.ts";
import { sendError } from "./http-app.ts";
import type { RequestContexts } from "./request-context.ts";

/** GraphiQL's first query: how to authenticate, then one that shows who you are. */
const GRAPHIQL_QUERY = `# Authenticate in the Headers tab below, with
#   "X-API-Key": your test key (sk_test_...)
# or "Authorization": "Bearer <access token>"
#   from POST /v1/auth/login (a dashboard user).
# Lost the key? npm run cli -- demo
# Without one: no docs, and a note on the key.
{ viewer { name mode } }
`;

/** What GraphiQL shows for a 401 instead of the raw envelope: where the key goes, then the gateway's own words. */
export const GRAPHIQL_KEY_MESSAGE =
  "Add your key in the Headers tab below: X-API-Key set to your test key (sk_test_...), or Authorization set to Bearer <access token> from POST /v1/auth/login. Then run the query again.";

/**
 * Runs before GraphiQL's own script (yoga's page takes only JSON options, so no fetcher of ours): a 401 from the
 * gateway becomes a GraphQL error carrying GRAPHIQL_KEY_MESSAGE, which GraphiQL shows in its result pane.
 */
const GRAPHIQL_KEY_SCRIPT = `(function () {
  var message = ${JSON.stringify(GRAPHIQL_KEY_MESSAGE)};
  var original = window.fetch.bind(window);
  window.fetch = function (input, init) {
    return original(input, init).then(function (response) {
      if (response.status !== 401) return response;
      return response.clone().json().catch(function () { return {}; }).then(function (body) {
        var said = body && typeof body.message === "string" ? body.message : "";
        var error = { message: message, extensions: { code: "UNAUTHENTICATED", http: { status: 401 }, gateway: said } };
        return new Response(JSON.stringify({ errors: [error] }), { status: 401, headers: { "content-type": "application/json" } });
      });
    });
  };
})();`;

/** yoga's GraphiQL page with GRAPHIQL_KEY_SCRIPT first; the CSP hashes every inline script, this one included. */
function renderGraphiqlPage(options: Parameters<typeof renderGraphiQL>[0]): string {
  return renderGraphiQL(options).replace("<script>", `<script>${GRAPHIQL_KEY_SCRIPT}</script>\n      <script>`);
}

/**
 * GraphQL over GET carries variables and extensions as JSON in the query string; text that is not a
 * JSON object there is the client's mistake (a 400 in GraphQL's error format), not a server error.
 */
function refuseMalformedGraphqlGet(request: FastifyRequest): string | null {
  if (request.method !== "GET") return null;
  const query = (request.query ?? {}) as Record<string, unknown>;
  for (const name of ["variables", "extensions"]) {
    const value = query[name];
    if (value === undefined || value === "") continue;
    let parsed: unknown;
    try {
      parsed = typeof value === "string" ? JSON.parse(value) : undefined;
    } catch {
      parsed = undefined;
    }
    if (parsed === null || (typeof parsed === "object" && !Array.isArray(parsed))) continue;
    return JSON.stringify({ errors: [{ message: `${name} must be a JSON object`, extensions: { code: "BAD_REQUEST" } }] });
  }
  return null;
}

/** An Accept header without its multipart/* entries: "" when nothing else was listed, undefined when there was none. */
function withoutMultipart(accept: string | undefined): string | undefined {
  if (!accept || !/multipart\//i.test(accept)) return accept;
  return accept
    .split(",")
    .filter((entry) => !/^\s*multipart\//i.test(entry))
    .join(",")
    .trim();
}

function isGraphiqlPageRequest(request: FastifyRequest): boolean {
  return request.method === "GET" && (request.headers.accept ?? "").includes("text/html");
}

export interface GraphqlEndpointDeps {
  config: Pick<Config, "nodeEnv" | "corsOrigins" | "graphql">;
  logger: Logger;
  schema: GraphQLSchema;
  contexts: RequestContexts;
  authenticator: Authenticator;
  rateLimiter: GatewayRateLimiter | undefined;
  metrics: GatewayMetrics;
  subscriptions: SubscriptionFanout;
}

/**
 * /graphql: GET serves GraphiQL (outside production), GraphQL over HTTP and SSE, and the graphql-ws upgrade on the
 * same path; POST runs operations; OPTIONS answers CORS preflights. Needs @fastify/websocket registered first.
 */
export function mountGraphql(app: FastifyInstance, deps: GraphqlEndpointDeps): void {
  const { config, logger, contexts, authenticator, rateLimiter, metrics } = deps;
  const yoga: YogaServerInstance<{ req: FastifyRequest; reply: FastifyReply }, GraphQLContext> = createYoga({
    schema: deps.schema,
    graphqlEndpoint: "/graphql",
    // Opens on how to authenticate (headers tab shown, the key's header ready to fill) rather than on a bare 401.
    graphiql: config.nodeEnv !== "production" && {
      title: "Payment gateway · GraphiQL",
      defaultQuery: GRAPHIQL_QUERY,
      headers: JSON.stringify({ "X-API-Key": "" }, null, 2),
      defaultEditorToolsVisibility: "headers",
    },
    // GraphiQL's scripts and styles from the package, inline: no CDN, so it works on a machine with no internet.
    renderGraphiQL: renderGraphiqlPage,
    landingPage: false,
    // No origin is trusted by default (yoga's default reflects any Origin), and then no CORS work runs at all. Listed
    // origins get a header naming themselves, without cookies (every credential here is a header a page sends on
    // purpose); any other gets none (a list would answer it "null", which a sandboxed page's own Origin matches).
    cors: config.corsOrigins.length
      ? (request) => {
          const origin = request.headers.get("origin");
          if (!origin || !config.corsOrigins.includes(origin)) return false;
          return { origin: [origin], credentials: false, methods: ["GET", "POST"], allowedHeaders: ["content-type", "x-api-key", "authorization", "idempotency-key"] };
        }
      : false,
    maskedErrors: { maskError },
    plugins: [...graphqlHardening(config.graphql), subscriptionReady(), useRefusalLog(), useErrorLog()],
    // Client mistakes at info, typed error results at debug, only the unexpected at error; with the request id.
    logging: yogaLogging(logger),
    context: (initial) => contexts.forGraphql(initial),
  });

  const handleGraphql = async (req: FastifyRequest, reply: FastifyReply) => {
    const refused = refuseMalformedGraphqlGet(req);
    if (refused) return reply.code(400).type("application/json; charset=utf-8").send(refused);
    // GraphQL answers JSON, or SSE for subscriptions: yoga's multipart/mixed (incremental delivery) is not
    // offered, so its errors never come back in a format clients of this API do not read.
    const accept = withoutMultipart(req.headers.accept);
    if (accept === "") return sendError(reply, new GatewayError("not_acceptable"));
    if (accept !== undefined) req.headers.accept = accept;
    const response = await runWithRequestLog(req.log as Logger, () => yoga.handleNodeRequestAndResponse(req, reply, { req, reply }));
    // yoga answers an Accept it cannot serve with an empty 406; say why, in the envelope.
    if (response.status === 406) return sendError(reply, new GatewayError("not_acceptable"));
    response.headers.forEach((value, key) => {
      reply.header(key, value);
    });
    reply.status(response.status);
    const contentType = response.headers.get("content-type") ?? "";
    if (contentType.startsWith("text/event-stream")) metrics.countSseStream(reply.raw);
    if (contentType.startsWith("text/html")) {
      // GraphiQL: its inline scripts are allowed by hash, nothing else inline.
      const html = await response.text();
      return reply.header("content-security-policy", graphiqlCsp(html)).send(html);
    }
    reply.send(response.body);
    return reply;
  };

  // GraphiQL's page (outside production) opens without a credential; the budget is spent all the same.
  const graphqlPolicy = { auth: "api-key-or-user", rateLimit: "caller" } as const;
  app.route({
    url: "/graphql",
    method: "GET",
    config: { ...graphqlPolicy, ...(config.nodeEnv !== "production" ? { authExemptWhen: isGraphiqlPageRequest } : {}) },
    handler: handleGraphql,
    wsHandler: metrics.countSockets(graphqlWebSocketHandler({
      yoga,
      authenticate: budgetedAuthentication(rateLimiter, authenticator),
      chargeOperation: (budget) => chargeOperation(rateLimiter, budget),
      reauthenticate: (credential) => authenticator.authenticate(credential),
      expiresAt: (credential) => (credential && "bearer" in credential ? expiryOf(credential.bearer) : undefined),
      live: contexts.live,
      keepAliveMs: config.graphql.wsKeepAliveMs,
      fanout: deps.subscriptions,
    })),
  });
  app.route({ url: "/graphql", method: "POST", config: graphqlPolicy, handler: handleGraphql });
  // A CORS preflight carries no credential (browsers never send one): answered by yoga's CORS policy, spending the IP's budget.
  app.route({ url: "/graphql", method: "OPTIONS", config: { auth: "none", rateLimit: "caller" }, handler: handleGraphql });
}
