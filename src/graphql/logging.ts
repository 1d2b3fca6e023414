import { AsyncLocalStorage } from "node:async_hooks";
import { GraphQLError } from "graphql";
import type { ExecutionResult } from "graphql";
import type { Plugin, YogaLogger } from "graphql-yoga";
import { GatewayError, toGatewayError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import { withoutEchoedValues } from "./hardening.ts";

/**
 * How GraphQL errors reach the log. Yoga reports every error it masks at `error`, as a bare argument list
 * (a line of `{"0":{...}}` with no message and no request id), and client mistakes are masked too (to give
 * them our code). Here a client's error (a GatewayError such as a bad cursor or argument) is an `info` line,
 * a typed error result (ValidationError and the like) a `debug` line, and only an unexpected failure an
 * `error` line with its stack; each on the request's own logger, so it carries the request id.
 */
const requestLogs = new AsyncLocalStorage<Logger>();

/** Runs a GraphQL request's work with its request logger (Fastify's request.log: it carries requestId). */
export function runWithRequestLog<T>(log: Logger, work: () => T): T {
  return requestLogs.run(log, work);
}

export function yogaLogging(root: Logger): YogaLogger {
  const log = () => requestLogs.getStore() ?? root;
  // Yoga reports a masked error twice (its maskError wrapper and handleError): one line is enough.
  const logged = new WeakSet<object>();
  const message = (args: unknown[]) => args.filter((a) => typeof a === "string").join(" ") || "graphql";
  return {
    debug: (...args) => log().debug(message(args)),
    info: (...args) => log().info(message(args)),
    warn: (...args) => log().warn({ details: args.filter((a) => typeof a !== "string") }, message(args)),
    error: (...args) => {
      for (const error of args) {
        if (error && typeof error === "object") {
          if (logged.has(error)) continue;
          logged.add(error);
        }
        logGraphqlError(log(), error);
      }
    },
  };
}

function logGraphqlError(log: Logger, error: unknown): void {
  const located = error instanceof GraphQLError ? error : undefined;
  const original = located?.originalError ?? error;
  const path = located?.path?.join(".");
  if (original instanceof GraphQLError) {
    // A GraphQL error of its own (no exception behind it): something the client sent.
    log.info({ code: original.extensions?.code ?? null, ...(path ? { path } : {}) }, `GraphQL client error: ${original.message}`);
    return;
  }
  const known = toGatewayError(original);
  if (known.code === "internal_error") log.error({ err: original, ...(path ? { path } : {}) }, `GraphQL operation failed unexpectedly: ${messageOf(original)}`);
  else if (known.code === "service_unavailable") log.warn({ err: original, ...(path ? { path } : {}) }, "GraphQL operation failed: database unavailable");
  else log.info({ code: known.code, ...(path ? { path } : {}) }, `GraphQL client error: ${known.message}`);
}

/**
 * A request refused before execution (syntax, validation, armor limits, variables that do not coerce) is
 * not an error yoga logs at all: one debug line, value-free, says why.
 */
export function useRefusalLog(): Plugin {
  return {
    onResultProcess({ result }) {
      if (!result || typeof result !== "object" || Array.isArray(result) || Symbol.asyncIterator in result) return;
      const { data, errors } = result as ExecutionResult;
      if (data !== undefined || !errors?.length) return;
      const codes = [...new Set(errors.map((e) => e.extensions?.code ?? null))];
      requestLogs.getStore()?.debug({ codes }, `GraphQL request refused: ${withoutEchoedValues(errors[0]!.message)}`);
    },
  };
}

/** A typed error result (the errors plugin turned a GatewayError into data): the client's business, at debug. */
export function logErrorResult(error: Error): void {
  const code = error instanceof GatewayError ? error.code : null;
  requestLogs.getStore()?.debug({ code }, `GraphQL error result: ${error.message}`);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
