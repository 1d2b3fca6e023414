import { defineRoute } from "../../rest/route-table.ts";

interface StatusData {
  viewer: { databaseId: number; name: string; mode: "test" | "live"; defaultCurrency: string };
}

export const merchantRoutes = [
  defineRoute<StatusData>({
    method: "GET",
    path: "/v1/status",
    operation: `query V1Status { viewer { databaseId name mode defaultCurrency } }`,
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
