import { expect } from "vitest";
import { EVENTUALLY_MS } from "./timing.ts";

/**
 * Polls `read` until `ok` holds and returns that value; fails with the last value seen. For outcomes
 * that arrive asynchronously (webhooks, job runs, provider callbacks), instead of fixed sleeps.
 */
export async function until<T>(read: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs = EVENTUALLY_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) {
      const shown = JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? String(v) : v));
      throw new Error(`condition not met within ${timeoutMs} ms; last value: ${shown?.slice(0, 2000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Polls `check` until it holds; fails saying what was awaited (a function: described as things stand then). */
export async function waitUntil(check: () => boolean | Promise<boolean>, what: string | (() => string), timeoutMs = EVENTUALLY_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === "string" ? what : what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Polls `read` until its value has stayed the same for `quietMs` in a row and returns it: for a flow that stops by
 * itself (a stream stalled by backpressure), where a single short gap can be a busy machine's pause rather than the stop.
 */
export async function untilSteady<T>(read: () => T | Promise<T>, quietMs: number, timeoutMs = EVENTUALLY_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = await read();
  let since = Date.now();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const value = await read();
    if (JSON.stringify(value) !== JSON.stringify(last)) {
      last = value;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) {
      return value;
    }
    if (Date.now() > deadline) throw new Error(`value still changing after ${timeoutMs} ms; last value: ${JSON.stringify(value)?.slice(0, 2000)}`);
  }
}

/**
 * The one fixed wait the suite allows: a quiet period proving that nothing ELSE happens (a retry after the last
 * attempt, a duplicate delivery or event, an answer a fake must never send). An absence has no condition to wait
 * on, so this takes time: `ms` must exceed how long the unwanted thing would take to show. Asserts that `read()`
 * (what would change) is the same at the end as at the start, and returns it.
 */
export async function expectNothingMoreWithin<T>(ms: number, read: () => T | Promise<T>, what = "nothing more to happen"): Promise<T> {
  const before = await read();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = await read();
  expect(after, `${what} within ${ms} ms`).toEqual(before);
  return after;
}

/** The subset of Prisma this needs: a count of jobs (the gateway's `db.prisma`). */
interface JobCounter {
  job: { count(args: { where: Record<string, unknown> }): Promise<number> };
}

/**
 * Waits until no job matching `where` is scheduled in the future: a backoff (STK_QUERY_BACKOFF_MS, ...) has run out,
 * so the next runDueJobs() call picks them up. Instead of sleeping past the backoff.
 */
export function jobsFallDue(prisma: JobCounter, where: Record<string, unknown>): Promise<void> {
  return waitUntil(async () => (await prisma.job.count({ where: { ...where, runAt: { gt: new Date() } } })) === 0, () => `jobs ${JSON.stringify(where)} to fall due`);
}

/** Runs `run` with `switches` (a fake's knobs) changed, then puts them back as they were. */
export async function withSwitches<S extends object, T>(switches: S, changes: Partial<S>, run: () => Promise<T>): Promise<T> {
  const before = { ...switches };
  Object.assign(switches, changes);
  try {
    return await run();
  } finally {
    Object.assign(switches, before);
  }
}
