import type { FastifyInstance } from "fastify";
import type { Services } from "../../services.ts";
import { unsafeTextIn } from "../../validation.ts";

/**
 * Provider callback endpoints (Daraja): no API key; authenticated by the per-channel token in the
 * path (hex-encoded, see momo/service.ts). A wrong token is a 404 and nothing is applied.
 */
export function registerMomoCallbackRoutes(app: FastifyInstance, services: Services) {
  // Text no callback can carry (control characters, absurd lengths) is refused in Daraja's reply
  // format before anything is parsed or applied.
  app.addHook("preHandler", async (request, reply) => {
    if (!request.url.startsWith("/callbacks/daraja/")) return;
    const unsafe = unsafeTextIn(request.params, "") ?? unsafeTextIn(request.body, "");
    if (unsafe) return reply.code(400).type("application/json; charset=utf-8").send({ ResultCode: 1, ResultDesc: `Rejected: ${unsafe.message}` });
  });

  const json = (handle: (token: string, body: unknown) => Promise<unknown>) =>
    async (request: { params: unknown; body: unknown }, reply: { type(t: string): { send(b: unknown): unknown } }) =>
      reply.type("application/json; charset=utf-8").send(await handle((request.params as { token: string }).token, request.body));

  app.post("/callbacks/daraja/:token/stk", json((token, body) => services.momo.handleStkCallback(token, body)));
  app.post("/callbacks/daraja/:token/c2b/validation", json((token, body) => services.momo.handleC2bValidation(token, body)));
  app.post("/callbacks/daraja/:token/c2b/confirmation", json((token, body) => services.momo.handleC2bConfirmation(token, body)));
  app.post("/callbacks/daraja/:token/b2c/result", json((token, body) => services.momo.handleB2cResult(token, body)));
  app.post("/callbacks/daraja/:token/b2c/timeout", json((token, body) => services.momo.handleB2cTimeout(token, body)));
  app.post<{ Params: { token: string; reference: string } }>("/callbacks/daraja/:token/b2c/status/:reference", async (request, reply) =>
    reply.type("application/json; charset=utf-8").send(await services.momo.handleB2cStatusResult(request.params.token, request.params.reference, request.body)),
  );
}
