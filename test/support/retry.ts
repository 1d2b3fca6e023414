import { setTimeout as sleep } from "node:timers/promises";
import { RETRYABLE_ATTEMPTS } from "./timing.ts";

interface Answer {
  status: number;
  headers: Headers;
}

/** How long a 503 asks the client to wait (Retry-After in seconds or as an HTTP date); undefined when it does not ask. */
export function retryAfterMs(answer: Answer): number | undefined {
  if (answer.status !== 503) return undefined;
  const value = answer.headers.get("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * Sends a request as a well-behaved client does: a 503 with Retry-After (the database unreachable or overloaded for a
 * moment, as on a busy machine, or a failover) is sent again after the wait it names, `attempts` times in all. Any
 * other answer, and the last 503, is returned as it is, for the test to judge. A 503 without Retry-After is not
 * retried (it promises nothing), nor is a 429 (rate limits are behaviour under test).
 *
 * Only for requests a client may safely send again: reads, and writes with an Idempotency-Key or that the gateway
 * makes idempotent itself (a checkout payment, a callback).
 */
export async function retryingUnavailable<T extends Answer>(send: () => Promise<T>, attempts = RETRYABLE_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const answer = await send();
    const wait = retryAfterMs(answer);
    if (wait === undefined || attempt >= attempts) return answer;
    await sleep(wait);
  }
}

/**
 * The same client (apiClient, bearerClient) with every request sent through retryingUnavailable: for tests that fire
 * many requests at once, where a busy machine can make the database answer late for some of them.
 */
export function retrying<C extends object>(client: C): C {
  const methods = Object.entries(client).map(([name, method]) => [
    name,
    typeof method === "function" ? (...args: unknown[]) => retryingUnavailable(() => (method as (...a: unknown[]) => Promise<Answer>)(...args)) : method,
  ]);
  return Object.fromEntries(methods) as C;
}
