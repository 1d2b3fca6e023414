import { GraphQLError } from "graphql";
import { maskError as yogaMaskError } from "graphql-yoga";
import { GatewayError, toGatewayError } from "../errors.ts";

/**
 * A GatewayError thrown where no typed error result is declared (e.g. a bad filter on a Relay
 * connection) is still a client's business: show its message and code. Anything else is masked.
 */
export function maskError(error: unknown, message: string, isDev?: boolean): Error {
  const original = error instanceof GraphQLError ? error.originalError : error;
  const known = toGatewayError(original);
  if (known.code !== "internal_error") {
    // Keep where it happened (path, locations): with several root fields, the client must know which one failed.
    const at = error instanceof GraphQLError ? { nodes: error.nodes, path: error.path } : {};
    return new GraphQLError(known.message, { ...at, extensions: { code: known.code } });
  }
  return yogaMaskError(error, message, isDev);
}
