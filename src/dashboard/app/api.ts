import { graphql } from "./gql/index.ts";
import type { TypedDocumentString } from "./gql/graphql.ts";
import { clearSession, freshAccessToken, getAccessToken, refresh } from "./session.ts";

/** A GraphQL or transport failure, with the gateway's machine-readable code (e.g. "forbidden"). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; extensions?: { code?: string } }[];
  status?: string;
  message?: string;
  code?: string;
}

/** A document of this folder's `graphql(...)` calls, typed by codegen (src/dashboard/app/gql). */
export type Document<TResult, TVariables> = TypedDocumentString<TResult, TVariables>;

/**
 * Runs one GraphQL operation as the signed-in user. An expired access token (HTTP 401) is refreshed
 * once and the operation retried; a refused refresh ends the session.
 */
export async function gql<T, V>(query: Document<T, V>, variables: V | Record<string, never> = {}, extraHeaders: Record<string, string> = {}): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const token = getAccessToken();
    if (!token) throw new ApiError("You are signed out", "invalid_token");
    let response: Response;
    try {
      response = await fetch("/graphql", {
        method: "POST",
        headers: { ...extraHeaders, "content-type": "application/json", accept: "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: String(query), variables }),
      });
    } catch {
      throw new ApiError("The gateway cannot be reached; check your connection", "network_error");
    }
    if (response.status === 401 && attempt === 0) {
      // Another request may have refreshed already; otherwise refresh now.
      if (getAccessToken() === token && !(await refresh())) throw new ApiError("Your session has ended; sign in again", "invalid_token");
      continue;
    }
    const body = (await response.json().catch(() => null)) as GraphQLResponse<T> | null;
    if (response.status === 401) clearSession();
    if (!body) throw new ApiError(`Unexpected answer from the gateway (HTTP ${response.status})`, "http_error");
    if (body.status === "error") throw new ApiError(body.message ?? "Request failed", body.code ?? "http_error");
    const error = body.errors?.[0];
    if (error) throw new ApiError(error.message, error.extensions?.code ?? "graphql_error");
    if (!body.data) throw new ApiError("Empty answer from the gateway", "http_error");
    return body.data;
  }
}

/**
 * Selected on every union result (`__typename ...DashboardError`) so errors can be shown: an Error member
 * of a result is one whose __typename ends in "Error" (ConflictError, ValidationError, ...).
 */
graphql(`fragment DashboardError on Error { code message ... on ValidationError { field } }`);

type ErrorMember = { __typename: `${string}Error` };
/** A union result without its Error members. */
export type Ok<T> = Exclude<T, ErrorMember>;

/** The object of a union result; an Error member is thrown as an ApiError. */
export function expectOk<T extends { __typename: string }>(result: T): Ok<T> {
  if (result.__typename.endsWith("Error")) {
    const error = result as unknown as { code: string; message: string; field?: string | null };
    throw new ApiError(error.field && !error.message.startsWith(error.field) ? `${error.field}: ${error.message}` : error.message, error.code);
  }
  return result as Ok<T>;
}

/**
 * Runs a mutation whose answer `field` is a union result, and returns its object; an Error member is
 * thrown as an ApiError (see expectOk), for useAction to show.
 */
export async function mutate<T extends Record<F, { __typename: string }>, V, F extends keyof T & string>(
  query: Document<T, V>,
  field: F,
  variables: V,
  options: { idempotencyKey?: string } = {},
): Promise<Ok<T[F]>> {
  return expectOk((await gql(query, variables, options.idempotencyKey ? { "idempotency-key": options.idempotencyKey } : {}))[field]);
}

/**
 * A REST request as the signed-in user, with the access token as a bearer token (it lives in this tab's memory, so
 * the browser would not send it on its own). An expired token (401) is refreshed once and the request retried.
 * A network failure throws fetch's TypeError.
 */
export async function fetchAsUser(url: string, init: { method?: string; headers?: Record<string, string>; body?: BodyInit } = {}): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const token = await freshAccessToken();
    const response = await fetch(url, { ...init, headers: { ...init.headers, authorization: `Bearer ${token ?? ""}` } });
    if (response.status !== 401 || attempt === 1 || !(await refresh().catch(() => false))) return response;
  }
}

/** A /v1 call as the signed-in user: the envelope's data, or its error (message and code) as an ApiError. */
export async function rest<T>(url: string, init: { method?: string; body?: BodyInit } = {}): Promise<T> {
  let response: Response;
  try {
    response = await fetchAsUser(url, { ...init, headers: { accept: "application/json" } });
  } catch {
    throw new ApiError("The gateway cannot be reached; check your connection", "network_error");
  }
  const envelope = (await response.json().catch(() => null)) as { status?: string; data?: T; message?: string; code?: string } | null;
  if (!response.ok || envelope?.status !== "success" || envelope.data === undefined) {
    throw new ApiError(envelope?.message ?? `Request failed (HTTP ${response.status})`, envelope?.code ?? "http_error");
  }
  return envelope.data;
}

export function errorMessage(error: unknown): string {
  if (error instanceof ApiError && error.code === "forbidden") return `Not allowed: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
