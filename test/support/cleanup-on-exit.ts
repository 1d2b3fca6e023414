import { isMainThread } from "node:worker_threads";

/**
 * Cleanup on exit, shared through globalThis with the other test/support server helpers (and with re-evaluated copies
 * of this module under vitest's isolation), so that there is exactly one exit hook and one listener per signal.
 */
type CleanupRegistry = { cleanups: Set<() => void> };
const REGISTRY_KEY = Symbol.for("payment-gateway.test-support.cleanup-on-exit");

/** Runs `cleanup` at exit (or on SIGINT/SIGTERM/SIGHUP); registering the same function again is a no-op. */
export function onProcessExit(cleanup: () => void): void {
  const global = globalThis as { [REGISTRY_KEY]?: CleanupRegistry };
  let registry = global[REGISTRY_KEY];
  if (!registry) {
    const reg: CleanupRegistry = (registry = global[REGISTRY_KEY] = { cleanups: new Set() });
    const runAll = () => {
      for (const fn of [...reg.cleanups]) {
        try {
          fn();
        } catch {
          // best effort
        }
      }
    };
    process.on("exit", runAll);
    if (isMainThread) {
      // signals are only delivered to the main thread
      for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
        const onSignal = () => {
          runAll();
          // If nobody else handles this signal, restore the default behaviour (terminate) by re-raising it.
          if (process.listenerCount(signal) === 1) {
            process.removeListener(signal, onSignal);
            process.kill(process.pid, signal);
          }
        };
        process.on(signal, onSignal);
      }
    }
  }
  registry.cleanups.add(cleanup);
}
