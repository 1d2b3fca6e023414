import { describe, expect, it } from "vitest";
import { groupCommit } from "../../src/infra/group-commit.ts";

/** A statement that records each batch it was given and answers when released (so the test decides what is in flight). */
function recordingStatement<I, O>(answer: (item: I) => O) {
  const batches: I[][] = [];
  const pending: { release: () => void; fail: (error: Error) => void }[] = [];
  const run = (items: I[]) =>
    new Promise<O[]>((resolve, reject) => {
      batches.push(items);
      pending.push({ release: () => resolve(items.map(answer)), fail: reject });
    });
  return { run, batches, next: () => pending.shift()! };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("groupCommit (group commit)", () => {
  it("runs the first call alone at once, and the calls made while it is in flight together next, each answered its own result", async () => {
    const statement = recordingStatement((n: number) => n * 10);
    const call = groupCommit(statement.run, { max: 100 });
    const first = call(1);
    expect(statement.batches).toEqual([[1]]);
    const more = [call(2), call(3), call(4)];
    await tick();
    expect(statement.batches).toEqual([[1]]);
    statement.next().release();
    expect(await first).toBe(10);
    await tick();
    expect(statement.batches).toEqual([[1], [2, 3, 4]]);
    statement.next().release();
    expect(await Promise.all(more)).toEqual([20, 30, 40]);
    // Idle again: the next call goes at once, alone.
    const last = call(5);
    expect(statement.batches.at(-1)).toEqual([5]);
    statement.next().release();
    expect(await last).toBe(50);
  });

  it("keeps conflicting items and those beyond max for later batches, in the order they came", async () => {
    const statement = recordingStatement((s: string) => s.toUpperCase());
    const call = groupCommit(statement.run, { max: 3, conflicts: (a, b) => a[0] === b[0] });
    const all = [call("a1"), call("a2"), call("b1"), call("a3"), call("c1"), call("d1"), call("e1")];
    for (let i = 0; i < 4; i++) {
      await tick();
      statement.next()?.release();
    }
    expect(await Promise.all(all)).toEqual(["A1", "A2", "B1", "A3", "C1", "D1", "E1"]);
    // a3 conflicts with a2 (one statement cannot write one row twice): it waits; max 3 sends d1 and e1 along with it.
    expect(statement.batches).toEqual([["a1"], ["a2", "b1", "c1"], ["a3", "d1", "e1"]]);
  });

  it("gives a failed batch's error to each of its callers only; the next batch runs", async () => {
    const statement = recordingStatement((n: number) => n);
    const call = groupCommit(statement.run, { max: 10 });
    const first = call(1);
    const failing = [call(2), call(3)];
    const settled = Promise.allSettled(failing);
    statement.next().release();
    await first;
    await tick();
    const later = call(4);
    statement.next().fail(new Error("deadlock detected"));
    expect((await settled).map((r) => (r.status === "rejected" ? (r.reason as Error).message : r.value))).toEqual(["deadlock detected", "deadlock detected"]);
    await tick();
    expect(statement.batches.at(-1)).toEqual([4]);
    statement.next().release();
    expect(await later).toBe(4);
  });

  it("refuses a statement that answers fewer items than it was given (every caller gets the error)", async () => {
    const call = groupCommit(async (items: number[]) => items.slice(1), { max: 10 });
    await expect(call(1)).rejects.toThrow(/answered 0 of 1/);
  });
});
