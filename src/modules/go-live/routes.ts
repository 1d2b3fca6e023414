import { graphql } from "../../rest/gql/index.ts";
import { defineRoute } from "../../rest/route-table.ts";
import { bool, envelope, list, obj, oneOfStrings, str } from "../../openapi/schemas.ts";
import { GO_LIVE_CHECK_IDS } from "./service.ts";

export const goLiveRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/go-live",
    doc: {
      operationId: "getGoLive",
      summary: "The go-live checklist: what must be true before real money flows",
      description: "Read from live mode whatever the credential's mode. `ready` is true only when every check is ok; `fix` is a dashboard path or what to set.",
      tag: "Account",
      response: envelope({
        data: obj({
          ready: bool(),
          checks: list(obj({ id: oneOfStrings(GO_LIVE_CHECK_IDS), ok: bool(), message: str(), fix: str() })),
        }),
      }),
    },
    operation: graphql(`query V1GoLive { goLive { ready checks { id ok message fix } } }`),
    variables: () => ({}),
    respond: ({ goLive }) => ({ body: { status: "success", data: { ready: goLive.ready, checks: goLive.checks.map((check) => ({ ...check })) } } }),
  }),
];
