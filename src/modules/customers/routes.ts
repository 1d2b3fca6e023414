import { graphql } from "../../rest/gql/index.ts";
import type { RestCustomerFragment, V1CustomerFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { bodyFields, intParam, required, stringParam } from "../../rest/params.ts";
import { body, dateTime, envelope, int, list, nullable, obj, schemas, str } from "../../openapi/schemas.ts";
import { PHONE_INPUT_DESCRIPTION } from "../../phone.ts";

graphql(`fragment RestCustomer on Customer { databaseId email firstName lastName phone createdAt }`);
graphql(`fragment V1Customer on Customer { databaseId email firstName lastName phone metadata testClock { id } createdAt }`);

const toLegacyCustomer = (c: RestCustomerFragment) => ({
  id: c.databaseId,
  email: c.email,
  first_name: c.firstName,
  last_name: c.lastName,
  phone: c.phone,
  created_at: c.createdAt,
});

/** A customer as /v1 shows it: its integer id (as /api/customers and GraphQL's databaseId), the id charges and initialize take. */
const toV1Customer = (c: V1CustomerFragment) => ({ ...toLegacyCustomer(c), metadata: c.metadata ?? null, test_clock: c.testClock?.id ?? null });
const v1CustomerSchema = obj({
  id: int("The id initialize's and POST /v1/charges' `customer` take"),
  email: str(),
  first_name: nullable(str()),
  last_name: nullable(str()),
  phone: nullable(str("E.164")),
  metadata: nullable({ type: "object", description: "Your own JSON object" }),
  test_clock: nullable(str("Test mode: the test clock (clock_...) the customer's billing follows")),
  created_at: dateTime(),
});

export const customerRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/customers",
    doc: {
      operationId: "createV1Customer",
      summary: "Create a customer (one per e-mail and mode)",
      tag: "Customers",
      body: body({ email: str(), first_name: str(), last_name: str(), phone: str(PHONE_INPUT_DESCRIPTION), metadata: { type: "object", description: "A JSON object of yours, at most 8 KB" }, test_clock: str("Test mode: a test clock's id (clock_...)") }, ["email"]),
      status: 201,
      response: envelope({ data: v1CustomerSchema }),
      errors: [409],
    },
    operation: graphql(`
      mutation V1CreateCustomer($input: CreateCustomerInput!) {
        createCustomer(input: $input) { __typename ... on Customer { ...V1Customer } ... on Error { code message } }
      }
    `),
    variables: ({ body }) => ({ input: { ...bodyFields(body, { email: "email", firstName: "first_name", lastName: "last_name", phone: "phone", testClock: "test_clock" }), metadata: body.metadata ?? undefined } }),
    respond: ({ createCustomer }) => ({ statusCode: 201, body: { status: "success", data: toV1Customer(createCustomer) } }),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/customers/:id",
    doc: { operationId: "getV1Customer", summary: "One customer, by its id", tag: "Customers", response: envelope({ data: v1CustomerSchema }), errors: [404] },
    operation: graphql(`
      query V1Customer($id: Int!) { customer(id: $id) { __typename ... on Customer { ...V1Customer } ... on Error { code message } } }
    `),
    variables: ({ params }) => ({ id: required(intParam(params, "id"), "id") }),
    respond: ({ customer }) => ({ body: { status: "success", data: toV1Customer(customer) } }),
  }),
  defineRoute({
    method: "POST",
    path: "/api/customers/create",
    doc: {
      operationId: "createCustomer",
      summary: "Create a customer",
      tag: "Customers",
      body: body({ email: str(), first_name: str(), last_name: str(), phone: str(PHONE_INPUT_DESCRIPTION) }, ["email"]),
      status: 201,
      response: envelope({ message: str(), customer: schemas.customer }),
      errors: [409, 422],
    },
    operation: graphql(`
      mutation RestCreateCustomer($input: CreateCustomerInput!) {
        createCustomer(input: $input) {
          ... on Customer { ...RestCustomer }
          ... on Error { code message }
        }
      }
    `),
    variables: ({ body }) => ({ input: bodyFields(body, { email: "email", firstName: "first_name", lastName: "last_name", phone: "phone" }) }),
    respond: ({ createCustomer }) => ({
      statusCode: 201,
      body: { status: "success", message: "Customer created", customer: toLegacyCustomer(createCustomer) },
    }),
  }),
  defineRoute({
    method: "GET",
    path: "/api/customers/list",
    doc: {
      operationId: "listCustomers",
      summary: "The merchant's customers, by page",
      tag: "Customers",
      query: {
        search: { description: "Part of the e-mail or name", schema: str() },
        page: { description: "From 1", schema: int(undefined, { minimum: 1 }) },
        limit: { description: "1 to 100 (default 20)", schema: int(undefined, { minimum: 1, maximum: 100 }) },
      },
      response: envelope({ data: list(schemas.customer), ...schemas.page }),
    },
    operation: graphql(`
      query RestListCustomers($search: String, $page: Int, $limit: Int) {
        customers(search: $search, page: $page, limit: $limit) {
          ... on CustomerPage { items { ...RestCustomer } total page limit pages }
          ... on Error { code message }
        }
      }
    `),
    variables: ({ query }) => ({
      search: stringParam(query, "search"),
      page: intParam(query, "page"),
      limit: intParam(query, "limit"),
    }),
    respond: ({ customers }) => pageBody(customers, toLegacyCustomer),
  }),
];
