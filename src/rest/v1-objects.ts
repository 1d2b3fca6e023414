import type { DocumentTypeDecoration, ResultOf } from "@graphql-typed-document-node/core";
import { envelope, list, schemas, v1PageQuery } from "../openapi/schemas.ts";
import { pageVariables } from "./params.ts";
import { defineRoute, pageBody, type RestRequest, type RestRoute } from "./route-table.ts";

/**
 * The routes every /v1 money object has, over its GraphQL fields: its creation (201 in the v1 envelope), one
 * by id or reference, and the paged list in the envelope of /api/transactions/list (data, total, page, limit,
 * pages, and the time zone whose days date_from and date_to are: the merchant's), newest first, with the status
 * and date filters (plus any of the object's own).
 */
interface V1Object<Fragment extends DocumentTypeDecoration<any, any>> {
  /** e.g. "/v1/payouts" */
  path: string;
  tag: string;
  /** Singular and plural names as the operations say them: "Payout", "Payouts". */
  one: string;
  many: string;
  /** The fields selected for the REST shape: a generated fragment (`graphql("fragment V1Payout on Payout { ... }")`). */
  fragment: Fragment;
  /** The documented item schema and the mapping to it. */
  schema: Record<string, unknown>;
  toV1: (item: ResultOf<Fragment>) => Record<string, unknown>;
}

/** The fragment's name, the type it is on, and its text, to spread into the operations built below. */
function fragmentOf(fragment: DocumentTypeDecoration<any, any>) {
  const text = String(fragment);
  const [, name, type] = /fragment (\w+) on (\w+)/.exec(text) ?? [];
  if (!name || !type) throw new Error(`not a fragment: ${text}`);
  return { name, type, text };
}

const lower = (name: string) => name[0]!.toLowerCase() + name.slice(1);

/** POST {path} — creates the object through GraphQL's create<One>(input); `input` maps the REST body to it. */
export function v1CreateRoute<Fragment extends DocumentTypeDecoration<any, any>>(
  o: V1Object<Fragment> & { summary: string; body: Record<string, unknown>; input: (body: RestRequest["body"]) => Record<string, unknown> },
): RestRoute {
  const field = `create${o.one}`;
  const f = fragmentOf(o.fragment);
  return defineRoute<Record<string, ResultOf<Fragment>>>({
    method: "POST",
    path: o.path,
    doc: {
      operationId: field,
      summary: o.summary,
      tag: o.tag,
      body: o.body,
      status: 201,
      response: envelope({ data: o.schema }),
      errors: [404, 409, 422, 502],
    },
    operation: `mutation V1Create${o.one}($input: Create${o.one}Input!) {
      ${field}(input: $input) {
        __typename
        ... on Error { code message }
        ... on ${f.type} { ...${f.name} }
      }
    }
    ${f.text}`,
    variables: ({ body }) => ({ input: o.input(body) }),
    respond: (data) => ({ statusCode: 201, body: { status: "success", data: o.toV1(data[field]!) } }),
  });
}

/** GET {path}/:id — the object by id or reference; another merchant's, or the other mode's, is the 404 envelope. */
export function v1GetRoute<Fragment extends DocumentTypeDecoration<any, any>>(o: V1Object<Fragment> & { summary: string }): RestRoute {
  const field = lower(o.one);
  const f = fragmentOf(o.fragment);
  return defineRoute<Record<string, ResultOf<Fragment>>>({
    method: "GET",
    path: `${o.path}/:id`,
    doc: { operationId: `get${o.one}`, summary: o.summary, tag: o.tag, response: envelope({ data: o.schema }), errors: [404, 414] },
    operation: `query V1${o.one}($reference: String!) {
      ${field}(reference: $reference) {
        __typename
        ... on Error { code message }
        ... on ${f.type} { ...${f.name} }
      }
    }
    ${f.text}`,
    variables: ({ params }) => ({ reference: params.id }),
    respond: (data) => ({ body: { status: "success", data: o.toV1(data[field]!) } }),
  });
}

/** GET {path} — one page, newest first; `filters` adds the object's own query parameters (all strings). */
export function v1ListRoute<Fragment extends DocumentTypeDecoration<any, any>>(o: V1Object<Fragment> & { summary: string; filters?: Record<string, string> }): RestRoute {
  const field = `${lower(o.many)}Page`;
  const filters = Object.entries(o.filters ?? {});
  const f = fragmentOf(o.fragment);
  return defineRoute<Record<string, { items: ResultOf<Fragment>[]; total: number; page: number; limit: number; pages: number; timezone: string }>>({
    method: "GET",
    path: o.path,
    doc: {
      operationId: `list${o.many}`,
      summary: o.summary,
      tag: o.tag,
      query: { ...v1PageQuery, ...Object.fromEntries(filters.map(([name, description]) => [name, { description, schema: { type: "string" } }])) },
      response: envelope({ data: list(o.schema), ...schemas.v1Page }),
    },
    operation: `query V1List${o.many}($page: Int, $limit: Int, $status: TransactionStatus, $dateFrom: String, $dateTo: String${filters.map(([name]) => `, $${name}: String`).join("")}) {
      ${field}(page: $page, limit: $limit, status: $status, dateFrom: $dateFrom, dateTo: $dateTo${filters.map(([name]) => `, ${name}: $${name}`).join("")}) {
        __typename
        ... on Error { code message }
        ... on ${f.type}Page { total page limit pages timezone items { ...${f.name} } }
      }
    }
    ${f.text}`,
    variables: ({ query }) =>
      Object.assign(pageVariables(query), Object.fromEntries(filters.map(([name]) => [name, typeof query[name] === "string" ? query[name] : undefined]))),
    respond: (data) => pageBody(data[field]!, o.toV1, { timezone: data[field]!.timezone }),
  });
}
