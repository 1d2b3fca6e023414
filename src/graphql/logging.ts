import { AsyncLocalStorage } from "node:async_hooks";
import { GraphQLError } from "graphql";
import type { ExecutionResult } from "graphql";
import { handleStreamOrSingleExecutionResult, type Plugin, type YogaLogger } from "graphql-yoga";
import { GatewayError, toGatewayError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { GraphQLContext } from "./context.ts";
import { withoutEchoedValues } from "./hardening.ts";

/**
 * How GraphQL errors reach the log. Yoga reports every error it masks at `error`, as a bare argument list
 * (a line of `{"0":{...}}` with no message and no request id), and client mistakes are masked too (to give
 * them our code). Here a client's error (a GatewayError such as a bad cursor or argument) is an `info` line,
 * a typed error result (ValidationError and the like) a `debug` line, and only an unexpected failure an
 * `error` line with its stack; each on the request's own logger (the context's `log`), so it carries the
 * request id.
 */

/** Errors already logged with their request: yoga's own report of them (when it masks them) is dropped. */
const logged = new WeakSet<object>();

function logOnce(log: Logger, error: unknown): void {
  if (error && typeof error === "object") {
    if (logged.has(error)) return;
    logged.add(error);
    const original = (error as { originalError?: unknown }).originalError;
    if (original && typeof original === "object") logged.add(original);
  }
  logGraphqlError(log, error);
}

/**
 * Logs an operation's errors on its request's logger, before yoga masks them (this plugin comes before yoga's
 * masking, which sees the same error objects and so finds them logged).
 */
export function useErrorLog(): Plugin<GraphQLContext> {
  // A bare GraphQLError (no exception behind it: a variable that does not coerce, a null where none may be) is
  // left to useRefusalLog, as yoga leaves it unlogged: only what yoga would mask is logged here.
  const logErrors = (log: Logger) => (payload: { result: ExecutionResult }) => {
    for (const error of payload.result.errors ?? []) if (error.originalError !== undefined) logOnce(log, error);
  };
  return {
    onExecute: ({ args }) => ({
      onExecuteDone: (payload) => handleStreamOrSingleExecutionResult(payload, logErrors((args.contextValue as GraphQLContext).log)),
    }),
    onSubscribe: ({ args }) => {
      const log = (args.contextValue as GraphQLContext).log;
      return {
        onSubscribeResult: (payload) => handleStreamOrSingleExecutionResult(payload, logErrors(log)),
        onSubscribeError: ({ error }) => logOnce(log, error),
      };
    },
  };
}

/** Yoga's own logger: what reaches it unlogged (outside an operation's execution) goes to the root logger. */
export function yogaLogging(root: Logger): YogaLogger {
  const message = (args: unknown[]) => args.filter((a) => typeof a === "string").join(" ") || "graphql";
  return {
    debug: (...args) => root.debug(message(args)),
    info: (...args) => root.info(message(args)),
    warn: (...args) => root.warn({ details: args.filter((a) => typeof a !== "string") }, message(args)),
    error: (...args) => {
      for (const error of args) logOnce(root, error);
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
export function useRefusalLog(): Plugin<GraphQLContext, { req?: { log: Logger } }> {
  return {
    onResultProcess({ result, serverContext }) {
      if (!result || typeof result !== "object" || Array.isArray(result) || Symbol.asyncIterator in result) return;
      const { data, errors } = result as ExecutionResult;
      if (data !== undefined || !errors?.length) return;
      const codes = [...new Set(errors.map((e) => e.extensions?.code ?? null))];
      serverContext.req?.log.debug({ codes }, `GraphQL request refused: ${withoutEchoedValues(errors[0]!.message)}`);
    },
  };
}

/**
 * The request's logger for a typed error result's debug line: Pothos reports those (logErrorResult) with no
 * context, so only this one line still travels in AsyncLocalStorage, and only while debug lines are written.
 * From its first use such a store makes Node 20 hook every promise of every request (about 8 % of verify's
 * throughput, bench/README.md): production's info level never opens it.
 */
const debugLogs = new AsyncLocalStorage<Logger>();

export function runWithRequestLog<T>(log: Logger, work: () => T): T {
  return log.isLevelEnabled("debug") ? debugLogs.run(log, work) : work();
}

/** A typed error result (the errors plugin turned a GatewayError into data): the client's business, at debug. */
export function logErrorResult(error: Error): void {
  const code = error instanceof GatewayError ? error.code : null;
  debugLogs.getStore()?.debug({ code }, `GraphQL error result: ${error.message}`);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
