import type { FastifyInstance, FastifyReply } from "fastify";
import type { Services } from "../../services.ts";
import { assertSafeText } from "../../validation.ts";

/**
 * POST /v1/auth/login, /refresh and /logout. Plain routes rather than rows of the GraphQL route table:
 * they are how a user gets a credential, and every GraphQL operation needs one. Token responses are
 * never cached (RFC 6749 section 5.1). Failed logins are limited per e-mail and per IP in the service.
 */
export function registerAuthRoutes(app: FastifyInstance, services: Services) {
  const { users } = services;
  const noStore = (reply: FastifyReply) => reply.header("cache-control", "no-store").header("pragma", "no-cache").type("application/json; charset=utf-8");

  app.post("/v1/auth/login", async (request, reply) => {
    assertSafeText({ body: request.body });
    const session = await users.login(request.body, request.ip);
    request.log.info({ userId: session.user.id, merchantId: session.user.merchant_id, mode: session.mode }, "user signed in");
    return noStore(reply).send({ status: "success", data: session });
  });

  app.post("/v1/auth/refresh", async (request, reply) => {
    assertSafeText({ body: request.body });
    return noStore(reply).send({ status: "success", data: await users.refresh(request.body) });
  });

  app.post("/v1/auth/logout", async (request, reply) => {
    assertSafeText({ body: request.body });
    await users.logout(request.body);
    return noStore(reply).send({ status: "success", message: "Signed out" });
  });
}
