import { NotFoundError, ValidationError } from "../../errors.ts";
import { body, dateTime, envelope, int, list, nullable, obj, oneOfStrings, schemas, str } from "../../openapi/schemas.ts";
import { intField, intParam, stringField } from "../../rest/params.ts";
import { defineRoute } from "../../rest/route-table.ts";
import { itemKinds } from "./service.ts";

/** /v1/reconciliations over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
interface ItemData {
  kind: string;
  reference: string | null;
  providerReference: string | null;
  gatewayStatus: string | null;
  providerStatus: string | null;
  gatewayAmount: number | null;
  providerAmount: number | null;
  currency: string | null;
  resolution: string | null;
}

interface ReconciliationData {
  databaseId: number;
  paymentChannelId: number;
  date: string;
  status: string;
  summary: Record<string, unknown>;
  error: string | null;
  createdAt: string;
  completedAt: string | null;
  items?: ItemData[];
}

const fields = "databaseId paymentChannelId date status summary error createdAt completedAt";
const itemFields = "kind reference providerReference gatewayStatus providerStatus gatewayAmount providerAmount currency resolution";

const toV1Item = (i: ItemData) => ({
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

const toV1 = (r: ReconciliationData) => ({
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

const result = (field: string, selection: string) => `
  ${field} {
    __typename
    ... on Error { code message }
    ... on Reconciliation { ${selection} }
  }`;

export const reconciliationRoutes = [
  defineRoute<{ reconciliationsPage: { items: ReconciliationData[]; total: number; page: number; limit: number; pages: number } }>({
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
    operation: `query V1ListReconciliations($page: Int, $limit: Int, $paymentChannelId: Int) {
      reconciliationsPage(page: $page, limit: $limit, paymentChannelId: $paymentChannelId) {
        __typename
        ... on Error { code message }
        ... on ReconciliationPage { total page limit pages items { ${fields} } }
      }
    }`,
    variables: ({ query }) => {
      const paymentChannelId = intParam(query, "payment_channel_id");
      if (paymentChannelId !== undefined && (paymentChannelId < 1 || paymentChannelId > 2_147_483_647)) throw new ValidationError("payment_channel_id", "must be a channel id");
      return { page: intParam(query, "page"), limit: intParam(query, "limit"), paymentChannelId };
    },
    respond: (data) => {
      const p = data.reconciliationsPage;
      return { body: { status: "success", data: p.items.map(toV1), total: p.total, page: p.page, limit: p.limit, pages: p.pages } };
    },
  }),
  defineRoute<{ reconciliation: ReconciliationData }>({
    method: "GET",
    path: "/v1/reconciliations/:id",
    doc: { operationId: "getReconciliation", summary: "One reconciliation report, with its items", tag: TAG, response: envelope({ data: withItems }), errors: [404, 414] },
    operation: `query V1Reconciliation($id: Int!) {${result("reconciliation(id: $id)", `${fields} items { ${itemFields} }`)}
    }`,
    variables: ({ params }) => ({ id: idParam(params.id) }),
    respond: (data) => ({ body: { status: "success", data: toV1(data.reconciliation) } }),
  }),
  defineRoute<{ runReconciliation: ReconciliationData }>({
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
    operation: `mutation V1RunReconciliation($input: RunReconciliationInput!) {${result("runReconciliation(input: $input)", `${fields} items { ${itemFields} }`)}
    }`,
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
