import { ledgerReportDocs } from "../modules/ledger/routes.ts";
import { transactionReportDocs } from "../modules/reports/routes.ts";
import { authRouteDocs } from "../modules/users/routes.ts";
import { openApiDocumentOf } from "../openapi/document.ts";
import type { DocumentedRoute } from "../openapi/types.ts";
import { restRoutes } from "./rest-routes.ts";

/**
 * Every documented route: the route table's rows, then the plain Fastify routes that document themselves (/v1/auth,
 * the CSV reports). A row without a doc fails the build (and so the boot and the tests).
 */
export function documentedRoutes(): DocumentedRoute[] {
  const rows = restRoutes.map((route): DocumentedRoute => {
    if (!route.doc) throw new Error(`REST route ${route.method} ${route.path} has no doc: the OpenAPI document would miss it`);
    return { method: route.method, path: route.path, doc: route.doc };
  });
  return [...rows, ...authRouteDocs, ...ledgerReportDocs, ...transactionReportDocs];
}

/**
 * The OpenAPI 3.1 document of the whole REST API (served at /openapi.json, the source of src/client's types);
 * the integration suite validates every REST response it receives against it.
 */
export function buildOpenApiDocument(options: { serverUrl?: string } = {}) {
  return openApiDocumentOf(documentedRoutes(), options);
}
