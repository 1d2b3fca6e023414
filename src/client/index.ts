import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "./rest-api.ts";

/**
 * A small typed client for the gateway: the REST API through openapi-fetch with types generated from the
 * OpenAPI document (`npm run client:generate`), and GraphQL operations typed by GraphQL Code Generator's
 * documents (TypedDocumentNode). Give it a secret API key (server side) or a user's access token.
 */
export type { paths } from "./rest-api.ts";

export interface GatewayClientOptions {
  baseUrl: string;
  /** A secret key, sk_test_... or sk_live_...: for merchants' servers only, never a browser. */
  apiKey?: string;
  /** An access token from POST /v1/auth/login (works on /v1 and GraphQL, not on /api). */
  accessToken?: string;
  fetch?: typeof fetch;
}

export function createGatewayClient(options: GatewayClientOptions) {
  const credentials: Record<string, string> = {};
  if (options.apiKey) credentials["x-api-key"] = options.apiKey;
  if (options.accessToken) credentials.authorization = `Bearer ${options.accessToken}`;
  const authenticate: Middleware = {
    onRequest({ request }) {
      for (const [name, value] of Object.entries(credentials)) request.headers.set(name, value);
      return request;
    },
  };
  const rest = createClient<paths>({ baseUrl: options.baseUrl, ...(options.fetch ? { fetch: options.fetch } : {}) });
  rest.use(authenticate);
  const fetchImpl = options.fetch ?? fetch;

  return {
    /** openapi-fetch: rest.GET("/v1/status"), rest.POST("/api/transactions/initialize", { body }) ... answers { data, error, response }. */
    rest,
    /** Runs a typed GraphQL operation; throws on a transport or GraphQL error, with its message. */
    async graphql<TData, TVariables>(document: TypedDocumentNode<TData, TVariables>, variables?: TVariables): Promise<TData> {
      const response = await fetchImpl(`${options.baseUrl}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/graphql-response+json, application/json", ...credentials },
        body: JSON.stringify({ query: print(document), variables }),
      });
      const result = (await response.json()) as { data?: TData; errors?: { message: string }[] };
      if (result.errors?.length || !result.data) throw new Error(result.errors?.map((e) => e.message).join("; ") ?? `GraphQL request failed with ${response.status}`);
      return result.data;
    },
  };
}

export type GatewayClient = ReturnType<typeof createGatewayClient>;
