import { createClient, type Client } from "graphql-ws/client";
import { freshAccessToken, getAccessToken } from "./session.ts";
import { TRANSACTION_FIELDS, type Transaction } from "./sections/transaction-fields.ts";

/**
 * One graphql-ws connection per signed-in mode, carrying the transactionEvents subscription that the
 * header (announcements) and the transactions table (rows) both listen to. connectionParams is a
 * function, so a reconnect presents the current access token.
 */
export interface TransactionEvent {
  id: string;
  type: string;
  occurredAt: string;
  transaction: Transaction;
}
export type LiveStatus = "connecting" | "live" | "offline";

// ready: true: the server says when it listens (a first message with extensions.ready); only then is the page
// "live", since graphql-ws's connection_ack comes before the server's subscription is confirmed.
const SUBSCRIPTION = `subscription DashboardTransactionEvents { transactionEvents(ready: true) { id type occurredAt transaction { ${TRANSACTION_FIELDS} } } }`;

const eventListeners = new Set<(event: TransactionEvent) => void>();
const statusListeners = new Set<(status: LiveStatus, reconnected: boolean) => void>();
let client: Client | null = null;
let stop: (() => void) | null = null;
let status: LiveStatus = "offline";
let connections = 0;

function setStatus(next: LiveStatus, reconnected = false) {
  status = next;
  statusListeners.forEach((listener) => listener(next, reconnected));
}

/** Opens the connection and the subscription (the app shell calls it once signed in, per mode). */
export function startLive(): () => void {
  connections = 0;
  client = createClient({
    url: `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`,
    connectionParams: async () => {
      const token = await freshAccessToken();
      return token ? { Authorization: `Bearer ${token}` } : {};
    },
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => getAccessToken() !== null,
    on: {
      connecting: () => setStatus("connecting"),
      connected: () => void ++connections,
      closed: () => setStatus("offline"),
    },
  });
  const seen = new Set<string>();
  stop = client.subscribe<{ transactionEvents: TransactionEvent }>(
    { query: SUBSCRIPTION },
    {
      next: (result) => {
        if ((result.extensions as { ready?: unknown } | undefined)?.ready === true && !result.data) return setStatus("live", connections > 1);
        const event = result.data?.transactionEvents;
        if (!event || seen.has(event.id)) return;
        seen.add(event.id);
        eventListeners.forEach((listener) => listener(event));
      },
      error: () => setStatus("offline"),
      complete: () => setStatus("offline"),
    },
  );
  const own = client;
  return () => {
    stop?.();
    void own.dispose();
    if (client === own) {
      client = null;
      stop = null;
      setStatus("offline");
    }
  };
}

export function onTransactionEvent(listener: (event: TransactionEvent) => void): () => void {
  eventListeners.add(listener);
  return () => void eventListeners.delete(listener);
}

/** `reconnected` is true when the connection came back after a drop (events may have been missed). */
export function onLiveStatus(listener: (status: LiveStatus, reconnected: boolean) => void): () => void {
  statusListeners.add(listener);
  listener(status, false);
  return () => void statusListeners.delete(listener);
}
