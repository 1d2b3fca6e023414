import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { createJobRunner, type JobRunner } from "../../src/jobs/runner.ts";
import { enqueueJobs } from "../../src/jobs/store.ts";
import { startTestGateway, type TestGateway } from "../support/gateway.ts";
import { expectNothingMoreWithin, waitUntil } from "../support/wait.ts";

/**
 * Batch kinds on the one job runner (issue 27): a claim's jobs handed to runBatch together, the done ones deleted
 * in one statement, retries and failures settled per job as `run`'s are; a follow-up claim after a batch settles
 * is for that kind only. Statements are counted as the gateway sends them (its onQuery), no runner of its own.
 */
let gw: TestGateway;
const runners: JobRunner[] = [];
const statements: string[] = [];
const prisma = () => gw.gateway.db.prisma;
const logger = createLogger("silent");
const count = (pattern: RegExp) => statements.filter((s) => pattern.test(s)).length;
const CLAIM = /UPDATE jobs SET status = 'running'/;
const DELETE = /DELETE FROM jobs/;

/** A runner whose poll never comes during a test: every claim after the first pass is a follow-up. */
function runner(pollIntervalMs = 600_000) {
  const r = createJobRunner({ prisma: prisma(), logger, pollIntervalMs, leaseMs: 60_000 });
  runners.push(r);
  return r;
}

beforeAll(async () => {
  gw = await startTestGateway({ env: { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" }, onQuery: (sql) => statements.push(sql) });
});

afterAll(async () => {
  for (const r of runners) await r.stop();
  await gw?.close();
});

describe("job runner: batch kinds", () => {
  it("settles each job of a batch by its own outcome: done deleted in one statement, retry, deferral, error, give-up", async () => {
    const r = runner();
    const gaveUp: number[] = [];
    r.register<{ n: number }>({
      kind: "b.mixed",
      maxAttempts: 1,
      runBatch: async (jobs) => {
        expect(jobs.every(({ job }) => job.kind === "b.mixed" && job.attempt === 1)).toBe(true);
        return jobs.map(({ payload: { n } }) =>
          n < 3 ? undefined : n === 3 ? { retryInMs: 60_000, error: "later" } : n === 4 ? { retryInMs: 60_000, countAttempt: false } : new Error(`broke ${n}`),
        );
      },
      onGiveUp: async ({ n }) => void gaveUp.push(n),
    });
    await enqueueJobs(prisma(), [0, 1, 2, 3, 4, 5].map((n) => ({ kind: "b.mixed", payload: { n } })));
    statements.length = 0;
    expect(await r.runDueJobs(["b.mixed"])).toBe(6);
    const left = await prisma().job.findMany({ where: { kind: "b.mixed" }, orderBy: { id: "asc" } });
    expect(left.map((j) => [(j.payload as { n: number }).n, j.status, j.attempts, j.lastError])).toEqual([
      [3, "queued", 1, "later"],
      [4, "queued", 0, null],
      [5, "failed", 1, "broke 5"],
    ]);
    expect(gaveUp).toEqual([5]);
    expect(count(DELETE)).toBe(1);
  });

  it("a batch's deferrals go back in one statement per scale of delay: one asked back soon is not held as long as one asked back late", async () => {
    const r = runner();
    r.register<{ n: number }>({
      kind: "b.defer-mixed",
      runBatch: async (jobs) => jobs.map(({ payload: { n } }) => ({ retryInMs: n < 2 ? 300 + n : 20_000 + n, countAttempt: false })),
    });
    await enqueueJobs(prisma(), [0, 1, 2, 3].map((n) => ({ kind: "b.defer-mixed", payload: { n } })));
    statements.length = 0;
    const before = Date.now();
    expect(await r.runDueJobs(["b.defer-mixed"])).toBe(4);
    expect(count(/UPDATE jobs SET status = 'queued'/)).toBe(2);
    const left = await prisma().job.findMany({ where: { kind: "b.defer-mixed" }, orderBy: { id: "asc" } });
    for (const job of left) {
      const n = (job.payload as { n: number }).n;
      expect(job).toMatchObject({ status: "queued", attempts: 0, lockedBy: null });
      // Each group is due with its own latest delay (301 ms; 20,003 ms), measured from around the call.
      const delay = job.runAt.getTime() - before;
      if (n < 2) expect(delay).toBeGreaterThanOrEqual(301 - 5), expect(delay).toBeLessThan(10_000);
      else expect(delay).toBeGreaterThanOrEqual(20_003 - 5);
    }
    await prisma().job.deleteMany({ where: { kind: "b.defer-mixed" } });
  });

  it("a batch that throws fails every job in it (retried with backoff); batches are at most batchSize", async () => {
    const r = runner();
    const sizes: number[] = [];
    r.register({
      kind: "b.throws",
      batchSize: 2,
      runBatch: async (jobs) => {
        sizes.push(jobs.length);
        throw new Error("database gone");
      },
    });
    await enqueueJobs(prisma(), [1, 2, 3].map((n) => ({ kind: "b.throws", payload: { n } })));
    expect(await r.runDueJobs(["b.throws"])).toBe(3);
    expect(sizes.sort()).toEqual([1, 2]);
    const left = await prisma().job.findMany({ where: { kind: "b.throws" } });
    expect(left).toHaveLength(3);
    for (const job of left) {
      expect(job).toMatchObject({ status: "queued", attempts: 1, lastError: "database gone", lockedBy: null });
      expect(job.runAt.getTime()).toBeGreaterThan(Date.now() + 500);
    }
    await prisma().job.deleteMany({ where: { kind: "b.throws" } });
  });

  it("drains a backlog batch after batch, each settled batch claiming again for its own kind only", async () => {
    const r = runner();
    const batches: number[][] = [];
    r.register<{ n: number }>({
      kind: "b.backlog",
      concurrency: 2,
      runBatch: async (jobs) => {
        batches.push(jobs.map((j) => j.payload.n));
        return jobs.map(() => undefined);
      },
    });
    // Idle kinds: the old runner ran a claim for each of them after every job that finished.
    for (let i = 0; i < 5; i++) r.register({ kind: `b.idle-${i}`, run: async () => undefined });
    await enqueueJobs(prisma(), [1, 2, 3, 4, 5, 6].map((n) => ({ kind: "b.backlog", payload: { n } })));
    statements.length = 0;
    r.start();
    await waitUntil(async () => (await prisma().job.count({ where: { kind: "b.backlog" } })) === 0, "the backlog to drain");
    await waitUntil(() => count(CLAIM) === 4, () => `4 claims, got ${count(CLAIM)}`);
    expect(batches.flat().sort()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(batches.every((b) => b.length === 2)).toBe(true);
    // The first pass: one statement claims for all six kinds. Then one per settled batch, of b.backlog alone: 2 more full, 1 empty.
    await expectNothingMoreWithin(200, () => count(CLAIM), "no claim after the backlog drained");
    expect(count(CLAIM)).toBe(1 + 3);
    expect(count(DELETE)).toBe(3);
  });

  it("a batch whose jobs were all deferred (countAttempt: false) claims nothing more until the next poll", async () => {
    const r = runner();
    let runs = 0;
    r.register({
      kind: "b.defer",
      concurrency: 2,
      runBatch: async (jobs) => {
        runs++;
        return jobs.map(() => ({ retryInMs: 60_000, countAttempt: false }));
      },
    });
    await enqueueJobs(prisma(), [1, 2, 3, 4].map((n) => ({ kind: "b.defer", payload: { n } })));
    statements.length = 0;
    r.start();
    await waitUntil(async () => (await prisma().job.count({ where: { kind: "b.defer", status: "queued", attempts: 0, runAt: { gt: new Date() } } })) === 2, "two jobs deferred");
    // Its slots are free and two more are due, but a deferral made no progress: claiming on it would only churn.
    await expectNothingMoreWithin(300, () => count(CLAIM), "no follow-up claim after a batch that only deferred");
    expect(count(CLAIM)).toBe(1);
    expect(runs).toBe(1);
    // The batch's deferrals went back in one statement.
    expect(count(/attempts = attempts - 1/)).toBe(1);
    await r.stop();
    await prisma().job.deleteMany({ where: { kind: "b.defer" } });
  });

  it("while the API is busy, a kind that waits on the network starts its busy share per claim but is not capped by jobs still waiting", async () => {
    const r = createJobRunner({ prisma: prisma(), logger, pollIntervalMs: 600_000, leaseMs: 60_000, foreground: { requestArrived: () => undefined, busy: () => true } });
    runners.push(r);
    const waiting: (() => void)[] = [];
    let open = false;
    for (const kind of ["b.network", "b.slots"] as const) {
      r.register({
        kind,
        concurrency: 40,
        ...(kind === "b.network" ? { waitsOnNetwork: true } : {}),
        // A slow endpoint: each job waits until the test lets it go.
        runBatch: async (jobs) => {
          if (!open) await new Promise<void>((release) => waiting.push(release));
          return jobs.map(() => undefined);
        },
      });
      await enqueueJobs(prisma(), Array.from({ length: 20 }, (_, n) => ({ kind, payload: { n } })));
    }
    const started = async (kind: string) => prisma().job.count({ where: { kind, lockedBy: r.workerId } });
    r.start();
    try {
      // The busy share of 40 is 2 for both at first.
      await waitUntil(async () => (await started("b.network")) === 2 && (await started("b.slots")) === 2, "2 of each started");
      // Work committed meanwhile (a nudge): the network kind starts 2 more beside the 2 still waiting; the other has no slot.
      for (const expected of [4, 6]) {
        r.nudge();
        await waitUntil(async () => (await started("b.network")) === expected, () => `${expected} deliveries waiting at once`);
      }
      expect(await started("b.slots")).toBe(2);
    } finally {
      open = true;
      waiting.splice(0).forEach((release) => release());
    }
    await r.stop();
    await prisma().job.deleteMany({ where: { kind: { in: ["b.network", "b.slots"] } } });
  });

  it("a kind that yields claims a batch per poll interval while another kind has a backlog, and every free slot once that backlog is gone", async () => {
    const POLL_MS = 400;
    const r = runner(POLL_MS);
    let urgentOpen = false;
    const urgentGates: (() => void)[] = [];
    let urgentRunning = 0;
    r.register({
      kind: "b.urgent",
      concurrency: 4,
      run: async () => {
        urgentRunning++;
        if (!urgentOpen) await new Promise<void>((release) => urgentGates.push(release));
        urgentRunning--;
      },
    });
    const mailBatches: { size: number; at: number }[] = [];
    let mailRunning = 0;
    let mailMostAtOnce = 0;
    r.register({
      kind: "b.mail",
      yields: true,
      concurrency: 40,
      batchSize: 20,
      runBatch: async (jobs) => {
        mailRunning += jobs.length;
        mailMostAtOnce = Math.max(mailMostAtOnce, mailRunning);
        mailBatches.push({ size: jobs.length, at: Date.now() });
        // Long enough that two batches claimed one after the other still overlap on a busy machine.
        await new Promise((resolve) => setTimeout(resolve, 50));
        mailRunning -= jobs.length;
        return jobs.map(() => undefined);
      },
    });
    await enqueueJobs(prisma(), Array.from({ length: 12 }, (_, n) => ({ kind: "b.urgent", payload: { n } })));
    r.start();
    await waitUntil(() => urgentRunning === 4, () => `4 urgent jobs running, got ${urgentRunning}`);
    // Urgent work is backed up (4 of 12 running, every slot taken): e-mail queued now goes a whole batch per poll
    // interval (not a job at a time, nor every slot at once), and still goes.
    await enqueueJobs(prisma(), Array.from({ length: 200 }, (_, n) => ({ kind: "b.mail", payload: { n } })));
    r.nudge();
    await waitUntil(() => mailBatches.length >= 3, () => `e-mail moving while held, ${mailBatches.length} batches so far`, 20_000);
    const held = mailBatches.slice(0, 3);
    expect(held.map((b) => b.size)).toEqual([20, 20, 20]);
    expect(mailMostAtOnce).toBe(20);
    // Nudges and the batches' own follow-ups do not claim sooner: a timer may fire a little early, never a claim.
    for (let i = 1; i < held.length; i++) expect(held[i]!.at - held[i - 1]!.at).toBeGreaterThanOrEqual(POLL_MS * 0.9 - 5);
    // The backlog drains; its last claim comes back short, and the e-mail's next claim takes every free slot (two batches).
    urgentOpen = true;
    urgentGates.splice(0).forEach((release) => release());
    mailMostAtOnce = 0;
    await waitUntil(async () => (await prisma().job.count({ where: { kind: { in: ["b.urgent", "b.mail"] } } })) === 0, "both queues to drain", 20_000);
    expect(mailMostAtOnce).toBe(40);
    await r.stop();
  });

  it("while the API is busy a kind runs a twentieth of its concurrency (one with busyShare 4 a quarter); once it is not, every free slot is claimed at once", async () => {
    let apiBusy = true;
    const r = createJobRunner({ prisma: prisma(), logger, pollIntervalMs: 600_000, leaseMs: 60_000, foreground: { requestArrived: () => undefined, busy: () => apiBusy } });
    runners.push(r);
    const running = { "b.busy": 0, "b.share": 0 };
    let open = false;
    const gates: { kind: string; release: () => void }[] = [];
    for (const kind of ["b.busy", "b.share"] as const) {
      r.register({
        kind,
        concurrency: 40,
        ...(kind === "b.share" ? { busyShare: 4 } : {}),
        run: async () => {
          running[kind]++;
          if (!open) await new Promise<void>((release) => gates.push({ kind, release }));
          running[kind]--;
        },
      });
      await enqueueJobs(prisma(), Array.from({ length: 80 }, (_, n) => ({ kind, payload: { n } })));
    }
    r.start();
    await waitUntil(() => running["b.busy"] === 2 && running["b.share"] === 10, () => `2 and 10 running (40 / 20, 40 / 4), got ${JSON.stringify(running)}`);
    // One of each finishes while the API is still busy: their follow-ups take their places, no more.
    const releaseOne = (kind: string) => gates.splice(gates.findIndex((g) => g.kind === kind), 1)[0]!.release();
    releaseOne("b.busy");
    releaseOne("b.share");
    await waitUntil(() => gates.length === 12, () => `their places taken, ${gates.length} waiting`);
    expect(await expectNothingMoreWithin(200, () => running["b.busy"] + running["b.share"], "no more than the busy shares")).toBe(12);
    apiBusy = false;
    releaseOne("b.busy");
    releaseOne("b.share");
    await waitUntil(() => running["b.busy"] === 40 && running["b.share"] === 40, () => `all 40 slots of each claimed after the API went quiet, got ${JSON.stringify(running)}`);
    open = true;
    gates.splice(0).forEach((gate) => gate.release());
    await waitUntil(async () => (await prisma().job.count({ where: { kind: { in: ["b.busy", "b.share"] } } })) === 0, "the rest to run", 20_000);
    await r.stop();
  });
});
