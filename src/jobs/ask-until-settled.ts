import type { Logger } from "../logger.ts";
import type { JobDefinition } from "./runner.ts";

/**
 * A job that asks a provider what became of a pending money object (a payout, a refund) until an answer
 * settles it, with doubling waits capped at an hour. Only the provider's answer ever settles it: the job
 * never sends anything again. `load` finds the object and what to ask with (null: nothing left to ask);
 * `ask` asks and answers whether the object is settled now. A failed question is logged and asked again.
 */
export function askUntilSettled<P, Subject extends { reference: string }>(options: {
  kind: string;
  /** "payout", "refund": for the log line. */
  what: string;
  logger: Logger;
  load(payload: P): Promise<Subject | null>;
  ask(subject: Subject): Promise<boolean>;
  /** The wait before asking again after `attempt` questions (the runner's attempt count). */
  firstWaitMs(subject: Subject): number;
}): JobDefinition<P> {
  return {
    kind: options.kind,
    concurrency: 5,
    async run(payload, job) {
      const subject = await options.load(payload);
      if (!subject) return;
      try {
        if (await options.ask(subject)) return;
      } catch (error) {
        options.logger.warn({ reference: subject.reference, err: (error as Error).message }, `${options.what} status query failed; will ask again`);
      }
      return { retryInMs: Math.min(options.firstWaitMs(subject) * 2 ** job.attempt, MAX_WAIT_MS) };
    },
  };
}

const MAX_WAIT_MS = 60 * 60_000;
