/** What the OpenAPI document says of a route (src/openapi/document.ts): built from the routes, so it cannot drift from them. */
export interface RouteDoc {
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /** The JSON request body's schema, for POST routes. */
  body?: Record<string, unknown>;
  /** The request body's media type when it is not JSON (multipart/form-data for a file). */
  bodyContentType?: string;
  query?: Record<string, { description: string; schema: Record<string, unknown> }>;
  /** The success status (200 unless said) and its body's schema. */
  status?: number;
  response: Record<string, unknown>;
  /** The success body's media type when it is not JSON (e.g. text/csv). */
  contentType?: string;
  responseDescription?: string;
  /** Error statuses beyond the common ones (400, 401, 403, 413, 415, 429, 503), e.g. 404, 409, 502. */
  errors?: number[];
}

/**
 * One operation of the OpenAPI document: a route table row or a plain Fastify route (/v1/auth) with
 * its doc. Its own module so the routes that document themselves need not import the document builder
 * that imports them (users/routes.ts <-> document.ts was a cycle).
 */
export interface DocumentedRoute {
  method: "GET" | "POST" | "DELETE";
  path: string;
  doc: RouteDoc;
}
