import type { ExecutionResult } from "graphql";
import type { Plugin } from "graphql-yoga";

/**
 * The "ready" signal of an event subscription. graphql-ws acknowledges a connection, not a subscription, and the
 * server's pub/sub (Redis with REDIS_URL) confirms a SUBSCRIBE only later: an event committed in between is never
 * delivered. A subscription field asked with `ready: true` therefore sends one extra first message once its
 * listener is confirmed, `{"extensions":{"ready":true}}` (no `data`), over WebSocket and SSE alike; every event
 * committed after a client received it reaches that client. Opt-in, so existing clients see no extra message.
 */
export const READY_RESULT: ExecutionResult = Object.freeze({ extensions: Object.freeze({ ready: true }) }) as ExecutionResult;

export function isReadyResult(result: ExecutionResult): boolean {
  return result.data === undefined && result.extensions?.ready === true;
}

/** Per operation context: the promise the plugin waits on, resolved by the field's stream once it listens. */
const requested = new WeakMap<object, { listening: Promise<void>; resolve: () => void }>();

/**
 * Called by a subscription field's subscribe function (with the operation's context) when the client asked for
 * the ready signal; the stream calls the returned function once it listens.
 */
export function readySignal(ctx: object): () => void {
  let resolve!: () => void;
  const listening = new Promise<void>((done) => (resolve = done));
  requested.set(ctx, { listening, resolve });
  return resolve;
}

/** Puts READY_RESULT before the first event of every subscription whose field called readySignal(). */
export function subscriptionReady(): Plugin {
  return {
    onSubscribe: () => ({
      onSubscribeResult: ({ args, result, setResult }) => {
        const signal = requested.get(args.contextValue as object);
        if (!signal || !(Symbol.asyncIterator in result)) return;
        setResult(readyFirst(result, signal.listening));
      },
    }),
  };
}

/**
 * The stream with READY_RESULT first. Nothing starts before the consumer's first next(): a stream that is only
 * returned (the WebSocket fan-out closes a subscriber's own stream unused) never listens. return() is passed
 * straight on, so ending it while an event is awaited does not wait for one.
 */
function readyFirst(source: AsyncIterable<ExecutionResult>, listening: Promise<void>): AsyncIterableIterator<ExecutionResult> {
  const iterator = source[Symbol.asyncIterator]();
  let first: Promise<IteratorResult<ExecutionResult>> | undefined;
  let started = false;
  return {
    async next() {
      if (!started) {
        started = true;
        first = iterator.next(); // runs the field's stream up to its listening, then waits for an event
        // A stream that ends or fails before it listens (refused, shut down) says so instead of "ready".
        if (await Promise.race([listening.then(() => true), first.then(() => false)])) return { done: false, value: READY_RESULT };
      }
      if (first) {
        const pending = first;
        first = undefined;
        return pending;
      }
      return iterator.next();
    },
    return: async () => (await iterator.return?.()) ?? { done: true, value: undefined },
    throw: async (error: unknown) => {
      if (iterator.throw) return iterator.throw(error);
      throw error;
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
