import type { FastifyInstance, FastifyReply } from "fastify";
import { ValidationError } from "../../errors.ts";
import type { Services } from "../../services.ts";
import { unsafeTextIn } from "../../validation.ts";

/** Daraja reads only {ResultCode, ResultDesc}: a refused callback is told why in that shape, never in the REST envelope. */
function refuse(reply: FastifyReply, error: ValidationError) {
  return reply.code(400).type("application/json; charset=utf-8").send({ ResultCode: 1, ResultDesc: `Rejected: ${error.message}` });
}

/**
 * Provider callback endpoints (Daraja): no API key; authenticated by the per-channel token in the
 * path (hex-encoded, see momo/service.ts). A wrong token is a 404 and nothing is applied.
 */
export function registerMomoCallbackRoutes(app: FastifyInstance, services: Services) {
  // Text no callback can carry (control characters, lone surrogates, absurd lengths) is refused in
  // Daraja's reply format before anything is parsed or applied.
  app.addHook("preHandler", async (request, reply) => {
    if (!request.url.startsWith("/callbacks/daraja/")) return;
    const unsafe = unsafeTextIn(request.params, "") ?? unsafeTextIn(request.body, "");
    if (unsafe) return refuse(reply, unsafe);
  });

  // A payload the parser refuses (no TransID, an amount that is not one) likewise; a wrong token stays a 404.
  const json = (handle: (token: string, body: unknown, request: { params: unknown }) => Promise<unknown>) =>
    async (request: { params: unknown; body: unknown }, reply: FastifyReply) => {
      try {
        return reply.type("application/json; charset=utf-8").send(await handle((request.params as { token: string }).token, request.body, request));
      } catch (error) {
        if (error instanceof ValidationError) return refuse(reply, error);
        throw error;
      }
    };

  app.post("/callbacks/daraja/:token/stk", json((token, body) => services.momo.handleStkCallback(token, body)));
  app.post("/callbacks/daraja/:token/c2b/validation", json((token, body) => services.momo.handleC2bValidation(token, body)));
  app.post("/callbacks/daraja/:token/c2b/confirmation", json((token, body) => services.momo.handleC2bConfirmation(token, body)));
  app.post("/callbacks/daraja/:token/b2c/result", json((token, body) => services.momo.handleB2cResult(token, body)));
  app.post("/callbacks/daraja/:token/b2c/timeout", json((token, body) => services.momo.handleB2cTimeout(token, body)));
  app.post<{ Params: { token: string; reference: string } }>(
    "/callbacks/daraja/:token/b2c/status/:reference",
    json((token, body, request) => services.momo.handleB2cStatusResult(token, (request.params as { reference: string }).reference, body)),
  );
}
