import { dateTime, envelope, int, list, nullable, obj, str } from "../../openapi/schemas.ts";
import type { ProviderCallRecord } from "../../providers/call-record.ts";
import { defineRoute, type RestRoute } from "../../rest/route-table.ts";

/** GET /v1/transactions/:reference/provider-calls over the Transaction's providerCalls field (owners and developers). */
type ProviderCallData = ProviderCallRecord & { createdAt: string };

const toV1ProviderCall = (c: ProviderCallData) => ({
  connector: c.connector,
  operation: c.operation,
  method: c.method,
  path: c.path,
  status_code: c.statusCode,
  duration_ms: c.durationMs,
  request_body: c.requestBody,
  response_body: c.responseBody,
  error: c.error,
  created_at: c.createdAt,
});

const providerCallSchema = obj({
  connector: str("The provider: mpesa, paystack"),
  operation: str("What the call did, in the connector's words: stk_push, stk_query, b2c, refund, transaction_verify ..."),
  method: str("The HTTP method"),
  path: str("The URL's path, without host or query string"),
  status_code: nullable(int("The HTTP status of the answer; null when none came (see error)")),
  duration_ms: int(),
  request_body: nullable(str("As sent, with secrets, PINs, passwords and card data removed; cut at 16 KiB")),
  response_body: nullable(str("As received, scrubbed the same way; cut at 16 KiB")),
  error: nullable(str("Why no usable answer came: timeout, connection refused ...")),
  created_at: dateTime("When the call was made"),
});

export const providerCallRoutes: RestRoute[] = [
  defineRoute<{ transaction: { providerCalls: ProviderCallData[] | null } }>({
    method: "GET",
    path: "/v1/transactions/:reference/provider-calls",
    doc: {
      operationId: "listTransactionProviderCalls",
      summary: "What the gateway sent the transaction's provider and what it answered",
      description:
        "Its calls and its checkout attempts' calls, oldest first (the latest 200), kept 30 days. Owners and developers only (a viewer is refused); another merchant's transaction, or the other mode's, is a 404.",
      tag: "Transactions",
      response: envelope({ data: list(providerCallSchema) }),
      errors: [404, 414],
    },
    operation: `query V1TransactionProviderCalls($reference: String!) {
      transaction(reference: $reference) {
        __typename
        ... on Error { code message }
        ... on Transaction { providerCalls { connector operation method path statusCode durationMs requestBody responseBody error createdAt } }
      }
    }`,
    variables: ({ params }) => ({ reference: params.reference! }),
    respond: ({ transaction }) => ({ body: { status: "success", data: (transaction.providerCalls ?? []).map(toV1ProviderCall) } }),
  }),
];
