/**
 * Runs task(0) .. task(total - 1) with at most `concurrency` in flight, as that many clients would; answers the
 * results by index. For load tests (bursts of payments) instead of a hand-written worker pool per file.
 */
export async function inParallel<T>(total: number, concurrency: number, task: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(total);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      while (next < total) {
        const index = next++;
        results[index] = await task(index);
      }
    }),
  );
  return results;
}
