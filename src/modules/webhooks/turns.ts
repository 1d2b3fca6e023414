/** Deliveries to one endpoint at once, per instance. */
const MAX_IN_FLIGHT_PER_ENDPOINT = 5;
/**
 * How many more may wait here for a turn: 10, or as many as the endpoint's recent latency says get their turn
 * within TURN_WAIT_BUDGET_MS, up to 95 (half the runner's slots), or up to all of them while no other endpoint has
 * deliveries here (a backlog to one endpoint is then never deferred, only to be claimed again). A fast endpoint
 * keeps a deep queue, so a backlog to it never waits on the database between batches. A slow one (500 ms or more
 * per answer) keeps only what it sends within a second (2 at 2 s per answer, none at 10 s timeouts): the rest is
 * deferred until about its turn (deferMs), so its waiters do not hold the runner's slots the others need.
 */
const MIN_WAITING_PER_ENDPOINT = 10;
const MAX_WAITING_PER_ENDPOINT = 95;
const TURN_WAIT_BUDGET_MS = 5_000;
/** An endpoint this slow (its moving average) keeps only as many waiting as it sends within SLOW_WAIT_BUDGET_MS. */
const SLOW_ENDPOINT_MS = 500;
const SLOW_WAIT_BUDGET_MS = 1_000;
/** A delivery deferred for want of a turn is due again after this long at least, at most DEFER_MAX_MS (see deferMs). */
const DEFER_MIN_MS = 200;
const DEFER_MAX_MS = 15_000;
/** POSTs in flight at once per instance, all endpoints together. */
const MAX_SENDING = 50;
/**
 * Runner slots for deliveries: several times the POSTs in flight, so the next batches are claimed and loaded while
 * others post and settle, and the senders do not wait on the database. One endpoint holds at most 100 of them (in
 * flight and waiting), a slow one 15, so the others keep flowing.
 */
export const DELIVERY_CONCURRENCY = 4 * MAX_SENDING;

/**
 * Who may post now, on this instance: a turn at the endpoint (at most 5 in flight to it, a bounded queue behind
 * them), then a slot of the instance-wide limit on POSTs in flight (taken after the turn, so no cycle of waits).
 */
export function createPostingTurns() {
  /** Per endpoint with deliveries here: in flight and waiting. */
  const slots = new Map<number, { inFlight: number; waiting: { resolve: (turn: boolean) => void; since: number }[] }>();
  /** Per endpoint this instance has posted to, its recent latency (a moving average), kept while its queue is empty. */
  const latencies = new Map<number, number>();
  let sending = 0;
  const waitingToSend: (() => void)[] = [];

  function waitingAllowed(latencyMs: number | undefined, alone: boolean): number {
    if (latencyMs === undefined) return MIN_WAITING_PER_ENDPOINT;
    const withinBudget = Math.floor((MAX_IN_FLIGHT_PER_ENDPOINT * TURN_WAIT_BUDGET_MS) / Math.max(1, latencyMs));
    const cap = alone ? DELIVERY_CONCURRENCY - MAX_IN_FLIGHT_PER_ENDPOINT : MAX_WAITING_PER_ENDPOINT;
    // A slow endpoint's waiters would hold runner slots doing nothing: its surplus goes back to the queue until about
    // when it can be sent (deferMs) and the other endpoints keep the slots.
    if (latencyMs >= SLOW_ENDPOINT_MS) return Math.min(cap, Math.floor((MAX_IN_FLIGHT_PER_ENDPOINT * SLOW_WAIT_BUDGET_MS) / latencyMs));
    return Math.min(cap, Math.max(MIN_WAITING_PER_ENDPOINT, withinBudget));
  }

  function noteLatency(endpointId: number, latencyMs: number) {
    const previous = latencies.get(endpointId);
    latencies.set(endpointId, previous === undefined ? latencyMs : 0.8 * previous + 0.2 * latencyMs);
  }

  /**
   * A turn to send to this endpoint: now, after a local wait, or false when too many already wait or the wait ran
   * past TURN_WAIT_BUDGET_MS (the endpoint slowed down after they queued): the job is deferred, well inside its lease.
   */
  async function takeTurn(endpointId: number): Promise<boolean> {
    let slot = slots.get(endpointId);
    if (!slot) slots.set(endpointId, (slot = { inFlight: 0, waiting: [] }));
    if (slot.inFlight < MAX_IN_FLIGHT_PER_ENDPOINT) {
      slot.inFlight++;
      return true;
    }
    if (slot.waiting.length >= waitingAllowed(latencies.get(endpointId), slots.size === 1)) return false;
    return new Promise<boolean>((resolve) => slot.waiting.push({ resolve, since: performance.now() }));
  }

  /** Hands the turn to the next waiting delivery, if any; those that waited too long are deferred. */
  function endTurn(endpointId: number) {
    const slot = slots.get(endpointId);
    if (!slot) return;
    const now = performance.now();
    while (slot.waiting.length && now - slot.waiting[0]!.since > TURN_WAIT_BUDGET_MS) slot.waiting.shift()!.resolve(false);
    const next = slot.waiting.shift();
    if (next) return next.resolve(true);
    slot.inFlight--;
    if (slot.inFlight === 0) slots.delete(endpointId);
  }

  async function takeSendSlot(): Promise<void> {
    if (sending < MAX_SENDING) {
      sending++;
      return;
    }
    await new Promise<void>((resolve) => waitingToSend.push(resolve));
  }

  function endSendSlot() {
    const next = waitingToSend.shift();
    if (next) next();
    else sending--;
  }

  /**
   * How long a delivery that got no turn should stay in the queue: about as long as this endpoint needs for the ones
   * already waiting here (each holding a turn for its latency, MAX_IN_FLIGHT_PER_ENDPOINT at a time), at least
   * DEFER_MIN_MS and at most DEFER_MAX_MS, jittered. A slow endpoint's surplus then comes back about when it could be
   * sent, not every few hundred ms to be loaded and deferred again: at 2 s per answer that churn grew with its
   * backlog, and, its jobs being the oldest due, took the claims the other endpoints' new deliveries needed.
   */
  function deferMs(endpointId: number): number {
    const latency = latencies.get(endpointId) ?? 0;
    const queued = (slots.get(endpointId)?.waiting.length ?? 0) + MAX_IN_FLIGHT_PER_ENDPOINT;
    const wait = Math.min(DEFER_MAX_MS, Math.max(DEFER_MIN_MS, (queued * latency) / MAX_IN_FLIGHT_PER_ENDPOINT));
    return Math.round(wait * (1 + Math.random()));
  }

  return {
    deferMs,

    /** Runs `post` in a turn at the endpoint and a sending slot, noting its latency; null when no turn came (defer the job). */
    async inTurn<Result extends { latencyMs: number }>(endpointId: number, post: () => Promise<Result>): Promise<Result | null> {
      if (!(await takeTurn(endpointId))) return null;
      try {
        await takeSendSlot();
        try {
          const result = await post();
          noteLatency(endpointId, result.latencyMs);
          return result;
        } finally {
          endSendSlot();
        }
      } finally {
        endTurn(endpointId);
      }
    },
  };
}
