import type { FastifyInstance } from "fastify";
import { str, v1PageQuery } from "../../openapi/schemas.ts";
import type { DocumentedRoute } from "../../openapi/types.ts";
import { pageVariables, stringParam } from "../../rest/params.ts";
import type { ExportSlots } from "../../rest/export-slots.ts";
import { restRoutePolicy, type RouteDoc } from "../../rest/route-table.ts";
import type { Services } from "../../services.ts";
import { assertSafeText } from "../../validation.ts";
import { CSV_RULES } from "../ledger/csv.ts";
import { TRANSACTION_CSV_COLUMNS } from "../transactions/export.ts";

const CSV_PATH = "/v1/reports/transactions.csv";
const { page: _page, limit: _limit, ...filters } = v1PageQuery;

const csvDoc: RouteDoc = {
  operationId: "exportTransactions",
  summary: "The transactions as CSV (all matching, streamed)",
  description:
    `Columns: ${TRANSACTION_CSV_COLUMNS.join(", ")}; newest first; created_at and completed_at in UTC, date is created_at's day in the merchant's time zone ` +
    `(named in timezone). ${CSV_RULES} The filters of GET /api/transactions/list, no paging, but date_from and date_to are days in the merchant's time zone.`,
  tag: "Transactions",
  query: {
    ...filters,
    search: { description: "Exact match on reference, client_reference, provider_reference, the payer's e-mail or phone (as the list's)", schema: str(undefined, { maxLength: 100 }) },
  },
  contentType: "text/csv",
  response: str("CSV text with a header row"),
};

/** What the OpenAPI document says of the CSV report (a plain route, not a row of the table). */
export const transactionReportDocs: DocumentedRoute[] = [{ method: "GET", path: CSV_PATH, doc: csvDoc }];

/**
 * GET /v1/reports/transactions.csv: a plain route because its answer is a stream, not one GraphQL result.
 * Credentials as every /v1 read (an API key or a signed-in user, so the dashboard can download it).
 */
export function registerTransactionReportRoutes(app: FastifyInstance, services: Pick<Services, "transactions">, exports: ExportSlots): void {
  app.get(CSV_PATH, { config: restRoutePolicy({ method: "GET", path: CSV_PATH }) }, async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    assertSafeText({ query });
    const { status, dateFrom, dateTo } = pageVariables(query);
    const exported = await services.transactions.exportCsv(request.principal!, { status, dateFrom, dateTo, search: stringParam(query, "search") });
    return exports.send(reply, request.principal!, exported);
  });
}
