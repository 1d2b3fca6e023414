import { graphql } from "../../rest/gql/index.ts";
import type { RestCustomerFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { bodyFields, intParam, stringParam } from "../../rest/params.ts";
import { body, envelope, int, list, schemas, str } from "../../openapi/schemas.ts";
import { PHONE_INPUT_DESCRIPTION } from "../../phone.ts";

graphql(`fragment RestCustomer on Customer { databaseId email firstName lastName phone createdAt }`);

const toLegacyCustomer = (c: RestCustomerFragment) => ({
  id: c.databaseId,
  email: c.email,
  first_name: c.firstName,
  last_name: c.lastName,
  phone: c.phone,
  created_at: c.createdAt,
});

export const customerRoutes = [
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
