import type { FastifyInstance, FastifyReply } from "fastify";
import type { Services } from "../../services.ts";
import { assertSafeText } from "../../validation.ts";
import { body, envelope, int, schemas, str } from "../../openapi/schemas.ts";
import type { DocumentedRoute } from "../../openapi/types.ts";

/** What the OpenAPI document says of these routes (they are not rows of the route table). */
export const authRouteDocs: DocumentedRoute[] = [
  {
    method: "POST",
    path: "/v1/auth/login",
    doc: {
      operationId: "login",
      summary: "Sign a user in: an access token (15 minutes) and a refresh token (30 days)",
      description:
        "Wrong e-mail and wrong password are the same 401. Five failures per e-mail (20 per IP) in 15 minutes give a 429 with Retry-After. " +
        "An e-mail may be a user at several merchants: without merchant_id such an e-mail is asked for it (400 naming merchant_id) before any password is checked.",
      tag: "Auth",
      body: body(
        {
          email: str(),
          password: str(),
          mode: { type: "string", enum: ["test", "live"], description: "Default test" },
          merchant_id: int("The merchant to sign in to, when the e-mail and password belong to users at several", { minimum: 1 }),
        },
        ["email", "password"],
      ),
      response: envelope({ data: schemas.session }),
    },
  },
  {
    method: "POST",
    path: "/v1/auth/refresh",
    doc: {
      operationId: "refresh",
      summary: "Trade a refresh token for a new pair (the old one stops working)",
      description: "Presenting a refresh token that was already used revokes its whole family (theft detection): 401.",
      tag: "Auth",
      body: body({ refresh_token: str(), mode: { type: "string", enum: ["test", "live"], description: "Switch mode (default: the token's)" } }, ["refresh_token"]),
      response: envelope({ data: schemas.session }),
    },
  },
  {
    method: "POST",
    path: "/v1/auth/logout",
    doc: {
      operationId: "logout",
      summary: "Revoke a refresh token's family (access tokens run out on their own)",
      tag: "Auth",
      body: body({ refresh_token: str() }, ["refresh_token"]),
      response: envelope({ message: str() }),
    },
  },
];

/**
 * POST /v1/auth/login, /refresh and /logout. Plain routes rather than rows of the GraphQL route table:
 * they are how a user gets a credential, and every GraphQL operation needs one. Token responses are
 * never cached (RFC 6749 section 5.1). Failed logins are limited per e-mail and per IP in the service.
 */
export function registerAuthRoutes(app: FastifyInstance, services: Services) {
  const { users } = services;
  // How a user gets a credential, so none is asked for; failed sign-ins have their own limits (users/service.ts).
  const open = { config: { auth: "none", rateLimit: "none" } } as const;
  const noStore = (reply: FastifyReply) => reply.header("cache-control", "no-store").header("pragma", "no-cache").type("application/json; charset=utf-8");

  app.post("/v1/auth/login", open, async (request, reply) => {
    assertSafeText({ body: request.body });
    const session = await users.login(request.body, request.ip);
    request.log.info({ userId: session.user.id, merchantId: session.user.merchant_id, mode: session.mode }, "user signed in");
    return noStore(reply).send({ status: "success", data: session });
  });

  app.post("/v1/auth/refresh", open, async (request, reply) => {
    assertSafeText({ body: request.body });
    return noStore(reply).send({ status: "success", data: await users.refresh(request.body) });
  });

  app.post("/v1/auth/logout", open, async (request, reply) => {
    assertSafeText({ body: request.body });
    await users.logout(request.body);
    return noStore(reply).send({ status: "success", message: "Signed out" });
  });
}
