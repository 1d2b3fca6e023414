import { describe, expect, it } from "vitest";
import { createPostingTurns, DELIVERY_CONCURRENCY } from "../../src/modules/webhooks/turns.ts";

/**
 * A delivery that gets no turn at its endpoint goes back to the queue for about as long as that endpoint needs for
 * the ones already here: a slow endpoint's surplus is not loaded and deferred again every few hundred ms.
 */
describe("webhook posting turns: how long a delivery without a turn is deferred", () => {
  it("an endpoint never posted to, or a fast one: 200 to 400 ms", async () => {
    const turns = createPostingTurns();
    for (let i = 0; i < 20; i++) {
      const ms = turns.deferMs(1);
      expect(ms).toBeGreaterThanOrEqual(200);
      expect(ms).toBeLessThanOrEqual(400);
    }
    await turns.inTurn(2, async () => ({ latencyMs: 3 }));
    expect(turns.deferMs(2)).toBeLessThanOrEqual(400);
  });

  it("a slow endpoint keeps few waiting; the rest are deferred for the time its turns take for those here, at most 15 to 30 s", async () => {
    const turns = createPostingTurns();
    await turns.inTurn(7, async () => ({ latencyMs: 2000 })); // its latency is now known: 2 s per answer
    // Nothing here for it: one round of its 5 turns, 2 to 4 s.
    let ms = turns.deferMs(7);
    expect(ms).toBeGreaterThanOrEqual(2000);
    expect(ms).toBeLessThanOrEqual(4000);
    // 15 at once: 5 in flight, 2 waiting (what it sends within a second), 8 without a turn (deferred by the caller).
    const answers: (() => void)[] = [];
    const posts = Array.from({ length: 15 }, () => turns.inTurn(7, () => new Promise<{ latencyMs: number }>((resolve) => answers.push(() => resolve({ latencyMs: 2000 })))));
    await new Promise((resolve) => setImmediate(resolve));
    expect(answers).toHaveLength(5);
    // Those 7 take 7 x 2 s / 5 turns: 2.8 to 5.6 s.
    ms = turns.deferMs(7);
    expect(ms).toBeGreaterThanOrEqual(2800);
    expect(ms).toBeLessThanOrEqual(5600);
    while (answers.length) answers.shift()!(), await new Promise((resolve) => setImmediate(resolve));
    const results = await Promise.all(posts);
    expect(results.filter((r) => r === null)).toHaveLength(8);
    expect(results.filter((r) => r?.latencyMs === 2000)).toHaveLength(7);
    // A very slow one (10 s timeouts): capped, 15 to 30 s.
    for (let i = 0; i < 30; i++) await turns.inTurn(8, async () => ({ latencyMs: 10_000 }));
    expect(turns.deferMs(8)).toBeGreaterThanOrEqual(10_000);
    expect(turns.deferMs(8)).toBeLessThanOrEqual(30_000);
  });

  it("a backlog to one endpoint alone waits here, up to the runner's slots: none is sent back for want of room; beside another endpoint, 95 wait", async () => {
    const turns = createPostingTurns();
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    /** `count` posts to `endpoint` at once, each held until answered; how many got no turn. */
    const burst = async (endpoint: number, count: number) => {
      const answers: (() => void)[] = [];
      const posts = Array.from({ length: count }, () => turns.inTurn(endpoint, () => new Promise<{ latencyMs: number }>((resolve) => answers.push(() => resolve({ latencyMs: 3 })))));
      await settle();
      expect(answers).toHaveLength(5);
      while (answers.length) answers.shift()!(), await settle();
      return (await Promise.all(posts)).filter((r) => r === null).length;
    };
    // Latency not known yet: 5 in flight and 10 waiting.
    expect(await burst(1, 30)).toBe(15);
    // Now known (fast) and kept though its queue emptied: every runner slot may wait for a turn here.
    expect(await burst(1, DELIVERY_CONCURRENCY)).toBe(0);
    // With another endpoint's delivery in flight here, a fast endpoint keeps 95 waiting and sends the rest back.
    let other!: () => void;
    const otherPost = turns.inTurn(2, () => new Promise<{ latencyMs: number }>((resolve) => (other = () => resolve({ latencyMs: 3 }))));
    await settle();
    expect(await burst(1, DELIVERY_CONCURRENCY)).toBe(DELIVERY_CONCURRENCY - 5 - 95);
    other();
    expect(await otherPost).toEqual({ latencyMs: 3 });
  });
});
