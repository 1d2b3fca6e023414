import { createClient, type Client } from "graphql-ws/client";
import { freshAccessToken, getAccessToken, getSession, onAccessToken } from "./session.ts";
import { graphql } from "./gql/index.ts";
import type { DashboardDisputeEventsSubscription, DashboardRefundEventsSubscription, DashboardTransactionEventsSubscription } from "./gql/graphql.ts";

/**
 * One graphql-ws connection per signed-in mode, carrying the transactionEvents subscription that the
 * header (announcements) and the transactions table (rows) both listen to, refundEvents, which a
 * transaction's page (its refunds) and the table (its refund badges) follow, and disputeEvents, which the Disputes
 * pages and a transaction's page follow. connectionParams is a
 * function, so a reconnect presents the current access token; each new token of the same mode is also sent on the
 * open socket (a graphql-ws ping with {Authorization}), as the server closes a socket whose token expired (4401).
 */
export type TransactionEvent = DashboardTransactionEventsSubscription["transactionEvents"];
/** A refund's settling change (refund.completed or refund.failed), with the refund as of that change. */
export type RefundEvent = DashboardRefundEventsSubscription["refundEvents"];
/** A dispute's change (dispute.created, dispute.updated or dispute.closed), with the dispute as of that change. */
export type DisputeEvent = DashboardDisputeEventsSubscription["disputeEvents"];
export type LiveStatus = "connecting" | "live" | "offline";

// ready: true: the server says when it listens (a first message with extensions.ready); only then is the page
// "live", since graphql-ws's connection_ack comes before the server's subscription is confirmed.
const SUBSCRIPTIONS = {
  transactionEvents: graphql(`
    subscription DashboardTransactionEvents { transactionEvents(ready: true) { id type occurredAt transaction { ...DashboardTransaction } } }
  `),
  refundEvents: graphql(`
    subscription DashboardRefundEvents {
      refundEvents(ready: true) { id type occurredAt refund { reference transactionReference amount currency status failureReason } }
    }
  `),
  disputeEvents: graphql(`
    subscription DashboardDisputeEvents { disputeEvents(ready: true) { id type occurredAt dispute { reference transactionReference amount currency status dueBy } } }
  `),
};
type Field = keyof typeof SUBSCRIPTIONS;
const FIELDS = Object.keys(SUBSCRIPTIONS) as Field[];

/** Any event of the three subscriptions (each listener set receives only its own field's). */
type AnyEvent = TransactionEvent & RefundEvent & DisputeEvent;
const eventListeners = {
  transactionEvents: new Set<(event: TransactionEvent) => void>(),
  refundEvents: new Set<(event: RefundEvent) => void>(),
  disputeEvents: new Set<(event: DisputeEvent) => void>(),
};
const statusListeners = new Set<(status: LiveStatus, reconnected: boolean) => void>();
let client: Client | null = null;
let stops: (() => void)[] = [];
let status: LiveStatus = "offline";
let connections = 0;

function setStatus(next: LiveStatus, reconnected = false) {
  status = next;
  statusListeners.forEach((listener) => listener(next, reconnected));
}

export function startLive(): () => void {
  connections = 0;
  // "live" once every subscription of this connection listens (a reconnect subscribes them all again).
  const ready = new Set<Field>();
  let socket: WebSocket | null = null;
  let socketMode = getSession()?.mode;
  const stopTokens = onAccessToken((token, mode) => {
    if (socket?.readyState === WebSocket.OPEN && mode === socketMode) socket.send(JSON.stringify({ type: "ping", payload: { Authorization: `Bearer ${token}` } }));
  });
  client = createClient({
    url: `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`,
    connectionParams: async () => {
      const token = await freshAccessToken();
      return token ? { Authorization: `Bearer ${token}` } : {};
    },
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => getAccessToken() !== null,
    on: {
      opened: (opened) => {
        socket = opened as WebSocket;
        socketMode = getSession()?.mode;
      },
      connecting: () => setStatus("connecting"),
      connected: () => {
        connections++;
        ready.clear();
      },
      closed: () => setStatus("offline"),
    },
  });
  const seen = new Set<string>();
  const own = client;
  let stopped = false;
  // A socket closed because its token expired (4401: graphql-ws clients never retry it on their own) is opened again
  // at once: the lazy client reconnects for the new subscription, and connectionParams fetches a fresh token.
  const subscribe = (field: Field, index: number) => {
    stops[index] = own.subscribe<Record<Field, AnyEvent>>(
      { query: String(SUBSCRIPTIONS[field]) },
      {
        next: (result) => {
          if ((result.extensions as { ready?: unknown } | undefined)?.ready === true && !result.data) {
            ready.add(field);
            return ready.size === FIELDS.length ? setStatus("live", connections > 1) : undefined;
          }
          const event = result.data?.[field];
          if (!event || seen.has(event.id)) return;
          seen.add(event.id);
          (eventListeners[field] as Set<(event: AnyEvent) => void>).forEach((listener) => listener(event));
        },
        error: (error) => {
          setStatus("offline");
          if ((error as { code?: unknown } | null)?.code === 4401 && getAccessToken() !== null) setTimeout(() => stopped || subscribe(field, index), 0);
        },
        complete: () => setStatus("offline"),
      },
    );
  };
  stops = [];
  FIELDS.forEach(subscribe);
  return () => {
    stopped = true;
    stopTokens();
    stops.forEach((stop) => stop());
    void own.dispose();
    if (client === own) {
      client = null;
      stops = [];
      setStatus("offline");
    }
  };
}

export function onTransactionEvent(listener: (event: TransactionEvent) => void): () => void {
  eventListeners.transactionEvents.add(listener);
  return () => void eventListeners.transactionEvents.delete(listener);
}

export function onRefundEvent(listener: (event: RefundEvent) => void): () => void {
  eventListeners.refundEvents.add(listener);
  return () => void eventListeners.refundEvents.delete(listener);
}

export function onDisputeEvent(listener: (event: DisputeEvent) => void): () => void {
  eventListeners.disputeEvents.add(listener);
  return () => void eventListeners.disputeEvents.delete(listener);
}

/** `reconnected` is true when the connection came back after a drop (events may have been missed). */
export function onLiveStatus(listener: (status: LiveStatus, reconnected: boolean) => void): () => void {
  statusListeners.add(listener);
  listener(status, false);
  return () => void statusListeners.delete(listener);
}
