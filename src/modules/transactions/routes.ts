import { graphql } from "../../rest/gql/index.ts";
import { UTC } from "../../days.ts";
import type { RestListedTransactionFragment, RestTransactionOutcomeFragment, RestTransactionSummaryFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { bodyFields, boolField, intField, pageVariables, required, stringParam } from "../../rest/params.ts";
import { body, bool, envelope, int, list, obj, pageQuery, schemas, str } from "../../openapi/schemas.ts";
import { PHONE_INPUT_DESCRIPTION } from "../../phone.ts";

graphql(`fragment RestTransactionSummary on Transaction { databaseId reference amount status createdAt }`);

const summary = (t: RestTransactionSummaryFragment) => ({
  id: t.databaseId,
  reference: t.reference,
  amount: t.amount,
  status: t.status,
  created_at: t.createdAt,
});

/** What the gateway learnt of a payment beyond the published fields: currency, references, the provider's verdict. */
graphql(`
  fragment RestTransactionOutcome on Transaction { amount currency clientReference providerReference failureCode failureReason amountRefunded disputeStatus fee net }
`);

/**
 * Adds the outcome fields after the published ones (legacy clients ignore extra keys): always present, null when
 * unknown. Assigned onto the caller's object rather than spread into it: V8 (Node 20) copies a spread that adds
 * keys to an object literal (`{ ...a, ...b }`) property by property through its slow path, about 6 us an object,
 * which for a page of 20 cost more than the page's SQL (bench/README.md).
 */
export function withOutcome<T extends object>(item: T, t: RestTransactionOutcomeFragment) {
  return Object.assign(item, {
    currency: t.currency,
    client_reference: t.clientReference,
    provider_reference: t.providerReference,
    failure_code: t.failureCode,
    failure_reason: t.failureReason,
    // Refunds never change a completed payment's status (legacy clients keep working): these say how much went back.
    amount_refunded: t.amountRefunded,
    refunded: t.amountRefunded > 0 && t.amountRefunded >= t.amount,
    // Likewise a chargeback: the status stays completed, these say a payer disputed it and where that stands.
    disputed: t.disputeStatus !== null,
    dispute_status: t.disputeStatus,
    // The provider's fee, fixed when the payment completed (its channel's schedule then), and amount - fee; null until completed.
    fee: t.fee,
    net: t.net,
  });
}

graphql(`fragment RestListedTransaction on Transaction { ...RestTransactionSummary ...RestTransactionOutcome paymentMethod }`);
const listItem = (t: RestListedTransactionFragment) => withOutcome(Object.assign(summary(t), { payment_method: t.paymentMethod }), t);

export const transactionRoutes = [
  defineRoute({
    method: "POST",
    path: "/api/transactions/initialize",
    doc: {
      operationId: "initializeTransaction",
      summary: "Start a card payment and get its hosted checkout URL",
      tag: "Transactions",
      body: body(
        {
          amount: int("Minor units", { minimum: 1 }),
          email: str("The payer's e-mail; required unless `customer` is given"),
          customer: int("One of your customers (its id), instead of `email`"),
          save_payment_method: bool("Save the payer's card or M-Pesa phone for later charges (POST /v1/charges) when the payment succeeds; the payer can still untick it"),
          payment_channel_id: int("Default: the merchant's default channel"),
          currency: str("ISO 4217; default: the merchant's currency"),
          description: str(),
          first_name: str(),
          last_name: str(),
          phone: str(PHONE_INPUT_DESCRIPTION),
          callback_url: str("http(s) URL the payer returns to after paying, with ?trxref=&reference= appended"),
          reference: str("Your own reference (at most 100 characters), kept as client_reference; the gateway still assigns `reference`. Need not be unique", { maxLength: 100 }),
          metadata: { type: "object", description: "A JSON object of yours, at most 8 KB serialized; echoed by verify, GraphQL and webhooks" },
        },
        ["amount"],
      ),
      response: envelope({
        message: str(),
        transaction: schemas.transactionSummary,
        authorization_url: str("The hosted checkout page to send the payer to"),
        access_code: str(),
        reference: str(),
      }),
      errors: [404, 409, 422, 502],
    },
    operation: graphql(`
      mutation RestInitializeTransaction($input: InitializeTransactionInput!) {
        initializeTransaction(input: $input) {
          __typename
          ... on Error { code message }
          ... on InitializeTransactionPayload {
            reference accessCode authorizationUrl
            transaction { ...RestTransactionSummary }
          }
        }
      }
    `),
    variables: ({ body }) => ({
      input: {
        amount: required(intField(body, "amount"), "amount"),
        paymentChannelId: intField(body, "payment_channel_id"),
        customer: intField(body, "customer"),
        savePaymentMethod: boolField(body, "save_payment_method"),
        ...bodyFields(body, {
          email: "email",
          currency: "currency",
          description: "description",
          firstName: "first_name",
          lastName: "last_name",
          phone: "phone",
          callbackUrl: "callback_url",
          reference: "reference",
        }),
        // Passed as sent: the service refuses what is not an object of at most 8 KB, naming `metadata`.
        metadata: body.metadata ?? undefined,
      },
    }),
    respond: ({ initializeTransaction: r }) => ({
      body: {
        status: "success",
        message: "Authorization URL created",
        transaction: summary(r.transaction),
        authorization_url: r.authorizationUrl,
        access_code: r.accessCode,
        reference: r.reference,
      },
    }),
  }),

  defineRoute({
    method: "GET",
    path: "/api/transactions/verify/:reference",
    doc: {
      operationId: "verifyTransaction",
      summary: "One transaction's status",
      description:
        'The body carries "status" twice, as published: "success" first and the transaction\'s status last, so a JSON parser (last key wins) reads the transaction status. The schema describes what a parser sees. Beyond the published fields: currency, client_reference, provider_reference (the provider\'s receipt), failure_code and failure_reason (null unless failed), fee and net (null until completed) and metadata.',
      tag: "Transactions",
      response: obj({
        status: schemas.transactionStatus,
        transaction: obj({ ...schemas.transactionListItem.properties as Record<string, Record<string, unknown>>, metadata: schemas.metadata }),
      }),
      errors: [404, 414],
    },
    operation: graphql(`
      query RestVerifyTransaction($reference: String!) {
        transaction(reference: $reference) {
          __typename
          ... on Error { code message }
          ... on Transaction { ...RestListedTransaction metadata }
        }
      }
    `),
    variables: ({ params }) => ({ reference: params.reference }),
    respond: ({ transaction: t }) => {
      const transaction = Object.assign(listItem(t), { metadata: t.metadata });
      // The documented body repeats "status": "success" first, the transaction status last, so a legacy
      // client's JSON parser (last key wins) reads the transaction status. JSON.stringify cannot emit
      // a duplicate key, hence the hand-built text.
      return {
        body: `{"status":"success","transaction":${JSON.stringify(transaction)},"status":${JSON.stringify(t.status)}}`,
      };
    },
  }),

  defineRoute({
    method: "GET",
    path: "/api/transactions/list",
    doc: {
      operationId: "listTransactions",
      summary: "The merchant's transactions, newest first, by page",
      tag: "Transactions",
      query: {
        ...pageQuery,
        search: {
          description:
            "Exact match (not a substring) on reference, client_reference, provider_reference (e.g. the M-Pesa receipt), the payer's e-mail (any case) or phone (+254..., 254... or 07...); at most 100 characters",
          schema: str(undefined, { maxLength: 100 }),
        },
      },
      response: envelope({ data: list(schemas.transactionListItem), ...schemas.page }),
    },
    operation: graphql(`
      query RestListTransactions($page: Int, $limit: Int, $status: TransactionStatus, $dateFrom: String, $dateTo: String, $timeZone: String, $search: String) {
        transactionsPage(page: $page, limit: $limit, status: $status, dateFrom: $dateFrom, dateTo: $dateTo, timeZone: $timeZone, search: $search) {
          __typename
          ... on Error { code message }
          ... on TransactionPage { total page limit pages items { ...RestListedTransaction } }
        }
      }
    `),
    // date_from and date_to keep their published meaning, UTC days, whatever the merchant's time zone (the /v1 family's are the merchant's).
    variables: ({ query }) => Object.assign(pageVariables(query), { search: stringParam(query, "search"), timeZone: UTC }),
    respond: ({ transactionsPage }) => pageBody(transactionsPage, listItem),
  }),
];
