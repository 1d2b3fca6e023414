import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { GraphQLSchema } from "graphql";
import { GatewayError, ValidationError } from "../errors.ts";
import { runWithRequestLog } from "../graphql/logging.ts";
import type { Logger } from "../logger.ts";
import { refuseUnknownFields, restRoutePolicy, runOperation, type CompiledRoute, type RestRequest } from "../rest/route-table.ts";
import { assertSafeText } from "../validation.ts";
import type { RequestContexts } from "./request-context.ts";

/** Each REST row as a Fastify route: the request mapped to the row's operation's variables, its result to the documented body. */
export function mountRestRoutes(app: FastifyInstance, routes: CompiledRoute[], schema: GraphQLSchema, contexts: RequestContexts): void {
  const uploads = routes.filter((route) => route.upload);
  for (const route of routes.filter((r) => !r.upload)) mountRoute(app, route, schema, contexts);
  // Multipart is parsed only on the rows that take a file (an encapsulated context): every other route keeps JSON only.
  if (uploads.length) {
    void app.register(async (scope) => {
      await scope.register(multipart, { limits: { files: 1, fields: 5, fieldSize: 1024, parts: 6 } });
      for (const route of uploads) mountRoute(scope, route, schema, contexts);
    });
  }
}

function mountRoute(app: FastifyInstance, route: CompiledRoute, schema: GraphQLSchema, contexts: RequestContexts): void {
  app.route({
    method: route.method,
    url: route.path,
    config: restRoutePolicy(route),
    // The file, and the multipart framing around it.
    ...(route.upload ? { bodyLimit: route.upload.maxBytes + 64 * 1024 } : {}),
    handler: async (request, reply) => {
      const restRequest: RestRequest = {
        body: request.body && typeof request.body === "object" && !Array.isArray(request.body) ? (request.body as Record<string, unknown>) : {},
        query: (request.query ?? {}) as Record<string, unknown>,
        params: (request.params ?? {}) as Record<string, string>,
      };
      refuseUnknownFields(route.allowedBodyFields, restRequest.body);
      assertSafeText(restRequest);
      if (route.upload) restRequest.file = await readUpload(request, route.upload);
      const data = await runWithRequestLog(request.log as Logger, () => runOperation(schema, route, route.variables(restRequest), contexts.forRest(request)));
      const { statusCode = 200, body } = route.respond(data, restRequest);
      reply.code(statusCode).type("application/json; charset=utf-8");
      return reply.send(typeof body === "string" ? body : JSON.stringify(body));
    },
  });
}

/** The one file of a multipart request, from its form field; a clear 400, 413 or 415 otherwise. */
async function readUpload(request: FastifyRequest, upload: { field: string; maxBytes: number }): Promise<{ name: string; bytes: Buffer }> {
  if (!request.isMultipart()) throw new GatewayError("unsupported_media_type", `Content-Type must be multipart/form-data, with the file in the field \`${upload.field}\``);
  let part;
  try {
    part = await request.file({ limits: { fileSize: upload.maxBytes } });
  } catch (error) {
    throw new ValidationError(upload.field, `could not be read as multipart/form-data (${(error as Error).message})`);
  }
  if (!part || part.fieldname !== upload.field) throw new ValidationError(upload.field, `is required: send one file in the multipart field \`${upload.field}\``);
  let bytes: Buffer;
  try {
    bytes = await part.toBuffer();
  } catch (error) {
    if ((error as { code?: string }).code === "FST_REQ_FILE_TOO_LARGE") {
      throw new GatewayError("payload_too_large", `${upload.field}: the file must be at most ${upload.maxBytes / 1024 / 1024} MB`);
    }
    throw new ValidationError(upload.field, `could not be read (${(error as Error).message})`);
  }
  return { name: part.filename ?? "", bytes };
}
