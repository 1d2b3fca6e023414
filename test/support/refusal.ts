import { expect } from "vitest";
import { GatewayError } from "../../src/errors.ts";

/**
 * The error `fn` throws, checked to be a `kind` (any GatewayError unless said, e.g. ValidationError for a parser
 * that names the missing field); fails the test when `fn` throws none.
 */
export function refusal(fn: () => unknown, kind: abstract new (...args: never[]) => GatewayError = GatewayError): GatewayError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(kind);
    return error as GatewayError;
  }
  throw new Error("expected a refusal, got none");
}
