/**
 * Group commit for a call every request of a hot path makes once (an Idempotency-Key's claim and its stored response,
 * a request's rate-limit admission on Redis): the first call runs at once, alone; calls made while a batch is in
 * flight wait and then go together as the next batch, one statement (or script) for all of them. So an idle server
 * adds no latency, and a busy one pays one round trip, one parse and one commit per batch instead of per request.
 *
 * DataLoader was weighed: it batches the calls of one event-loop tick, and a server's requests arrive on ticks of
 * their own, so under load it would still send them one by one. (ioredis' auto-pipelining, which also waits for the
 * end of a tick, was measured slower on the rate limiter: bench/README.md.)
 *
 * `run` answers the batch's items in their order, or throws: then every caller in that batch gets the error, as
 * each would have from its own call. `conflicts(a, b)` keeps two items out of one batch (one statement cannot
 * write one row twice); the later one waits for the next batch.
 */
export function groupCommit<I, O>(
  run: (items: I[]) => Promise<O[]>,
  options: { max: number; conflicts?: (a: I, b: I) => boolean },
): (item: I) => Promise<O> {
  const { max, conflicts } = options;
  let waiting: { item: I; resolve: (out: O) => void; reject: (error: unknown) => void }[] = [];
  let busy = false;

  async function flush(): Promise<void> {
    busy = true;
    while (waiting.length > 0) {
      const batch: typeof waiting = [];
      const later: typeof waiting = [];
      for (const entry of waiting) {
        if (batch.length < max && !(conflicts && batch.some((other) => conflicts(other.item, entry.item)))) batch.push(entry);
        else later.push(entry);
      }
      waiting = later;
      try {
        const outs = await run(batch.map((entry) => entry.item));
        if (outs.length !== batch.length) throw new Error(`a batched statement answered ${outs.length} of ${batch.length} items`);
        batch.forEach((entry, i) => entry.resolve(outs[i]!));
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    busy = false;
  }

  return (item) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (!busy) void flush();
    });
}
