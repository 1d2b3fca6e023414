import type { FastifyInstance } from "fastify";
import { NotFoundError } from "../../errors.ts";
import type { Services } from "../../services.ts";
import { MAX_LOGO_BYTES } from "./service.ts";

export const LOGO_UPLOAD_PATH = "/v1/brand/logo";

/** A stored logo is a plain image: nothing in it may run, frame or load anything, whatever a browser guesses. */
const LOGO_HEADERS = {
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'none'; sandbox",
  // The hash in the path changes with the logo, so this URL's bytes never change.
  "cache-control": "public, max-age=31536000, immutable",
  "cross-origin-resource-policy": "same-origin",
};

/**
 * GET /brand/:merchantId/logo/:hash, the public logo the payer's pages show (no credential: it is on every
 * checkout page), and PUT /v1/brand/logo, where an owner uploads one. The upload is the image's raw bytes
 * (any Content-Type: the bytes are checked by their magic numbers), not base64 in GraphQL, because GraphQL
 * text is capped at 10,000 characters (src/validation.ts) and a 256 KB logo would be 350,000.
 */
export function registerBrandRoutes(app: FastifyInstance, services: Pick<Services, "brand">): void {
  app.get<{ Params: { merchantId: string; hash: string } }>(
    "/brand/:merchantId/logo/:hash",
    { config: { auth: "none", rateLimit: "none" } },
    async (request, reply) => {
      const { merchantId, hash } = request.params;
      const id = /^[1-9]\d{0,9}$/.test(merchantId) ? Number(merchantId) : NaN;
      const logo = Number.isSafeInteger(id) && id <= 2_147_483_647 && /^[0-9a-f]{64}$/.test(hash) ? await services.brand.logo(id, hash) : null;
      if (!logo) throw new NotFoundError("Logo");
      return reply.headers(LOGO_HEADERS).type(logo.type).send(Buffer.from(logo.bytes));
    },
  );

  // Its own scope, so only this route takes a body that is not JSON.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
    scope.put(LOGO_UPLOAD_PATH, { config: { auth: "api-key-or-user", rateLimit: "caller" }, bodyLimit: 4 * MAX_LOGO_BYTES }, async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const brand = await services.brand.setLogo(request.principal!, body);
      return reply.send({ status: "success", data: brandJson(brand) });
    });
  });
}

/** The brand as the REST answer's snake_case JSON. */
function brandJson(brand: Awaited<ReturnType<Services["brand"]["get"]>>) {
  return {
    display_name: brand.displayName,
    merchant_name: brand.merchantName,
    accent_color: brand.accentColor,
    support_email: brand.supportEmail,
    logo_url: brand.logoUrl,
    logo_type: brand.logoType,
    logo_size: brand.logoSize,
    updated_at: brand.updatedAt?.toISOString() ?? null,
  };
}
