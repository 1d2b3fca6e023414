import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { untilAborted } from "../../src/modules/events/until-aborted.ts";

// A full garbage collection on demand: what the test asks is whether anything still holds the events.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** An endless source of events, as the pub/sub iterator is: each next() is answered on a later tick. */
function events(): AsyncIterableIterator<{ payload: string }> {
  let n = 0;
  let done = false;
  return {
    next: () => new Promise((resolve) => setImmediate(() => resolve(done ? { done: true, value: undefined } : { done: false, value: { payload: `event ${n++} `.repeat(100) } }))),
    return: async () => {
      done = true;
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

describe("untilAborted", () => {
  it("keeps nothing of the events it has passed on while the subscription lives (no reaction left per event on a long-lived promise)", async () => {
    const live = new AbortController(); // aborted only at the end, as a server's shutdown signal
    const stream = untilAborted(events(), live.signal);
    const seen: WeakRef<object>[] = [];
    for (let i = 0; i < 2000; i++) {
      const step = await stream.next();
      expect(step.done).toBe(false);
      seen.push(new WeakRef(step.value as object));
    }
    // Let the last reactions run, then collect: every event but the last few must be gone.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    const retained = seen.slice(0, -1).filter((ref) => ref.deref() !== undefined).length;
    // The generator may still reach the last few (its frame, the pending step); the leak kept every one.
    expect(retained).toBeLessThan(10);
    live.abort();
    expect((await stream.next()).done).toBe(true);
  });

  it("ends at once when the signal aborts while it waits, and returns the source", async () => {
    const shutdown = new AbortController();
    let returned = false;
    const never: AsyncIterableIterator<number> = {
      next: () => new Promise(() => {}),
      return: async () => {
        returned = true;
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
    const stream = untilAborted(never, shutdown.signal);
    const waiting = stream.next();
    shutdown.abort();
    expect(await waiting).toEqual({ done: true, value: undefined });
    expect(returned).toBe(true);
  });
});
