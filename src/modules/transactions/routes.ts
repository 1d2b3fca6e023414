import { graphql } from "../../rest/gql/index.ts";
import { UTC } from "../../days.ts";
import type { RestListedTransactionFragment, RestTransactionOutcomeFragment, RestTransactionSummaryFragment, V1TransactionFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { bodyFields, boolField, intField, intParam, pageVariables, required, stringParam } from "../../rest/params.ts";
import { body, bool, dateTime, envelope, int, list, nullable, obj, oneOfStrings, pageQuery, schemas, str, v1PageQuery } from "../../openapi/schemas.ts";
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

/**
 * A /v1 list item: the list item of /api/transactions/list, then who paid and how (the payer's phone and e-mail, the
 * card's brand and last 4 or the M-Pesa receipt), the customer and the metadata.
 */
graphql(`
  fragment V1Transaction on Transaction {
    ...RestListedTransaction
    phoneNumber email metadata completedAt
    customer { databaseId }
    paymentDetail { method cardBrand cardLast4 receipt }
  }
`);

const v1Item = (t: V1TransactionFragment) =>
  Object.assign(listItem(t), {
    phone_number: t.phoneNumber,
    email: t.email,
    customer: t.customer?.databaseId ?? null,
    method: t.paymentDetail
      ? { type: t.paymentDetail.method, card_brand: t.paymentDetail.cardBrand, card_last4: t.paymentDetail.cardLast4, receipt: t.paymentDetail.receipt }
      : null,
    metadata: t.metadata,
    completed_at: t.completedAt,
  });

const v1TransactionSchema = obj({
  ...(schemas.transactionListItem.properties as Record<string, Record<string, unknown>>),
  phone_number: nullable(str("The payer's phone, 2547XXXXXXXX")),
  email: nullable(str("The payer's e-mail")),
  customer: nullable(int("The customer's id, when the payment is a customer's")),
  method: nullable(
    obj(
      {
        type: oneOfStrings(["card", "mpesa"]),
        card_brand: nullable(str("Visa, Mastercard ... (cards)")),
        card_last4: nullable(str("The card's last 4 digits (cards)")),
        receipt: nullable(str("The M-Pesa receipt code once paid (M-Pesa)")),
      },
      { description: "How it was paid; null until a payment is attempted" },
    ),
  ),
  metadata: schemas.metadata,
  completed_at: nullable(dateTime()),
});

/** The /v1 list's own filters: query parameter -> GraphQL argument (all exact matches). */
const V1_TEXT_FILTERS = { client_reference: "clientReference", receipt: "receipt", phone: "phone", email: "email", search: "search" } as const;

export const transactionRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/transactions",
    doc: {
      operationId: "listTransactionsV1",
      summary: "The merchant's transactions, newest first, by page, found by the shop's own reference, the receipt or the payer",
      description:
        "Every filter is an exact match (through an index), and all given must hold. Days are the merchant's (the answer's timezone). /api/transactions/list keeps its published shape.",
      tag: "Transactions",
      query: {
        ...v1PageQuery,
        client_reference: { description: "Exactly your own reference (initialize's `reference`); several payments may match", schema: str(undefined, { maxLength: 100 }) },
        receipt: { description: "Exactly the provider's receipt, e.g. the M-Pesa receipt code SBX0A2186F", schema: str(undefined, { maxLength: 100 }) },
        phone: { description: "The payer's phone in any form: 0712345678, 254712345678 or +254712345678", schema: str() },
        email: { description: "The payer's e-mail, in any case", schema: str() },
        customer: { description: "A customer's id", schema: int(undefined, { minimum: 1 }) },
        search: { description: "Any one of: our reference, client_reference, the receipt, the payer's phone (any form) or e-mail (any case); exact", schema: str(undefined, { maxLength: 100 }) },
      },
      response: envelope({ data: list(v1TransactionSchema), ...schemas.v1Page }),
    },
    operation: graphql(`
      query V1ListTransactions(
        $page: Int, $limit: Int, $status: TransactionStatus, $dateFrom: String, $dateTo: String,
        $clientReference: String, $receipt: String, $phone: String, $email: String, $customer: Int, $search: String
      ) {
        transactionsPage(
          page: $page, limit: $limit, status: $status, dateFrom: $dateFrom, dateTo: $dateTo,
          clientReference: $clientReference, receipt: $receipt, phone: $phone, email: $email, customer: $customer, search: $search
        ) {
          __typename
          ... on Error { code message }
          ... on TransactionPage { total page limit pages timezone items { ...V1Transaction } }
        }
      }
    `),
    variables: ({ query }) =>
      Object.assign(
        pageVariables(query),
        Object.fromEntries(Object.entries(V1_TEXT_FILTERS).map(([param, arg]) => [arg, stringParam(query, param)])),
        { customer: intParam(query, "customer") },
      ),
    respond: ({ transactionsPage }) => pageBody(transactionsPage, v1Item, { timezone: transactionsPage.timezone }),
  }),

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
