import { setTimeout as sleep } from "node:timers/promises";
import { GatewayError, isDatabaseUnavailable } from "../errors.ts";

export interface OutageBounds {
  /** How long the caller waits for the write through an outage before it is answered with the outage (a 503). */
  waitMs: number;
  /** How long, from the first try, the write goes on being retried (in the background once the caller has its answer). */
  giveUpMs: number;
  /** Told of a write that never succeeded after the caller was answered (nothing else will hear of it). */
  onGiveUp: (error: unknown) => void;
}

/**
 * A write that records what a provider has already done (the request id of a push it accepted): lost to a database
 * outage, the provider's callback and the status query could no longer find their payment. So it is retried while the
 * database is unavailable (a primary's failover takes seconds to tens of seconds): the caller waits up to `waitMs`,
 * then gets the outage as its error while the write goes on until `giveUpMs`. Any other error ends it at once.
 */
export function writeThroughOutage<T>(write: () => Promise<T>, bounds: OutageBounds): Promise<T> {
  return answerWithin(retryWhileUnavailable(write, bounds.giveUpMs), bounds.waitMs, bounds.onGiveUp);
}

/** Runs `write` again while the database is unavailable, for `giveUpMs` at most from the first try. */
export async function retryWhileUnavailable<T>(write: () => Promise<T>, giveUpMs: number): Promise<T> {
  const started = Date.now();
  for (let wait = 200; ; wait = Math.min(wait * 2, 2000)) {
    try {
      return await write();
    } catch (error) {
      if (!isDatabaseUnavailable(error) || Date.now() - started + wait > giveUpMs) throw error;
      await sleep(wait, undefined, { ref: false });
    }
  }
}

/**
 * Waits up to `waitMs` for work that goes on either way: past that the caller is answered with the outage (a 503 to
 * retry), and a failure of the work after that answer goes to `onLateFailure` (nothing else will hear of it).
 */
export async function answerWithin<T>(work: Promise<T>, waitMs: number, onLateFailure: (error: unknown) => void): Promise<T> {
  let answered = false;
  work.catch((error) => {
    if (answered) onLateFailure(error);
  });
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<typeof WAITED>((resolve) => (timer = setTimeout(() => resolve(WAITED), waitMs)));
  try {
    const first = await Promise.race([work, waited]);
    if (first !== WAITED) return first as T;
    answered = true;
    throw new GatewayError("service_unavailable", "The database is unavailable; retry shortly");
  } finally {
    clearTimeout(timer);
  }
}

const WAITED = Symbol("waited");
