import { NotFoundError, ValidationError } from "../../errors.ts";
import { body, dateTime, envelope, int, list, nullable, obj, oneOfStrings, schemas, str } from "../../openapi/schemas.ts";
import { intField, intParam, stringField } from "../../rest/params.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1ReconciliationFragment, V1ReconciliationItemsFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { itemKinds } from "./service.ts";

/** /v1/reconciliations over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
graphql(`
  fragment V1Reconciliation on Reconciliation { databaseId paymentChannelId date status summary error createdAt completedAt }
`);
graphql(`
  fragment V1ReconciliationItems on Reconciliation {
    ...V1Reconciliation
    items { kind reference providerReference gatewayStatus providerStatus gatewayAmount providerAmount currency resolution }
  }
`);
type V1ReconciliationItem = V1ReconciliationItemsFragment["items"][number];

const toV1Item = (i: V1ReconciliationItem) => ({
  kind: i.kind,
  reference: i.reference,
  provider_reference: i.providerReference,
  gateway_status: i.gatewayStatus,
  provider_status: i.providerStatus,
  gateway_amount: i.gatewayAmount,
  provider_amount: i.providerAmount,
  currency: i.currency,
  resolution: i.resolution,
});

const toV1 = (r: V1ReconciliationFragment & { items?: V1ReconciliationItem[] }) => ({
  id: r.databaseId,
  payment_channel_id: r.paymentChannelId,
  date: r.date,
  status: r.status,
  summary: r.summary,
  error: r.error,
  created_at: r.createdAt,
  completed_at: r.completedAt,
  ...(r.items ? { items: r.items.map(toV1Item) } : {}),
});

const itemSchema = obj({
  kind: oneOfStrings(itemKinds),
  reference: nullable(str()),
  provider_reference: nullable(str()),
  gateway_status: nullable(str()),
  provider_status: nullable(str()),
  gateway_amount: nullable(int("Minor units")),
  provider_amount: nullable(int("Minor units")),
  currency: nullable(str()),
  resolution: nullable(str("settled_via_verify, verify_did_not_settle, or null")),
});

const reconciliationFields = {
  id: int(),
  payment_channel_id: int(),
  date: str("YYYY-MM-DD (UTC)", { format: "date" }),
  status: oneOfStrings(["running", "completed", "failed"]),
  summary: { type: "object", description: "Counts and totals on each side, settlements (Paystack), the balance beside the ledger's (M-Pesa)" },
  error: nullable(str()),
  created_at: dateTime(),
  completed_at: nullable(dateTime()),
};
const reconciliationSchema = obj(reconciliationFields);
const withItems = obj({ ...reconciliationFields, items: list(itemSchema) });

const TAG = "Reconciliation";

/** An id in the path: anything but a plausible id is simply not found. */
function idParam(value: string | undefined): number {
  if (!value || !/^\d{1,9}$/.test(value)) throw new NotFoundError("Reconciliation");
  return Number(value);
}

export const reconciliationRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/reconciliations",
    doc: {
      operationId: "listReconciliations",
      summary: "The merchant's reconciliation reports, newest first, by page",
      tag: TAG,
      query: {
        page: { description: "From 1", schema: int(undefined, { minimum: 1 }) },
        limit: { description: "1 to 100 (default 20)", schema: int(undefined, { minimum: 1, maximum: 100 }) },
        payment_channel_id: { description: "Only this channel's reports", schema: int() },
      },
      response: envelope({ data: list(reconciliationSchema), ...schemas.page }),
    },
    operation: graphql(`
      query V1ListReconciliations($page: Int, $limit: Int, $paymentChannelId: Int) {
        reconciliationsPage(page: $page, limit: $limit, paymentChannelId: $paymentChannelId) {
          __typename
          ... on Error { code message }
          ... on ReconciliationPage { total page limit pages items { ...V1Reconciliation } }
        }
      }
    `),
    variables: ({ query }) => {
      const paymentChannelId = intParam(query, "payment_channel_id");
      if (paymentChannelId !== undefined && (paymentChannelId < 1 || paymentChannelId > 2_147_483_647)) throw new ValidationError("payment_channel_id", "must be a channel id");
      return { page: intParam(query, "page"), limit: intParam(query, "limit"), paymentChannelId };
    },
    respond: (data) => pageBody(data.reconciliationsPage, toV1),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/reconciliations/:id",
    doc: { operationId: "getReconciliation", summary: "One reconciliation report, with its items", tag: TAG, response: envelope({ data: withItems }), errors: [404, 414] },
    operation: graphql(`
      query V1Reconciliation($id: Int!) {
        reconciliation(id: $id) { __typename ... on Error { code message } ... on Reconciliation { ...V1ReconciliationItems } }
      }
    `),
    variables: ({ params }) => ({ id: idParam(params.id) }),
    respond: (data) => ({ body: { status: "success", data: toV1(data.reconciliation) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/reconciliations",
    doc: {
      operationId: "runReconciliation",
      summary: "Reconcile one channel's day now (owners): a new report, completed or failed, with its items",
      tag: TAG,
      body: body({ payment_channel_id: int(undefined, { minimum: 1 }), date: str("YYYY-MM-DD (UTC), today or earlier", { format: "date" }) }, ["payment_channel_id", "date"]),
      status: 201,
      response: envelope({ data: withItems }),
      errors: [404],
    },
    operation: graphql(`
      mutation V1RunReconciliation($input: RunReconciliationInput!) {
        runReconciliation(input: $input) { __typename ... on Error { code message } ... on Reconciliation { ...V1ReconciliationItems } }
      }
    `),
    variables: ({ body }) => {
      const paymentChannelId = intField(body, "payment_channel_id");
      if (paymentChannelId === undefined) throw new ValidationError("payment_channel_id", "is required");
      if (paymentChannelId < 1 || paymentChannelId > 2_147_483_647) throw new ValidationError("payment_channel_id", "must be a channel id");
      const date = stringField(body, "date");
      if (date === undefined) throw new ValidationError("date", "is required: YYYY-MM-DD (UTC)");
      return { input: { paymentChannelId, date } };
    },
    respond: (data) => ({ statusCode: 201, body: { status: "success", data: toV1(data.runReconciliation) } }),
  }),
];
