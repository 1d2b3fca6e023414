import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";

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

export interface Collected<T> {
  results: { data?: T; errors?: readonly { message: string; extensions?: Record<string, unknown> }[] }[];
  completed: boolean;
  error: unknown;
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
    waitFor(count, timeoutMs = 10_000) {
      return until(() => state.results.length >= count || state.completed || state.error !== undefined, timeoutMs, `${count} results`);
    },
    done(timeoutMs = 10_000) {
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
        state.results.push(value as Collected<TData>["results"][number]);
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
    async waitFor(check: () => boolean, timeoutMs = 10_000) {
      const start = Date.now();
      while (!check()) {
        if (Date.now() - start > timeoutMs) throw new Error(`SSE: timed out; got ${JSON.stringify(events)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
}
