import type { FastifyInstance } from "fastify";
import { dateTime, envelope, int, list, obj, oneOfStrings, schemas, str, v1PageQuery } from "../../openapi/schemas.ts";
import type { DocumentedRoute } from "../../openapi/types.ts";
import { intParam, stringParam } from "../../rest/params.ts";
import type { ExportSlots } from "../../rest/export-slots.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1BalanceFragment, V1BalanceTransactionFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody, restRoutePolicy, type RouteDoc } from "../../rest/route-table.ts";
import type { Services } from "../../services.ts";
import { assertSafeText } from "../../validation.ts";
import { CSV_RULES } from "./csv.ts";
import { BALANCE_TRANSACTION_TYPES } from "./postings.ts";
import { parseBalanceTransactionType } from "./service.ts";

/** /v1/balance and /v1/balance/transactions over GraphQL, and the streamed CSV report (a plain route). */

const signed = (description: string) => int(description);

const balanceItem = obj({
  payment_channel_id: int(),
  provider: str(),
  currency: str("ISO 4217"),
  collected: int("Payments received, minor units"),
  fees: int("What the provider kept of them"),
  refunded: int("Refunds completed"),
  paid_out: int("Payouts completed"),
  pending_out: int("Reserved for refunds and payouts in flight"),
  adjustments: signed("The sum of adjustments, money in positive"),
  disputed: int("Held while payers' chargebacks are open"),
  charged_back: int("Taken back by lost disputes"),
  available: signed("collected - fees - refunded - paid_out - pending_out - disputed - charged_back + adjustments"),
});

const balanceTransactionItem = obj({
  id: int(),
  type: oneOfStrings([...BALANCE_TRANSACTION_TYPES]),
  amount: signed("Signed minor units: money in positive; a failed refund or payout is 0, a dispute's hold negative, its release positive, its loss 0 (the hold already took it)"),
  fee: int("What the provider kept"),
  net: signed("amount - fee"),
  currency: str("ISO 4217"),
  payment_channel_id: int(),
  source_reference: str("The payment's, refund's, payout's or dispute's reference; an adjustment's own (adj_...)"),
  created_at: dateTime(),
});

graphql(`
  fragment V1Balance on ChannelBalance { paymentChannelId provider currency collected fees refunded paidOut pendingOut adjustments disputed chargedBack available }
`);
graphql(`
  fragment V1BalanceTransaction on BalanceTransaction { databaseId type amount fee net currency paymentChannelId sourceReference createdAt }
`);

const toV1Balance = (b: V1BalanceFragment) => ({
  payment_channel_id: b.paymentChannelId,
  provider: b.provider,
  currency: b.currency,
  collected: b.collected,
  fees: b.fees,
  refunded: b.refunded,
  paid_out: b.paidOut,
  pending_out: b.pendingOut,
  adjustments: b.adjustments,
  disputed: b.disputed,
  charged_back: b.chargedBack,
  available: b.available,
});

const toV1BalanceTransaction = (e: V1BalanceTransactionFragment) => ({
  id: e.databaseId,
  type: e.type,
  amount: e.amount,
  fee: e.fee,
  net: e.net,
  currency: e.currency,
  payment_channel_id: e.paymentChannelId,
  source_reference: e.sourceReference,
  created_at: e.createdAt,
});

const typeQuery = { description: `One of ${BALANCE_TRANSACTION_TYPES.join(", ")}`, schema: oneOfStrings([...BALANCE_TRANSACTION_TYPES]) };
const channelQuery = { description: "Only this payment channel's", schema: int(undefined, { minimum: 1 }) };
const { status: _status, ...pageAndDates } = v1PageQuery;
const { page: _page, limit: _limit, ...dates } = pageAndDates;

/** The filters as the list and the CSV take them: a bad type is a 400 naming `type` (GraphQL would name its enum). */
function filterVariables(query: Record<string, unknown>) {
  const type = stringParam(query, "type");
  return {
    type: type === undefined ? undefined : parseBalanceTransactionType(type),
    paymentChannelId: intParam(query, "payment_channel_id"),
    dateFrom: stringParam(query, "date_from"),
    dateTo: stringParam(query, "date_to"),
  };
}

export const ledgerRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/balance",
    doc: {
      operationId: "getBalance",
      summary: "Each channel's balance per currency, from the ledger",
      description: "available = collected - fees - refunded - paid_out - pending_out - disputed - charged_back + adjustments (minor units). Only channels with ledger activity are listed.",
      tag: "Balances",
      query: { payment_channel_id: channelQuery },
      response: envelope({ data: list(balanceItem) }),
    },
    operation: graphql(`
      query V1Balance($paymentChannelId: Int) {
        balance(paymentChannelId: $paymentChannelId) { ...V1Balance }
      }
    `),
    variables: ({ query }) => ({ paymentChannelId: intParam(query, "payment_channel_id") }),
    respond: (data) => ({ body: { status: "success", data: data.balance.map(toV1Balance) } }),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/balance/transactions",
    doc: {
      operationId: "listBalanceTransactions",
      summary: "What moved the balances, newest first, by page",
      description: "The sum of net over a channel's balance transactions equals its available + pending_out.",
      tag: "Balances",
      query: { ...pageAndDates, type: typeQuery, payment_channel_id: channelQuery },
      response: envelope({ data: list(balanceTransactionItem), ...schemas.v1Page }),
    },
    operation: graphql(`
      query V1ListBalanceTransactions($page: Int, $limit: Int, $type: BalanceTransactionType, $paymentChannelId: Int, $dateFrom: String, $dateTo: String) {
        balanceTransactionsPage(page: $page, limit: $limit, type: $type, paymentChannelId: $paymentChannelId, dateFrom: $dateFrom, dateTo: $dateTo) {
          __typename
          ... on Error { code message }
          ... on BalanceTransactionPage { total page limit pages timezone items { ...V1BalanceTransaction } }
        }
      }
    `),
    variables: ({ query }) => ({ page: intParam(query, "page"), limit: intParam(query, "limit"), ...filterVariables(query) }),
    respond: (data) => pageBody(data.balanceTransactionsPage, toV1BalanceTransaction, { timezone: data.balanceTransactionsPage.timezone }),
  }),
];

const CSV_PATH = "/v1/reports/balance-transactions.csv";

const csvDoc: RouteDoc = {
  operationId: "exportBalanceTransactions",
  summary: "The balance transactions as CSV (all matching, streamed)",
  description:
    "Columns: id, type, amount, fee, net, currency, payment_channel_id, source_reference, description (an adjustment's note), created_at (UTC), " +
    "date (created_at's day in the merchant's time zone), timezone (that zone); newest first. date_from and date_to are days in the merchant's time zone. " +
    `${CSV_RULES} Same filters as GET /v1/balance/transactions, no paging.`,
  tag: "Balances",
  query: { ...dates, type: typeQuery, payment_channel_id: channelQuery },
  contentType: "text/csv",
  response: str("CSV text with a header row"),
};

/** What the OpenAPI document says of the CSV report (a plain route, not a row of the table). */
export const ledgerReportDocs: DocumentedRoute[] = [{ method: "GET", path: CSV_PATH, doc: csvDoc }];

/**
 * GET /v1/reports/balance-transactions.csv: a plain route because its answer is a stream, not one GraphQL
 * result: the rows are read in keyset batches and written as the client takes them, so memory does not grow
 * with a year of data. Credentials as every /v1 read (an API key or a signed-in user, so the dashboard can
 * download it); the filters are checked before the first byte, so a bad one is the usual 400 envelope.
 */
export function registerLedgerReportRoutes(app: FastifyInstance, services: Pick<Services, "ledger">, exports: ExportSlots): void {
  app.get(CSV_PATH, { config: restRoutePolicy({ method: "GET", path: CSV_PATH }) }, async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    assertSafeText({ query });
    // The merchant's days (the dashboard's and the other /v1 reports'); the filters are checked before any byte is sent.
    const exported = await services.ledger.exportCsv(request.principal!, filterVariables(query));
    return exports.send(reply, request.principal!, exported);
  });
}
