/**
 * The suite's time bounds, in one place. CI runs on a developer's machine that may be busy (issue 35: a
 * fresh-clone run beside another job, load ~10 on 2 cores), where a request that answers in 5 ms idle can
 * take a second, and a cold `tsx` process ten. So a bound here says when to stop waiting for an outcome, never
 * how fast it should come: tests assert what happened, and wait for it up to one of these. They cost nothing
 * when the outcome comes and only delay reporting a real failure, so they are generous on purpose.
 *
 * A test that must tell "at once" from "after X" (a cache's lifetime, a command timeout) names its own bound,
 * derived from X, with the reason beside it.
 */

/** An asynchronous outcome: a webhook delivered, a job run, a subscription message, a revocation message applied. */
export const EVENTUALLY_MS = 30_000;

/** A line from a child process: a gateway or the CLI started with `node --import tsx`, which compiles on each cold start. */
export const PROCESS_OUTPUT_MS = 180_000;

/** Chromium shows what a page fetched or did (dashboard, checkout, GraphiQL). */
export const BROWSER_MS = 30_000;

/**
 * vitest's timeout for one test: process tests start several cold gateways and CLI processes, a few seconds each
 * when idle, ten to fifty times that under load (at a load of 25 to 30 on 2 cores a cold CLI on PGlite took a minute,
 * and one test of three CLI runs went past 180 s).
 */
export const TEST_TIMEOUT_MS = 300_000;

/** vitest's timeout for beforeAll/afterAll: gateways, databases, Redis and PostgreSQL clusters, Chromium. */
export const HOOK_TIMEOUT_MS = 300_000;

/** A test that does far more than most: a production build, 100,000-row loads, three gateways rolled behind HAProxy. */
export const LONG_TEST_TIMEOUT_MS = 600_000;

/**
 * How many times a client retries an answer that says "retry" (503 with Retry-After: the database briefly
 * unreachable or overloaded, a failover), waiting the Retry-After each time. The gateway says 5 s, so ten
 * attempts give it 45 s to recover (five were not always enough on a CI machine at load 10).
 */
export const RETRYABLE_ATTEMPTS = 10;
