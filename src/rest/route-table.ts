import type { DocumentTypeDecoration } from "@graphql-typed-document-node/core";
import { isEnumType, parse, validate, type DocumentNode, type ExecutionResult, type GraphQLSchema } from "graphql";
import { compileQuery, isCompiledQuery, type CompiledQuery } from "graphql-jit";
import { GatewayError, ValidationError, errorCatalogue, type ErrorCode } from "../errors.ts";
import type { GraphQLContext } from "../graphql/context.ts";
import { withoutEchoedValues } from "../graphql/hardening.ts";
import { collectResolvedErrors } from "../graphql/resolved-errors.ts";
import type { RouteDoc } from "../openapi/types.ts";

/**
 * The REST compatibility layer as data: each row names the documented method and path, the GraphQL
 * operation it runs against the same schema frontends use, how the legacy request becomes variables,
 * and how the result becomes the documented body. Authorization, validation and business rules
 * therefore live once, behind the schema.
 */
export interface RestRequest {
  body: Record<string, unknown>;
  query: Record<string, unknown>;
  params: Record<string, string>;
  /** The one file of a multipart row (`upload`), as sent. */
  file?: { name: string; bytes: Buffer };
}

export interface RestResponse {
  statusCode?: number;
  /** An object is serialized as JSON; a string is sent as-is (for bodies JSON.stringify cannot express). */
  body: Record<string, unknown> | string;
}

export type { RouteDoc };

/**
 * A paged list in the envelope of /api/transactions/list, each item in its REST shape: data, total, page, limit,
 * pages; the /v1 lists add `timezone`, the zone whose days their date_from and date_to are.
 */
export function pageBody<Item>(
  p: { items: Item[]; total: number; page: number; limit: number; pages: number },
  toRest: (item: Item) => unknown,
  extra: { timezone?: string | null } = {},
): RestResponse {
  const body: Record<string, unknown> = { status: "success", data: p.items.map((item) => toRest(item)), total: p.total, page: p.page, limit: p.limit, pages: p.pages };
  if (extra.timezone) body.timezone = extra.timezone;
  return { body };
}

export interface RestRoute<TData = any> {
  method: "GET" | "POST" | "DELETE";
  /** Fastify path syntax, e.g. /api/transactions/verify/:reference */
  path: string;
  /**
   * The GraphQL document, typed by codegen (`graphql(...)` from src/rest/gql), so `respond` gets the selection's
   * own type; business failures must select `... on Error { code message }`.
   */
  operation: string | DocumentTypeDecoration<TData, any>;
  variables(request: RestRequest): Record<string, unknown>;
  respond(data: Answered<TData>, request: RestRequest): RestResponse;
  doc?: RouteDoc;
  /** A row that takes one file as multipart/form-data (in the form field `field`, at most `maxBytes`) instead of JSON. */
  upload?: { field: string; maxBytes: number };
}

/** A typed error result (`... on Error { code message }`): runOperation throws it, so a row's `respond` never sees one. */
type ErrorResult = { code: string; message: string } | { __typename: `${string}Error` };

/** An operation's data as `respond` gets it: each root field's union without its error members. */
export type Answered<TData> = { [Field in keyof TData]: Exclude<TData[Field], ErrorResult> };

export function defineRoute<TData>(route: RestRoute<TData>): RestRoute<TData> {
  return route;
}

/**
 * Who may call a row, by the API family it belongs to (decided once, at startup): the documented /api
 * routes take API keys only; /v1 routes an API key or a signed-in user's bearer token. Every row runs a
 * GraphQL operation, so every row needs a credential and spends its caller's budget.
 */
export function restRoutePolicy(route: Pick<RestRoute, "method" | "path">): { auth: "api-key" | "api-key-or-user"; rateLimit: "caller" } {
  if (route.path.startsWith("/api/")) return { auth: "api-key", rateLimit: "caller" };
  if (route.path.startsWith("/v1/") && !route.path.startsWith("/v1/auth/")) return { auth: "api-key-or-user", rateLimit: "caller" };
  throw new Error(`REST route ${route.method} ${route.path}: rows live under /api/ (API keys) or /v1/ (keys or users' tokens), not /v1/auth/`);
}

/**
 * The body fields a /v1 write row takes: the properties of its documented body (none when it documents none), so
 * the docs and the rule cannot drift apart. Undefined where any field is let through: the /api family (its published
 * clients may send more than it reads, docs/api.md), reads, and multipart uploads.
 */
export function allowedBodyFields(route: Pick<RestRoute, "method" | "path" | "doc" | "upload">): ReadonlySet<string> | undefined {
  if (!route.path.startsWith("/v1/") || route.method === "GET" || route.upload) return undefined;
  const properties = (route.doc?.body as { properties?: Record<string, unknown> } | undefined)?.properties;
  return new Set(Object.keys(properties ?? {}));
}

/** A 400 naming every field of `body` a /v1 row does not take (a misspelt `metdata` would otherwise be dropped in silence). */
export function refuseUnknownFields(allowed: ReadonlySet<string> | undefined, body: Record<string, unknown>): void {
  if (!allowed) return;
  const unknown = Object.keys(body).filter((field) => !allowed.has(field));
  if (!unknown.length) return;
  const takes = allowed.size ? `this route takes ${[...allowed].join(", ")}` : "this route takes no body fields";
  throw new GatewayError("validation_failed", `Unknown field${unknown.length === 1 ? "" : "s"}: ${unknown.join(", ")} (${takes})`, { field: unknown[0] });
}

export interface CompiledRoute extends RestRoute {
  /** The body fields it takes, when it refuses others (allowedBodyFields). */
  allowedBodyFields: ReadonlySet<string> | undefined;
  document: DocumentNode;
  /** The operation compiled to a function once (graphql-jit), instead of interpreted by execute() per request. */
  compiled: CompiledQuery;
}

/** Parses, validates and compiles every row's operation at startup, so a broken row fails the boot, not a request. */
export function compileRoutes(schema: GraphQLSchema, routes: RestRoute[]): CompiledRoute[] {
  return routes.map((route) => {
    // The /api family's date_from/date_to are UTC days (the published interface); without a timeZone variable
    // (the row sends UTC) its days would silently become the merchant's.
    if (route.path.startsWith("/api/") && String(route.operation).includes("$dateFrom") && !String(route.operation).includes("timeZone: $timeZone")) {
      throw new Error(`REST route ${route.method} ${route.path}: an /api row's dates are UTC days: pass timeZone (UTC) with dateFrom and dateTo`);
    }
    const document = parse(String(route.operation));
    const errors = validate(schema, document);
    if (errors.length) throw new Error(`REST route ${route.method} ${route.path}: ${errors.map((e) => e.message).join("; ")}`);
    const compiled = compileQuery(schema, document);
    if (!isCompiledQuery(compiled)) throw new Error(`REST route ${route.method} ${route.path}: ${compiled.errors?.map((e) => e.message).join("; ")}`);
    return { ...route, allowedBodyFields: allowedBodyFields(route), document, compiled };
  });
}

function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(errorCatalogue, value);
}

/** What each scalar's refusal says, in the words the REST rows always used. */
const SCALAR_PROBLEMS: Record<string, string> = {
  "String cannot represent a non string value": "must be a string",
  "Int cannot represent non-integer value": "must be an integer",
  "Boolean cannot represent a non boolean value": "must be true or false",
};

const restName = (graphqlName: string) => graphqlName.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Variables that do not coerce (graphql-jit's words), as the 400 a REST client reads: the REST field, which is
 * the GraphQL name in snake_case (phoneNumber is phone_number), and the problem as the rows say it. So a row
 * passes its body's fields as sent and GraphQL checks their types once. Anything else: undefined.
 */
export function coercionError(schema: GraphQLSchema, message: string): ValidationError | undefined {
  const missing = /(?:Field value\.(?:[\w.]+\.)?(\w+) of required type \S+ was not provided|Expected non-nullable type \S+ not to be null at value\.(?:[\w.]+\.)?(\w+))\.$/.exec(message);
  if (missing) return new ValidationError(restName((missing[1] ?? missing[2])!), "is required");
  const variable = /^Variable "\$(\w+)" got invalid value /.exec(message)?.[1];
  if (!variable) return undefined;
  const scalar = /; Expected type (String|Int|Boolean); (\1 cannot represent [\w -]+value): /.exec(message);
  const problem = scalar && SCALAR_PROBLEMS[scalar[2]!];
  if (problem) return new ValidationError(restName(variable), problem);
  const enumType = schema.getType(/; Expected type (\w+)\.$/.exec(message)?.[1] ?? "");
  if (isEnumType(enumType)) return new ValidationError(restName(variable), `must be one of ${enumType.getValues().map((v) => v.name).join(", ")}`);
  return undefined;
}

/** Every variable that does not coerce, as one 400 naming the first and listing them all; undefined unless the first is one. */
export function coercionErrors(schema: GraphQLSchema, messages: string[]): ValidationError | undefined {
  const [first, ...others] = messages.map((message) => coercionError(schema, message));
  if (!first) return undefined;
  const { field, message } = first.errors[0]!;
  return new ValidationError(field, message, others.flatMap((other) => other?.errors ?? []));
}

/**
 * Runs a row's operation. A typed error result in any root field becomes the GatewayError it stands
 * for; any other GraphQL error is unexpected and is thrown for the transport to mask.
 */
export async function runOperation(
  schema: GraphQLSchema,
  route: CompiledRoute,
  variables: Record<string, unknown>,
  context: GraphQLContext,
): Promise<Record<string, unknown>> {
  const resolvedErrors: Error[] = [];
  const result = (await collectResolvedErrors(resolvedErrors, () => route.compiled.query(undefined, context, variables))) as ExecutionResult;
  if (result.errors?.length) {
    const first = result.errors[0]!;
    if (first.originalError instanceof GatewayError) throw first.originalError;
    const code = first.extensions?.code;
    if (isErrorCode(code)) throw new GatewayError(code, first.message);
    // No data at all means the request itself was refused (variables that do not coerce): a client error.
    if (result.data === undefined) throw coercionErrors(schema, result.errors.map((error) => error.message)) ?? new GatewayError("validation_failed", withoutEchoedValues(first.message));
    throw first.originalError ?? first;
  }
  const data = (result.data ?? {}) as Record<string, unknown>;
  for (const value of Object.values(data)) {
    if (value && typeof value === "object" && "code" in value && "message" in value && isErrorCode(value.code)) {
      const thrown = resolvedErrors.find((error) => error instanceof GatewayError && error.code === value.code && error.message === value.message);
      throw thrown ?? new GatewayError(value.code, String(value.message));
    }
  }
  return data;
}
