import type { RouteDoc } from "../rest/route-table.ts";

/**
 * One operation of the OpenAPI document: a route table row or a plain Fastify route (/v1/auth) with
 * its doc. Its own module so the routes that document themselves need not import the document builder
 * that imports them (users/routes.ts <-> document.ts was a cycle).
 */
export interface DocumentedRoute {
  method: "GET" | "POST";
  path: string;
  doc: RouteDoc;
}
