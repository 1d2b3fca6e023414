import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { Gateway } from "../../src/server.ts";
import { EVENTUALLY_MS } from "./timing.ts";
import { waitUntil } from "./wait.ts";

export interface ClosedSocket {
  code: number;
  reason: string;
}

/** A graphql-ws client with the key in connection_init, as frontends connect. */
export function wsClient(httpUrl: string, apiKey: string | undefined, onClosed?: (event: ClosedSocket) => void): Client {
  return wsClientWith(httpUrl, apiKey === undefined ? {} : { "X-API-Key": apiKey }, onClosed);
}

/** The same with any connection_init payload, e.g. a user's {"Authorization": "Bearer <token>"}. */
export function wsClientWith(httpUrl: string, connectionParams: Record<string, unknown>, onClosed?: (event: ClosedSocket) => void): Client {
  return createClient({
    url: `${httpUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams,
    retryAttempts: 0,
    lazy: true,
    on: { closed: (event) => onClosed?.({ code: (event as { code: number }).code, reason: (event as { reason: string }).reason }) },
  });
}

/** The first message of a subscription asked with `ready: true` (src/graphql/ready.ts): no data, just this. */
const isReadyMessage = (result: unknown) => {
  const r = result as { data?: unknown; extensions?: { ready?: unknown } } | null;
  return r?.data === undefined && r?.extensions?.ready === true;
};

export interface Collected<T> {
  /** Every result in order, except the ready message (a second one would be kept here, and fail a test). */
  results: { data?: T; errors?: readonly { message: string; extensions?: Record<string, unknown> }[] }[];
  completed: boolean;
  error: unknown;
  /** Whether the first message was the ready signal. */
  isReady: boolean;
  /**
   * Resolves once the ready message arrived: the server listens, so every event committed from now on is delivered.
   * Only for documents that ask `ready: true`; instead of sleeping "to let the subscription start".
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Resolves once `count` results have arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  /** Resolves when the server completes the subscription. */
  done(timeoutMs?: number): Promise<void>;
  dispose(): void;
}

/** Subscribes and collects every result, so tests can assert on what did and did not arrive. */
export function collect<TData, TVars extends Record<string, unknown>>(
  client: Client,
  document: TypedDocumentNode<TData, TVars>,
  variables?: TVars,
): Collected<TData> {
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((w) => w());
  const state: Collected<TData> = {
    results: [],
    completed: false,
    error: undefined,
    isReady: false,
    async ready(timeoutMs = EVENTUALLY_MS) {
      await until(() => state.isReady || state.completed || state.error !== undefined, timeoutMs, "the ready message");
      if (!state.isReady) throw new Error(`the subscription ended before it was ready: ${JSON.stringify(state.error ?? state.results)}`);
    },
    waitFor(count, timeoutMs = EVENTUALLY_MS) {
      return until(() => state.results.length >= count || state.completed || state.error !== undefined, timeoutMs, `${count} results`);
    },
    done(timeoutMs = EVENTUALLY_MS) {
      return until(() => state.completed || state.error !== undefined, timeoutMs, "completion");
    },
    dispose: () => unsubscribe(),
  };
  const until = (check: () => boolean, timeoutMs: number, what: string) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(listener);
        reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(state.results)}`));
      }, timeoutMs);
      const listener = () => {
        if (!check()) return;
        clearTimeout(timer);
        waiters.delete(listener);
        resolve();
      };
      waiters.add(listener);
      listener();
    });
  const unsubscribe = client.subscribe(
    { query: print(document), variables: variables as Record<string, unknown> | undefined },
    {
      next: (value) => {
        if (!state.isReady && state.results.length === 0 && isReadyMessage(value)) state.isReady = true;
        else state.results.push(value as Collected<TData>["results"][number]);
        notify();
      },
      error: (error) => {
        state.error = error;
        notify();
      },
      complete: () => {
        state.completed = true;
        notify();
      },
    },
  );
  return state;
}

/** GraphQL over SSE (yoga's "distinct connections" mode): parsed `next` payloads as they arrive. */
/** `credential`: an API key, or headers such as a user's {authorization: "Bearer <token>"}. */
export async function sseSubscribe(httpUrl: string, credential: string | Record<string, string>, document: TypedDocumentNode<any, any>, variables?: Record<string, unknown>) {
  const controller = new AbortController();
  const credentialHeaders = typeof credential === "string" ? { "x-api-key": credential } : credential;
  const response = await fetch(`${httpUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream", ...credentialHeaders },
    body: JSON.stringify({ query: print(document), variables }),
    signal: controller.signal,
  });
  /** Every event in order, the ready message too (`{event: "next", data: {extensions: {ready: true}}}`). */
  const events: { event: string; data: any }[] = [];
  let ended = false;
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const pump = (async () => {
    let buffer = "";
    try {
      while (true) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let index;
        while ((index = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, index);
          buffer = buffer.slice(index + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1] ?? "message";
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (data !== undefined) events.push({ event, data: data ? JSON.parse(data) : null });
        }
      }
    } catch {
      // aborted by the test
    } finally {
      ended = true;
    }
  })();
  return {
    status: response.status,
    events,
    ended: () => ended,
    /** Resolves once the ready message arrived (documents asking `ready: true`): every later event is delivered. */
    async ready(timeoutMs = EVENTUALLY_MS) {
      const isReady = () => events[0]?.event === "next" && isReadyMessage(events[0].data);
      await waitUntil(() => isReady() || events.length > 0 || ended, "the SSE ready message", timeoutMs);
      if (!isReady()) throw new Error(`SSE: the first event is not the ready message; got ${JSON.stringify(events)}`);
    },
    async waitFor(check: () => boolean, timeoutMs = EVENTUALLY_MS) {
      await waitUntil(check, () => `an SSE condition; got ${JSON.stringify(events)}`, timeoutMs);
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
}

/** How many event-publisher streams each gateway has had listening so far (counted from the first call for it). */
const listenerCounts = new WeakMap<Gateway, { count: number }>();

function publisherListeners(gateway: Gateway): { count: number } {
  let counter = listenerCounts.get(gateway);
  if (counter) return counter;
  const state = { count: 0 };
  counter = state;
  listenerCounts.set(gateway, counter);
  const publisher = gateway.services.publisher;
  const subscribe = publisher.subscribe.bind(publisher);
  // A test-side spy on the port every subscription field reads from: a stream listens from its first next(),
  // confirmed by publisher.listening() (with Redis, the SUBSCRIBE's reply), as the ready signal itself does.
  publisher.subscribe = (merchantId, mode) => {
    const stream = subscribe(merchantId, mode);
    const next = stream.next.bind(stream);
    let first = true;
    stream.next = (...args) => {
      const result = next(...args);
      if (first) {
        first = false;
        void publisher.listening(merchantId, mode).then(() => state.count++, () => {});
      }
      return result;
    };
    return stream;
  };
  return counter;
}

/**
 * Starts `count` subscriptions (any transport) and resolves, with what `start` returned, once the gateway's side of
 * them listens. For fields without the `ready` argument (transactionStatusChanged, payoutStatusChanged), where a
 * test wants an event it causes next to arrive live rather than as the "already settled" answer.
 */
export async function listeningTo<T>(gateway: Gateway, start: () => T | Promise<T>, count = 1): Promise<T> {
  const counter = publisherListeners(gateway);
  const before = counter.count;
  const started = await start();
  await waitUntil(() => counter.count >= before + count, `${count} subscription(s) to listen on the gateway`);
  return started;
}
