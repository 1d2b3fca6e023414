import type { PrismaClient } from "../../db/database.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import type { Logger } from "../../logger.ts";
import { ADVANCE_CLOCK_JOB, type BillingCycle } from "./cycle.ts";
import * as store from "./store.ts";

/**
 * Test clocks (test mode): advancing one runs everything due on it up to its new time, in the order it falls due
 * (periods invoiced, charges made and retried, subscriptions ended), each step at its own moment, as if that time
 * had passed; then the clock is ready again. One job per advance, so the advance survives a crash: the steps are
 * the billing cycle's own, each guarded, so a step run twice (a lease that ran out) is still made once.
 */

/** More steps than a year of daily billing with every retry, far fewer than a runaway loop. */
const MAX_STEPS_PER_ADVANCE = 20_000;

export function createClockRunner(deps: { prisma: PrismaClient; jobs: JobRunner; logger: Logger; cycle: BillingCycle }) {
  const { prisma, cycle } = deps;

  async function runDue(clockId: number): Promise<void> {
    const clock = await store.clockById(prisma, clockId);
    if (!clock) return;
    for (let steps = 0; steps < MAX_STEPS_PER_ADVANCE; steps++) {
      const due = await store.nextDueOnClock(prisma, clock.id, clock.frozenTime);
      if (!due) break;
      if (due.kind === "subscription") await cycle.billSubscription(due.id, due.at);
      else await cycle.collectInvoice(due.id, due.at);
      if (steps === MAX_STEPS_PER_ADVANCE - 1) deps.logger.warn({ clock: clock.reference }, "test clock: step limit reached; the rest runs on the next advance");
    }
    await store.finishAdvance(prisma, clock.id, clock.frozenTime);
  }

  deps.jobs.register<{ clockId: number }>({
    kind: ADVANCE_CLOCK_JOB,
    concurrency: 4,
    run: async ({ clockId }) => runDue(Number(clockId)),
    // A step that kept failing: the clock is ready again (what is still due runs on its next advance), not stuck advancing.
    onGiveUp: async ({ clockId }) => {
      const clock = await store.clockById(prisma, Number(clockId));
      if (clock) await store.finishAdvance(prisma, clock.id, clock.frozenTime);
    },
  });

  return { runDue };
}
