import { GraphQLError } from "graphql";
import { maskError as yogaMaskError } from "graphql-yoga";
import { GatewayError } from "../errors.ts";

/**
 * A GatewayError thrown where no typed error result is declared (e.g. a bad filter on a Relay
 * connection) is still a client's business: show its message and code. Anything else is masked.
 */
export function maskError(error: unknown, message: string, isDev?: boolean): Error {
  const original = error instanceof GraphQLError ? error.originalError : error;
  if (original instanceof GatewayError) {
    return new GraphQLError(original.message, { extensions: { code: original.code } });
  }
  return yogaMaskError(error, message, isDev);
}
