/**
 * The simulators' "the other side answers in a moment": unref'd timers that close() cancels, so a
 * stopping gateway neither waits for nor runs a simulated answer.
 */
export function createLater() {
  const timers = new Set<NodeJS.Timeout>();
  return {
    later(ms: number, run: () => Promise<unknown>) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        void run().catch(() => {});
      }, ms);
      timer.unref();
      timers.add(timer);
    },
    close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
