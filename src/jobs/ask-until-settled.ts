import type { Logger } from "../logger.ts";
import type { JobDefinition } from "./runner.ts";

const MAX_WAIT_MS = 60 * 60_000;

/**
 * A job that asks a provider what became of a pending money object (a payment, a payout, a refund) until an
 * answer settles it, with doubling waits capped at an hour. Only the provider's answer ever settles it, or, when
 * the object has a lifetime, its expiry: the job never sends anything again. `find` loads the object; `via` gives
 * what to ask with (none: nothing to ask); `ask` asks and answers whether the object is settled now. A failed
 * question is logged and asked again.
 */
export function askUntilSettled<P, Subject extends { reference: string; status: string }, Via>(options: {
  kind: string;
  logger: Logger;
  find(payload: P): Promise<Subject | null>;
  via(subject: Subject): Via | undefined;
  ask(subject: Subject, via: Via): Promise<boolean>;
  /** The wait before asking again the first time; it doubles with each question. */
  firstWaitMs(via: Via): number;
  /** Instead of the doubling from firstWaitMs: the wait before asking again after question number `attempt` (from 1). */
  nextWaitMs?(subject: Subject, via: Via, attempt: number): number;
  /** After an answer that did not settle it: settles an object that outlived its lifetime (an expiry); true when it is settled now. */
  expireIfOutlived?(subject: Subject, via: Via): Promise<boolean>;
}): JobDefinition<P> {
  return {
    kind: options.kind,
    concurrency: 5,
    async run(payload, job) {
      const subject = await options.find(payload);
      const via = subject?.status === "pending" ? options.via(subject) : undefined;
      if (!subject || via === undefined) return;
      try {
        if (await options.ask(subject, via)) return;
      } catch (error) {
        options.logger.warn({ kind: options.kind, reference: subject.reference, err: (error as Error).message }, "status query failed; will ask again");
      }
      if (await options.expireIfOutlived?.(subject, via)) return;
      const retryInMs = options.nextWaitMs ? options.nextWaitMs(subject, via, job.attempt) : Math.min(options.firstWaitMs(via) * 2 ** job.attempt, MAX_WAIT_MS);
      return { retryInMs };
    },
  };
}
