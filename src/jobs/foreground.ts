import { performance } from "node:perf_hooks";

/**
 * Whether this process is busy serving API requests, for background work to step back: the job runner claims a
 * smaller share while it is (a webhook backlog must not starve the API: issue 27 keeps API p99 during a drain
 * within 2x of idle). Busy means both: requests arrived within the last window, and the event loop was more than
 * BUSY_UTILIZATION occupied over the last window. A quiet API, or a busy loop with no requests (a drain alone),
 * is not busy, so neither slows the drain for nothing. Long-lived requests (SSE, WebSocket) count once, as they arrive.
 */
export interface Foreground {
  /** Called as each API request arrives. */
  requestArrived(): void;
  busy(): boolean;
}

const WINDOW_MS = 100;
const BUSY_UTILIZATION = 0.6;

export function createForeground(): Foreground {
  let lastArrival = Number.NEGATIVE_INFINITY;
  let previous = performance.eventLoopUtilization();
  let sampledAt = performance.now();
  let loopBusy = false;
  return {
    requestArrived() {
      lastArrival = performance.now();
    },
    busy() {
      const now = performance.now();
      if (now - sampledAt >= WINDOW_MS) {
        const current = performance.eventLoopUtilization();
        loopBusy = performance.eventLoopUtilization(current, previous).utilization > BUSY_UTILIZATION;
        previous = current;
        sampledAt = now;
      }
      return loopBusy && now - lastArrival < WINDOW_MS;
    },
  };
}
