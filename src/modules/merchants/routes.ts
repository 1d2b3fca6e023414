import { graphql } from "../../rest/gql/index.ts";
import { defineRoute } from "../../rest/route-table.ts";
import { dateTime, envelope, int, obj, oneOfStrings, str } from "../../openapi/schemas.ts";

export const merchantRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/status",
    doc: {
      operationId: "status",
      summary: "Who the credential belongs to, and in which mode",
      tag: "Account",
      response: envelope({
        data: obj({ merchant: obj({ id: int(), name: str(), default_currency: str() }), mode: oneOfStrings(["test", "live"]), api_version: str(), server_time: dateTime() }),
      }),
    },
    operation: graphql(`query V1Status { viewer { databaseId name mode defaultCurrency } }`),
    variables: () => ({}),
    respond: ({ viewer }) => ({
      body: {
        status: "success",
        data: {
          merchant: { id: viewer.databaseId, name: viewer.name, default_currency: viewer.defaultCurrency },
          mode: viewer.mode,
          api_version: "v1",
          server_time: new Date().toISOString(),
        },
      },
    }),
  }),
];
