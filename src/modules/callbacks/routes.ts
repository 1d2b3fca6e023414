import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { GatewayError } from "../../errors.ts";
import type { Services } from "../../services.ts";

type CallbackRequest = FastifyRequest<{ Params: { provider: string; token: string } }>;

/** What follows the token in the URL as sent (still percent-encoded, query string dropped): "" or "/stk". */
function pathBelowToken(url: string): string {
  const path = url.split("?", 1)[0]!;
  // "", "callbacks", provider, token, ...below
  const parts = path.split("/");
  return parts.length > 4 ? `/${parts.slice(4).join("/")}` : "";
}

/**
 * Provider callbacks: `/callbacks/:provider/:token` and everything below it, for every provider. No API
 * key: the per-channel token in the path finds the channel, and the channel's connector authenticates,
 * parses and answers (services.callbacks). Bodies are kept as raw bytes, since a signature (Paystack's)
 * covers the bytes as sent; the connector reads them itself.
 */
export function registerCallbackRoutes(app: FastifyInstance, services: Services) {
  const { callbacks } = services;

  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // Each connector's own limit is enforced below (and again once its channel is known, for bodies sent without a length).
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));

    scope.addHook("preParsing", async (request: CallbackRequest, _reply, payload) => {
      const limit = callbacks.maxBodyBytes(request.params.provider);
      if (limit !== null && Number(request.headers["content-length"]) > limit) throw new GatewayError("payload_too_large");
      return payload;
    });

    const handler = async (request: CallbackRequest, reply: FastifyReply) => {
      const answer = await callbacks.receive({
        provider: request.params.provider,
        token: request.params.token,
        path: pathBelowToken(request.url),
        rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        contentType: request.headers["content-type"],
        headers: request.headers,
      });
      return reply.code(answer.status).type("application/json; charset=utf-8").send(answer.body);
    };
    scope.post("/callbacks/:provider/:token", handler);
    scope.post("/callbacks/:provider/:token/*", handler);
  });
}
