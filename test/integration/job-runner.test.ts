import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { createJobRunner, type JobRunner } from "../../src/jobs/runner.ts";
import { cancel, enqueue, enqueueJobs, reschedule } from "../../src/jobs/store.ts";
import { startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";

/** The durable job runner on the real database of each backend: claims, retries, give-up, leases, bounds. */
let gw: TestGateway;
const runners: JobRunner[] = [];
const prisma = () => gw.gateway.db.prisma;
const logger = createLogger("silent");

function runner(pollIntervalMs = 50, leaseMs = 60_000) {
  const r = createJobRunner({ prisma: prisma(), logger, pollIntervalMs, leaseMs });
  runners.push(r);
  return r;
}

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
});

afterAll(async () => {
  for (const r of runners) await r.stop();
  await gw?.close();
});

describe("job runner", () => {
  it("runs a committed job once and deletes it; a job enqueued in a rolled-back transaction never exists", async () => {
    const r = runner();
    const seen: number[] = [];
    r.register<{ n: number }>({ kind: "t.once", run: async ({ n }) => void seen.push(n) });
    await expect(
      prisma().$transaction(async (tx) => {
        await enqueueJobs(tx, [{ kind: "t.once", payload: { n: 1 } }]);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    await enqueueJobs(prisma(), [{ kind: "t.once", payload: { n: 2 } }]);
    r.start();
    await waitUntil(async () => (await prisma().job.count({ where: { kind: "t.once" } })) === 0, "the t.once job to go");
    await expectNothingMoreWithin(150, () => [...seen], "no run of the rolled-back job");
    expect(seen).toEqual([2]);
  });

  it("retries a throwing job with backoff, records the error, and keeps it as failed after maxAttempts", async () => {
    const r = runner();
    let runs = 0;
    const gaveUp: string[] = [];
    r.register({
      kind: "t.flaky",
      maxAttempts: 3,
      run: async () => {
        runs++;
        throw new Error(`boom ${runs}`);
      },
      onGiveUp: async (_p, _job, error) => void gaveUp.push(error),
    });
    await enqueueJobs(prisma(), [{ kind: "t.flaky", payload: {} }]);
    const ranAt = Date.now();
    expect(await r.runDueJobs(["t.flaky"])).toBe(1);
    const afterFirst = await prisma().job.findFirstOrThrow({ where: { kind: "t.flaky" } });
    expect(afterFirst).toMatchObject({ status: "queued", attempts: 1, lastError: "boom 1", lockedBy: null });
    // Exponential backoff from about a second (0.8 s at least, from when it failed): not due again yet.
    expect(afterFirst.runAt.getTime()).toBeGreaterThanOrEqual(ranAt + 800);
    expect(await r.runDueJobs(["t.flaky"])).toBe(0);
    for (let i = 0; i < 2; i++) {
      await prisma().job.updateMany({ where: { kind: "t.flaky" }, data: { runAt: new Date(0) } });
      expect(await r.runDueJobs(["t.flaky"])).toBe(1);
    }
    expect(await prisma().job.findFirstOrThrow({ where: { kind: "t.flaky" } })).toMatchObject({ status: "failed", attempts: 3, lastError: "boom 3" });
    expect(gaveUp).toEqual(["boom 3"]);
    // A failed job is never claimed again.
    await prisma().job.updateMany({ where: { kind: "t.flaky" }, data: { runAt: new Date(0) } });
    expect(await r.runDueJobs(["t.flaky"])).toBe(0);
    expect(runs).toBe(3);
  });

  it("reschedules on request; a deferral does not count as an attempt", async () => {
    const r = runner();
    const attempts: number[] = [];
    r.register({
      kind: "t.later",
      run: async (_p, job) => {
        attempts.push(job.attempt);
        if (attempts.length === 1) return { retryInMs: 0, countAttempt: false };
        if (attempts.length === 2) return { retryInMs: 0, error: "not yet" };
      },
    });
    await enqueueJobs(prisma(), [{ kind: "t.later", payload: {} }]);
    await r.runDueJobs(["t.later"]);
    await r.runDueJobs(["t.later"]);
    expect(await prisma().job.findFirstOrThrow({ where: { kind: "t.later" } })).toMatchObject({ attempts: 1, lastError: "not yet", status: "queued" });
    await r.runDueJobs(["t.later"]);
    expect(attempts).toEqual([1, 1, 2]);
    expect(await prisma().job.count({ where: { kind: "t.later" } })).toBe(0);
  });

  it("takes over a job whose instance died once its lease ends, and not before", async () => {
    const r = runner();
    const ran: bigint[] = [];
    r.register({ kind: "t.orphan", run: async (_p, job) => void ran.push(job.id) });
    const future = new Date(Date.now() + 60_000);
    await prisma().job.create({ data: { kind: "t.orphan", payload: {}, status: "running", lockedBy: "dead-instance", runAt: future, attempts: 1 } });
    expect(await r.runDueJobs(["t.orphan"])).toBe(0);
    await prisma().job.updateMany({ where: { kind: "t.orphan" }, data: { runAt: new Date(Date.now() - 1) } });
    expect(await r.runDueJobs(["t.orphan"])).toBe(1);
    expect(ran).toHaveLength(1);
    expect(await prisma().job.count({ where: { kind: "t.orphan" } })).toBe(0);
  });

  it("a job that runs longer than its lease keeps it while it runs: neither another instance nor its own claims it again", async () => {
    const leaseMs = 1500;
    const a = runner(20, leaseMs);
    const b = runner(20, leaseMs);
    let runs = 0;
    let done = 0;
    for (const r of [a, b]) {
      r.register({
        kind: "t.long",
        run: async () => {
          runs++;
          // Four leases long: without renewal, the lease lapses and the job is claimed again while it runs.
          await new Promise((res) => setTimeout(res, leaseMs * 4));
          done++;
        },
      });
    }
    await enqueueJobs(prisma(), [{ kind: "t.long", payload: {} }]);
    a.start();
    b.start();
    await waitUntil(async () => (await prisma().job.count({ where: { kind: "t.long" } })) === 0, "the t.long job to go");
    await expectNothingMoreWithin(leaseMs * 2, () => runs, "no second run");
    expect({ runs, done }).toEqual({ runs: 1, done: 1 });
  });

  it("never runs more jobs of a kind at once than its concurrency, and finishes them all", async () => {
    const r = runner(20);
    let running = 0;
    let peak = 0;
    let done = 0;
    r.register({
      kind: "t.bounded",
      concurrency: 3,
      run: async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((res) => setTimeout(res, 15));
        running--;
        done++;
      },
    });
    await enqueueJobs(prisma(), Array.from({ length: 30 }, (_, i) => ({ kind: "t.bounded", payload: { i } })));
    r.start();
    r.nudge();
    await waitUntil(() => done === 30, "30 jobs done");
    expect(peak).toBe(3);
    await waitUntil(async () => (await prisma().job.count({ where: { kind: "t.bounded" } })) === 0, "the t.bounded jobs to go");
  });

  it("two runners on one database run each job once", async () => {
    const a = runner(20);
    const b = runner(20);
    const runsById = new Map<string, number>();
    for (const r of [a, b]) {
      r.register<{ i: number }>({
        kind: "t.shared",
        run: async ({ i }) => {
          runsById.set(String(i), (runsById.get(String(i)) ?? 0) + 1);
          await new Promise((res) => setTimeout(res, 2));
        },
      });
    }
    await enqueueJobs(prisma(), Array.from({ length: 60 }, (_, i) => ({ kind: "t.shared", payload: { i } })));
    a.start();
    b.start();
    await waitUntil(async () => (await prisma().job.count({ where: { kind: "t.shared" } })) === 0, "the t.shared jobs to go");
    expect(runsById.size).toBe(60);
    expect([...runsById.values()].every((n) => n === 1)).toBe(true);
  });

  it("enqueue with a key replaces the queued job of that kind and key; cancel and reschedule touch only queued jobs of that kind and key", async () => {
    const kind = "t.keyed";
    const jobsOf = () => prisma().job.findMany({ where: { kind }, orderBy: { id: "asc" } });
    const later = new Date(Date.now() + 3_600_000);
    await enqueue(prisma(), kind, { payoutId: 1, note: "first" }, { runAt: later, key: { payoutId: 1 } });
    await enqueue(prisma(), kind, { payoutId: 2 }, { runAt: later });
    await enqueue(prisma(), "t.keyed-other", { payoutId: 1 }, { runAt: later });
    await enqueue(prisma(), kind, { payoutId: 1, note: "second" }, { runAt: later, key: { payoutId: 1 } });
    expect((await jobsOf()).map((j) => j.payload)).toEqual([{ payoutId: 2 }, { payoutId: 1, note: "second" }]);

    // A running job (claimed by an instance) is that instance's: neither moved nor cancelled.
    await prisma().job.create({ data: { kind, payload: { payoutId: 1 }, status: "running", lockedBy: "elsewhere", runAt: later } });
    const now = new Date();
    expect(await reschedule(prisma(), kind, { payoutId: 1 }, now)).toBe(1);
    const moved = await jobsOf();
    expect(moved.filter((j) => j.runAt.getTime() === now.getTime()).map((j) => j.payload)).toEqual([{ payoutId: 1, note: "second" }]);
    expect(moved.filter((j) => j.runAt.getTime() === later.getTime())).toHaveLength(2);

    expect(await cancel(prisma(), kind, { payoutId: 1 })).toBe(1);
    expect((await jobsOf()).map((j) => [j.payload, j.status])).toEqual([[{ payoutId: 2 }, "queued"], [{ payoutId: 1 }, "running"]]);
    expect(await cancel(prisma(), kind, { payoutId: 2, note: "none" })).toBe(0);
    expect(await prisma().job.count({ where: { kind: "t.keyed-other" } })).toBe(1);
    await expect(cancel(prisma(), kind, {})).rejects.toThrow(/at least one payload field/);
    await prisma().job.deleteMany({ where: { kind: { in: [kind, "t.keyed-other"] } } });
  });
});
