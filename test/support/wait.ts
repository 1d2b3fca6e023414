/**
 * Polls `read` until `ok` holds and returns that value; fails with the last value seen. For outcomes
 * that arrive asynchronously (webhooks, job runs, provider callbacks), instead of fixed sleeps.
 */
export async function until<T>(read: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
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
