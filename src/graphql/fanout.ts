import type { ExecutionResult, GraphQLField } from "graphql";
import WebSocket from "ws";
import { isReadyResult } from "./ready.ts";

/**
 * Shared execution of identical subscriptions over graphql-ws. Subscribers whose operation would give the same
 * result for every event (same document, variables and principal scope: websocket.ts builds the key) join one
 * group; the group listens once, executes each event once, serializes the `next` payload once and writes it to
 * every member's socket with the member's own id spliced in. Without it each subscriber ran its own listener,
 * GraphQL execution and JSON.stringify for the same event.
 *
 * Backpressure: writes never wait, so a slow socket cannot hold the others up. What a socket has not yet handed to
 * the operating system is bounded: past MAX_BUFFERED_BYTES it is closed with SLOW_CONSUMER_CLOSE_CODE (ws destroys
 * it if the peer does not finish the close handshake within its 30 s close timeout). Its missed events are not
 * replayed: a client that reconnects reads current state with a query, as after any disconnection.
 */

/**
 * A subscription root field's `extensions` when its result for an event depends only on the event, the arguments
 * and the principal's scope (merchant, mode, role), with no state taken at subscribe time (as merchantEvents):
 * identical subscriptions to it over graphql-ws then share one execution per event.
 */
export const sharedExecution = { sharedExecution: true } as const;

export function isSharedExecution(field: GraphQLField<unknown, unknown>): boolean {
  return field.extensions?.sharedExecution === true;
}

/** RFC 6455 "Try Again Later": graphql-ws clients treat it as retryable and reconnect. */
export const SLOW_CONSUMER_CLOSE_CODE = 1013;
/** Unsent bytes a socket may hold in the process beyond what the kernel buffers (a few MB on Linux). */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

/** For metrics: gauges (groups, subscribers) and counters since start (the rest). */
export interface FanoutStats {
  /** Shared executions open: one per distinct operation and scope with at least one subscriber. */
  groups: number;
  /** Subscriptions served by them: counted once their group's stream listens, so an event from then on reaches them. */
  subscribers: number;
  /** Events executed (once per event per group). */
  executions: number;
  /** `next` frames written. */
  deliveries: number;
  /** Sockets closed for falling MAX_BUFFERED_BYTES behind. */
  slowConsumersClosed: number;
}

/** Opens the group's one GraphQL stream; it must end when `signal` aborts (the group emptied, or shutdown). */
export type OpenSharedStream = (signal: AbortSignal) => Promise<AsyncIterable<ExecutionResult> | ExecutionResult>;

type Counter = "executions" | "deliveries" | "slowConsumersClosed";

export class SubscriptionFanout {
  private readonly groups = new Map<string, Group>();
  private readonly counters: Record<Counter, number> = { executions: 0, deliveries: 0, slowConsumersClosed: 0 };

  /**
   * Adds the subscription `id` on `socket` to the group of `key`, opening the group's stream if it is the first.
   * Returns what graphql-ws iterates for it: nothing is yielded (the group writes the frames); it ends when the
   * group ends (graphql-ws then sends `complete`), or rejects with the stream's error (graphql-ws sends `error`), as
   * an unshared subscription would; graphql-ws's return() (client `complete`, socket closed) leaves the group.
   */
  join(key: string, socket: WebSocket, id: string, shutdown: AbortSignal, open: OpenSharedStream): AsyncIterableIterator<never> {
    let group = this.groups.get(key);
    if (!group) {
      group = new Group(this, key);
      this.groups.set(key, group);
      void group.run(open, shutdown);
    }
    const member = new Member(group, socket, id);
    group.members.add(member);
    // The group already said it listens (an opt-in ready message, graphql/ready.ts): a newcomer gets it too.
    if (group.readyPayload) member.send(group.readyPayload);
    return member;
  }

  stats(): FanoutStats {
    let subscribers = 0;
    for (const group of this.groups.values()) if (group.listening) subscribers += group.members.size;
    return { groups: this.groups.size, subscribers, ...this.counters };
  }

  /** @internal */
  forget(group: Group): void {
    if (this.groups.get(group.key) === group) this.groups.delete(group.key);
  }

  /** @internal */
  count(what: Counter, n = 1): void {
    this.counters[what] += n;
  }
}

class Group {
  readonly members = new Set<Member>();
  /** Set once the stream asked for its first event: pub/sub streams listen from then on. */
  listening = false;
  /** The stream's ready message, once sent: repeated to members who join later. */
  readyPayload: string | undefined;
  private readonly stop = new AbortController();

  constructor(
    private readonly fanout: SubscriptionFanout,
    readonly key: string,
  ) {}

  async run(open: OpenSharedStream, shutdown: AbortSignal): Promise<void> {
    const onShutdown = () => this.stop.abort();
    shutdown.addEventListener("abort", onShutdown, { once: true });
    if (shutdown.aborted) onShutdown();
    let failure: { error: unknown } | undefined;
    try {
      const stream = await open(this.stop.signal);
      if (Symbol.asyncIterator in stream) {
        const iterator = stream[Symbol.asyncIterator]();
        let step: IteratorResult<ExecutionResult> | undefined;
        try {
          let next = iterator.next();
          this.listening = true;
          // Always awaits the next() it asked for; once stopped, the stream ends (its signal) and nothing is sent.
          while (!(step = await next).done && !this.stop.signal.aborted) {
            this.deliver(step.value);
            next = iterator.next();
          }
        } finally {
          if (!step?.done) await iterator.return?.();
        }
      } else {
        this.deliver(stream); // one result, as graphql-ws sends for a non-stream (then `complete`)
      }
    } catch (error) {
      failure = { error };
    } finally {
      shutdown.removeEventListener("abort", onShutdown);
      this.fanout.forget(this);
      for (const member of this.members) member.settle(failure);
      this.members.clear();
    }
  }

  /** graphql-ws's own `next` payload (`errors` as toJSON()), serialized once for every member. */
  private deliver(result: ExecutionResult): void {
    const { errors, ...rest } = result;
    const payload = JSON.stringify(errors ? { ...rest, errors: errors.map((e) => e.toJSON()) } : rest);
    if (isReadyResult(result)) this.readyPayload = payload;
    this.fanout.count("executions");
    let sent = 0;
    for (const member of this.members) if (member.send(payload)) sent++;
    this.fanout.count("deliveries", sent);
  }

  leave(member: Member): void {
    if (!this.members.delete(member) || this.members.size > 0) return;
    // The last one left: free the key at once (a newcomer opens a new group) and end the stream.
    this.fanout.forget(this);
    this.stop.abort();
  }

  dropSlow(socket: WebSocket): void {
    this.fanout.count("slowConsumersClosed");
    socket.close(SLOW_CONSUMER_CLOSE_CODE, "Subscriber too slow");
  }
}

/** One subscription (socket and id) in a group; also the iterator graphql-ws holds for it. */
class Member implements AsyncIterableIterator<never> {
  /** `{"id":"<id>","type":"next","payload":` : the frame is this, the shared payload and `}`. */
  private readonly framePrefix: string;
  private readonly outcome: Promise<IteratorResult<never>>;
  private resolve!: (result: IteratorResult<never>) => void;
  private reject!: (error: unknown) => void;
  private left = false;

  constructor(
    private readonly group: Group,
    private readonly socket: WebSocket,
    id: string,
  ) {
    this.framePrefix = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
    this.outcome = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // graphql-ws may have stopped iterating (socket closed) by the time a stream fails.
    this.outcome.catch(() => {});
  }

  /** Writes one frame; false when the socket is no longer open (the member leaves: its socket is closing). */
  send(payload: string): boolean {
    if (this.socket.readyState !== WebSocket.OPEN) {
      this.leave();
      return false;
    }
    this.socket.send(this.framePrefix + payload + "}");
    if (this.socket.bufferedAmount > MAX_BUFFERED_BYTES) this.group.dropSlow(this.socket);
    return true;
  }

  /** The group ended: done, or the stream's error. */
  settle(failure: { error: unknown } | undefined): void {
    this.left = true;
    if (failure) this.reject(failure.error);
    else this.resolve({ done: true, value: undefined });
  }

  private leave(): void {
    if (this.left) return;
    this.left = true;
    this.resolve({ done: true, value: undefined });
    this.group.leave(this);
  }

  next(): Promise<IteratorResult<never>> {
    return this.outcome;
  }

  async return(): Promise<IteratorResult<never>> {
    this.leave();
    return { done: true, value: undefined };
  }

  async throw(error: unknown): Promise<IteratorResult<never>> {
    this.leave();
    throw error;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
