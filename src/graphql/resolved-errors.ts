import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The business errors an operation resolved as typed results, as the instances thrown. A REST row selects only
 * `code message` of them; its transport takes the instance back from here so nothing else is lost (a validation
 * error's every bad field, its field name).
 */
const resolved = new AsyncLocalStorage<Error[]>();

/** Runs an operation with its resolved errors collected into `into`. */
export function collectResolvedErrors<T>(into: Error[], run: () => T): T {
  return resolved.run(into, run);
}

/** The errors plugin's hook: an error that became a typed result. */
export function noteResolvedError(error: Error): void {
  resolved.getStore()?.push(error);
}
